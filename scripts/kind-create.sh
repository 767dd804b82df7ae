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
# With INTERNAL_NETWORK=yes gpulab creates the network itself, `--internal` (no route beyond the host: an offline
# host, or a lab for tests); on any internal network the host reaches the node at its address there (kind-lib.sh).
# env: CLUSTER_NAME, NODE_IMAGE, NETWORK, OWNER, PULUMI_COMMAND_STDOUT/STDERR (the previous run's, if any)
#      (OUTPUT=record and INTERNAL_NETWORK=yes are set on the command line: OUTPUT=record only marks the command
#      line of states that printed the kubeconfig)
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
    if [ "${INTERNAL_NETWORK:-}" = yes ]; then
      # kind would make a network with a route out; gpulab makes this one itself, and kind uses what exists.
      bounded 60 docker network create --internal --label "gpulab.io/owner=$OWNER" "$NETWORK" >/dev/null
      log "created Docker network $NETWORK (--internal: no route beyond this host)"
    fi
  fi
  if [ "${INTERNAL_NETWORK:-}" = yes ] && [ "$(bounded 60 docker network inspect -f '{{.Internal}}' "$NETWORK")" != true ]; then
    die "Docker network $NETWORK exists and is not --internal, but gpulab:management.internalNetwork asks for one;" \
      "remove it (docker network rm $NETWORK) or set gpulab:management.network to another name"
  fi
  # The kubelet's failCgroupV1 defaults to true from Kubernetes v1.35 (pkg/kubelet/apis/config/v1beta1/defaults.go)
  # and then refuses to start on a cgroup v1 host (validation_linux.go checks it only there): kind's own kubeadm
  # config does not set it (pkg/cluster/internal/kubeadm/config.go), so a cgroup v1 host could run no kind node.
  # false changes nothing on cgroup v2.
  cat >"$GPULAB_RUN_DIR/kind.yaml" <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  labels:
    gpulab.io/owner: "$OWNER"
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  failCgroupV1: false
YAML
  # A throwaway --kubeconfig: gpulab never writes the user's ~/.kube/config.
  # A network of gpulab's own (kind's KIND_EXPERIMENTAL_DOCKER_NETWORK), so destroy can remove it.
  # kind's output as it comes, and kept to tell its failures apart.
  exec {kind_log}> >(tee "$GPULAB_RUN_DIR/kind-create.log" >&2)
  tee_pid=$!
  status=0
  KIND_EXPERIMENTAL_DOCKER_NETWORK="$NETWORK" \
    bounded 900 kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" --config "$GPULAB_RUN_DIR/kind.yaml" \
    --kubeconfig "$GPULAB_RUN_DIR/kind-kubeconfig" --wait 5m 2>&"$kind_log" || status=$?
  exec {kind_log}>&-
  wait "$tee_pid" || true # all of it written
  if [ "$status" != 0 ]; then
    # On an --internal network kind's last step, writing its kubeconfig with the API server's host port, cannot
    # succeed (there is none); every step before it (kubeadm init, CNI, storage, node Ready) has. Anything else
    # is a real failure.
    grep -q 'failed to get api server port' "$GPULAB_RUN_DIR/kind-create.log" && [ -n "$(kind_internal_address)" ] ||
      die "kind could not create cluster $CLUSTER_NAME (above)"
    log "kind cluster $CLUSTER_NAME is up; kind could not write its own kubeconfig on the --internal network" \
      "$NETWORK (no published port), so gpulab reaches its API server at the node's address there"
  fi
  node_id=$(kind_node_id)
  [ -n "$node_id" ] || die "kind created cluster $CLUSTER_NAME but its node container $node is not there"
fi
[ "$network" = created ] && log "gpulab created Docker network $NETWORK" # also readable in the logs
printf 'cluster=%s\nnode=%s\nnetwork=%s\nowner=%s\n' "$CLUSTER_NAME" "$node_id" "$network" "$OWNER"
