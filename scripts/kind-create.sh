#!/usr/bin/env bash
# Creates the kind management cluster unless it already exists, then prints its kubeconfig on stdout
# (the Command marks stdout secret). Idempotent, so a re-run or a retried `pulumi up` is safe.
# env: CLUSTER_NAME, NODE_IMAGE, NETWORK (the Docker network kind puts its node on)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${CLUSTER_NAME:?}" "${NODE_IMAGE:?}" "${NETWORK:?}"

command -v kind >/dev/null || die "kind is not on PATH; run 'make up' (installs it into ./bin) or install kind ${KIND_VERSION:-}"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  log "kind cluster $CLUSTER_NAME exists; reusing it"
else
  # A throwaway --kubeconfig: gpulab never writes the user's ~/.kube/config.
  scratch="$GPULAB_RUN_DIR/kind-kubeconfig"
  # A network of gpulab's own (kind's KIND_EXPERIMENTAL_DOCKER_NETWORK), so destroy can remove it.
  KIND_EXPERIMENTAL_DOCKER_NETWORK="$NETWORK" \
    kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --kubeconfig "$scratch" --wait 5m >&2
fi
kind get kubeconfig --name "$CLUSTER_NAME"
