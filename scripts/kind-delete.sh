#!/usr/bin/env bash
# Deletes the kind management cluster and, once nothing is attached to it, its Docker network.
# Runs last on destroy: tenant workers on the network depend on the cluster, so they are gone first.
# env: CLUSTER_NAME, NETWORK
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${CLUSTER_NAME:?}" "${NETWORK:?}"

kind delete cluster --name "$CLUSTER_NAME" >&2 # succeeds when the cluster is already gone
if docker network inspect "$NETWORK" >/dev/null 2>&1; then
  attached=$(docker network inspect "$NETWORK" --format '{{len .Containers}}')
  if [ "$attached" = "0" ]; then
    docker network rm "$NETWORK" >/dev/null
    log "removed Docker network $NETWORK"
  else
    log "kept Docker network $NETWORK: $attached container(s) not created by gpulab are still attached"
  fi
fi
