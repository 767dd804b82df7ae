#!/usr/bin/env bash
# Deletes the kind management cluster and, once nothing is attached to it, its Docker network.
# Runs last on destroy: tenant workers on the network depend on the cluster, so they are gone first.
# Only what gpulab created goes (kind-create.sh's record, from the state): the cluster whose node
# container has the recorded id (for states from before the record: the recorded kubeconfig's CA; with
# no record at all: our owner label, which needs the API to answer), and the network only if the record
# says gpulab created it. Anything else is kept and named, and destroy goes on.
# env: CLUSTER_NAME, NETWORK, OWNER, PULUMI_COMMAND_STDOUT/STDERR (the create's, from the state)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
# shellcheck source=kind-lib.sh
source "${BASH_SOURCE[0]%/*}/kind-lib.sh"
: "${CLUSTER_NAME:?}" "${NETWORK:?}"

read_kind_record
if kind_cluster_exists; then
  ours="" why=""
  if [ -n "$RECORD_NODE" ]; then
    node_id=$(kind_node_id)
    [ "$node_id" = "$RECORD_NODE" ] && ours=yes
    why="its node container (${node_id:0:12}) is not the one gpulab created (${RECORD_NODE:0:12})"
  elif [ -n "$RECORD_LEGACY_CA" ]; then
    [ "$(kind_ca)" = "$RECORD_LEGACY_CA" ] && ours=yes
    why="its CA is not the one of the cluster gpulab created"
  elif owner=$(kind_owner 2>/dev/null); then
    [ -n "$owner" ] && [ "$owner" = "${OWNER:-}" ] && ours=yes
    why="its node is labelled gpulab.io/owner=${owner:-<none>}, not ${OWNER:-<this stack>}"
  else
    why="its API does not answer, so gpulab cannot tell whose it is"
  fi
  if [ -z "$ours" ]; then
    log "kept kind cluster $CLUSTER_NAME: $why. If it is yours to remove: kind delete cluster --name $CLUSTER_NAME"
    exit 0
  fi
  bounded 300 kind delete cluster --name "$CLUSTER_NAME" >&2
  log "deleted kind cluster $CLUSTER_NAME"
else
  log "kind cluster $CLUSTER_NAME is already gone"
fi

if bounded 60 docker network inspect "$NETWORK" >/dev/null 2>&1; then
  if [ "$RECORD_NETWORK" != created ]; then
    log "kept Docker network $NETWORK: gpulab did not create it"
    exit 0
  fi
  attached=$(bounded 60 docker network inspect "$NETWORK" --format '{{len .Containers}}')
  if [ "$attached" = "0" ]; then
    bounded 60 docker network rm "$NETWORK" >/dev/null
    log "removed Docker network $NETWORK"
  else
    log "kept Docker network $NETWORK: $attached container(s) not created by gpulab are still attached"
  fi
fi
