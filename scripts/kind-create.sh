#!/usr/bin/env bash
# Creates the kind management cluster unless it already exists, then prints its kubeconfig on stdout
# (the Command marks stdout secret). Idempotent, so a re-run or a retried `pulumi up` is safe.
#
# gpulab adopts only what it created: its cluster's node carries the label gpulab.io/owner=OWNER (the
# project and stack). A cluster of that name that is someone else's (another stack's, or a user's
# own kind cluster) is refused with the way out; a cluster this Command created before owners were
# recorded (it has a previous stdout in the state) is labelled now. Whether gpulab created the Docker
# network is recorded on stderr (kept in the state), and kind-delete.sh removes only such a network.
# env: CLUSTER_NAME, NODE_IMAGE, NETWORK (the Docker network kind puts its node on), OWNER,
#      PULUMI_COMMAND_STDOUT/STDERR (set by pulumi-command from the previous run, if any)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${CLUSTER_NAME:?}" "${NODE_IMAGE:?}" "${NETWORK:?}" "${OWNER:?}"
OWNS_NETWORK="gpulab created Docker network $NETWORK"
node="$CLUSTER_NAME-control-plane"

command -v kind >/dev/null || die "kind is not on PATH; run 'make up' (installs it into ./bin) or install kind ${KIND_VERSION:-}"

owner_of_cluster() {
  kind get kubeconfig --name "$CLUSTER_NAME" >"$GPULAB_RUN_DIR/kubeconfig"
  kc --kubeconfig "$GPULAB_RUN_DIR/kubeconfig" get node "$node" -o jsonpath='{.metadata.labels.gpulab\.io/owner}'
}

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  owner=$(owner_of_cluster) || die "kind cluster $CLUSTER_NAME exists but does not answer; delete it" \
    "(kind delete cluster --name $CLUSTER_NAME) or set gpulab:management.name to another name"
  if [ "$owner" = "$OWNER" ]; then
    log "kind cluster $CLUSTER_NAME exists (created by $OWNER); reusing it"
  elif [ -z "$owner" ] && [ -n "${GPULAB_PREVIOUS_STDOUT:-}" ]; then
    log "kind cluster $CLUSTER_NAME was created by this stack before owners were recorded; marking it"
    kc --kubeconfig "$GPULAB_RUN_DIR/kubeconfig" label node "$node" "gpulab.io/owner=$OWNER" >/dev/null
  else
    [ -n "$owner" ] || owner="none, not made by gpulab"
    die "a kind cluster named $CLUSTER_NAME already exists and was not created by $OWNER" \
      "(owner: $owner); gpulab will not adopt or delete it. Set gpulab:management.name" \
      "to another name, or delete it yourself (kind delete cluster --name $CLUSTER_NAME)"
  fi
  # Re-state whether the network is gpulab's: the state keeps only the last run's stderr.
  if grep -qF "$OWNS_NETWORK" <<<"${GPULAB_PREVIOUS_STDERR:-}"; then log "$OWNS_NETWORK"; fi
else
  if docker network inspect "$NETWORK" >/dev/null 2>&1; then
    log "Docker network $NETWORK exists and was not created by gpulab: using it; destroy will keep it"
  fi
  printf 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  labels:\n    gpulab.io/owner: "%s"\n' \
    "$OWNER" >"$GPULAB_RUN_DIR/kind.yaml"
  network_existed=$(docker network inspect "$NETWORK" >/dev/null 2>&1 && echo yes || echo no)
  # A throwaway --kubeconfig: gpulab never writes the user's ~/.kube/config.
  # A network of gpulab's own (kind's KIND_EXPERIMENTAL_DOCKER_NETWORK), so destroy can remove it.
  KIND_EXPERIMENTAL_DOCKER_NETWORK="$NETWORK" \
    kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --config "$GPULAB_RUN_DIR/kind.yaml" \
    --kubeconfig "$GPULAB_RUN_DIR/kind-kubeconfig" --wait 5m >&2
  [ "$network_existed" = no ] && log "$OWNS_NETWORK"
fi
kind get kubeconfig --name "$CLUSTER_NAME"
