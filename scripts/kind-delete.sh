#!/usr/bin/env bash
# Deletes the kind management cluster and, once nothing is attached to it, its Docker network.
# Runs last on destroy: tenant workers on the network depend on the cluster, so they are gone first.
# Only what gpulab created goes: a cluster whose node names another owner is kept (someone else's
# cluster took the name after ours was deleted by hand), and the network only if kind-create.sh
# recorded creating it (or, for states from before that record, when nothing is attached).
# env: CLUSTER_NAME, NETWORK, OWNER, PULUMI_COMMAND_STDERR (the create's stderr, from the state)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${CLUSTER_NAME:?}" "${NETWORK:?}"
node="$CLUSTER_NAME-control-plane"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  owner=""
  if kind get kubeconfig --name "$CLUSTER_NAME" >"$GPULAB_RUN_DIR/kubeconfig" 2>/dev/null; then
    owner=$(kc --kubeconfig "$GPULAB_RUN_DIR/kubeconfig" get node "$node" \
      -o jsonpath='{.metadata.labels.gpulab\.io/owner}' 2>/dev/null || true)
  fi
  if [ -n "$owner" ] && [ "$owner" != "${OWNER:-}" ]; then
    log "kept kind cluster $CLUSTER_NAME: it belongs to $owner, not to ${OWNER:-this stack}"
    exit 0
  fi
  kind delete cluster --name "$CLUSTER_NAME" >&2
else
  log "kind cluster $CLUSTER_NAME is already gone"
fi

if docker network inspect "$NETWORK" >/dev/null 2>&1; then
  recorded=${GPULAB_PREVIOUS_STDERR:-}
  if [ -n "$recorded" ] && ! grep -qF "gpulab created Docker network $NETWORK" <<<"$recorded" &&
    grep -qF "was not created by gpulab" <<<"$recorded"; then
    log "kept Docker network $NETWORK: it existed before gpulab"
    exit 0
  fi
  attached=$(docker network inspect "$NETWORK" --format '{{len .Containers}}')
  if [ "$attached" = "0" ]; then
    docker network rm "$NETWORK" >/dev/null
    log "removed Docker network $NETWORK"
  else
    log "kept Docker network $NETWORK: $attached container(s) not created by gpulab are still attached"
  fi
fi
