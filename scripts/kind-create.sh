#!/usr/bin/env bash
# Creates the kind management cluster unless it already exists, then prints on stdout the record of what
# gpulab owns (kept in the state, not secret; kind-kubeconfig.sh reads the kubeconfig separately):
#   cluster=NAME  node=<id of the node's Docker container>  network=created|existing  owner=OWNER
# Idempotent, so a re-run or a retried `pulumi up` is safe.
#
# gpulab adopts only what it created. Its cluster is the one whose node container has the id in the
# previous record (pulumi-command passes it to an update); a same-named cluster with another node is
# someone else's, even with our owner label or after `pulumi stack rename`. Without a record (a first run,
# or one interrupted before Pulumi saved it), only a cluster whose node carries our owner label is reused.
# State from before the record held the kubeconfig instead: the same cluster still has its CA.
# Whether the Docker network existed before gpulab is carried from record to record, so destroy never
# removes a network gpulab did not create.
# env: CLUSTER_NAME, NODE_IMAGE, NETWORK, OWNER, PULUMI_COMMAND_STDOUT/STDERR (the previous run's, if any)
#      (OUTPUT=record on the command line only marks the command line of states that printed the kubeconfig)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
# shellcheck source=kind-lib.sh
source "${BASH_SOURCE[0]%/*}/kind-lib.sh"
: "${CLUSTER_NAME:?}" "${NODE_IMAGE:?}" "${NETWORK:?}" "${OWNER:?}"
node="$CLUSTER_NAME-control-plane"

command -v kind >/dev/null || die "kind is not on PATH; run 'make up' (installs it into ./bin) or install kind ${KIND_VERSION:-}"

read_kind_record
if kind_cluster_exists; then
  node_id=$(kind_node_id)
  ours=""
  if [ -n "$RECORD_NODE" ]; then
    [ "$node_id" = "$RECORD_NODE" ] && ours="its node container is the one gpulab created"
  elif [ -n "$RECORD_LEGACY_CA" ]; then
    [ "$(kind_ca)" = "$RECORD_LEGACY_CA" ] && ours="it has the CA of the cluster gpulab created"
  else
    owner=$(kind_owner) || die "kind cluster $CLUSTER_NAME exists but its API does not answer, so gpulab cannot" \
      "tell whose it is; delete it (kind delete cluster --name $CLUSTER_NAME) or set gpulab:management.name" \
      "to another name"
    [ "$owner" = "$OWNER" ] && ours="its node carries gpulab.io/owner=$OWNER"
  fi
  [ -n "$ours" ] || die "a kind cluster named $CLUSTER_NAME already exists and was not created by $OWNER" \
    "(not the one in this stack's state); gpulab will not adopt or delete it. Set gpulab:management.name" \
    "to another name, or delete it yourself (kind delete cluster --name $CLUSTER_NAME)"
  log "kind cluster $CLUSTER_NAME exists and is this stack's ($ours); reusing it"
  if [ "$(kind_owner 2>/dev/null || true)" != "$OWNER" ]; then # a renamed stack, or a pre-label state
    kc --kubeconfig "$GPULAB_RUN_DIR/kubeconfig" label node "$node" --overwrite "gpulab.io/owner=$OWNER" >/dev/null ||
      die "cannot mark kind cluster $CLUSTER_NAME as $OWNER's (its API does not answer; see above)"
    log "marked kind cluster $CLUSTER_NAME with gpulab.io/owner=$OWNER"
  fi
  network=${RECORD_NETWORK:-existing}
else
  [ -z "$RECORD_NODE$RECORD_LEGACY_CA" ] || log "kind cluster $CLUSTER_NAME is gone (deleted by hand?); creating it again"
  if bounded 60 docker network inspect "$NETWORK" >/dev/null 2>&1; then
    # Ours if an earlier record says so (kind leaves the network behind when a cluster is deleted by hand).
    network=${RECORD_NETWORK:-existing}
    [ "$network" = created ] || log "Docker network $NETWORK exists and was not created by gpulab: using it; destroy will keep it"
  else
    network=created
  fi
  printf 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  labels:\n    gpulab.io/owner: "%s"\n' \
    "$OWNER" >"$GPULAB_RUN_DIR/kind.yaml"
  # A throwaway --kubeconfig: gpulab never writes the user's ~/.kube/config.
  # A network of gpulab's own (kind's KIND_EXPERIMENTAL_DOCKER_NETWORK), so destroy can remove it.
  KIND_EXPERIMENTAL_DOCKER_NETWORK="$NETWORK" \
    bounded 900 kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --config "$GPULAB_RUN_DIR/kind.yaml" \
    --kubeconfig "$GPULAB_RUN_DIR/kind-kubeconfig" --wait 5m >&2
  node_id=$(kind_node_id)
  [ -n "$node_id" ] || die "kind created cluster $CLUSTER_NAME but its node container $node is not there"
fi
[ "$network" = created ] && log "gpulab created Docker network $NETWORK" # also readable in the logs
printf 'cluster=%s\nnode=%s\nnetwork=%s\nowner=%s\n' "$CLUSTER_NAME" "$node_id" "$network" "$OWNER"
