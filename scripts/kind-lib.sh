#!/usr/bin/env bash
# shellcheck disable=SC2034 # RECORD_* are read by the scripts that source this file
# Helpers for kind-create.sh, kind-delete.sh and kind-kubeconfig.sh (sourced after lib.sh): how gpulab tells
# its own kind cluster and Docker network from someone else's. Every call is bounded (lib.sh).
# env: CLUSTER_NAME
set -euo pipefail

# read_kind_record: the previous create's record (kind-create.sh's stdout, from the state) into RECORD_NODE,
# and RECORD_NETWORK (created|existing). A state from before the record held the kubeconfig
# there: RECORD_LEGACY_CA is then its CA, and the network record is the create's stderr of that time.
read_kind_record() {
  local previous=${GPULAB_PREVIOUS_STDOUT:-}
  RECORD_NODE="" RECORD_NETWORK="" RECORD_LEGACY_CA=""
  if grep -q '^node=' <<<"$previous"; then
    RECORD_NODE=$(sed -n 's/^node=//p' <<<"$previous" | sed -n 1p)
    RECORD_NETWORK=$(sed -n 's/^network=//p' <<<"$previous" | sed -n 1p)
  elif [ -n "$previous" ]; then
    RECORD_LEGACY_CA=$(awk '$1 == "certificate-authority-data:" { print $2; exit }' <<<"$previous")
    # Only a positive record makes the network gpulab's; anything else keeps it.
    if grep -qF "gpulab created Docker network ${NETWORK:-}" <<<"${GPULAB_PREVIOUS_STDERR:-}"; then
      RECORD_NETWORK=created
    else
      RECORD_NETWORK=existing
    fi
  fi
  case "$RECORD_NETWORK" in "" | created | existing) ;; *) RECORD_NETWORK=existing ;; esac
}

kind_cluster_exists() { has_line "$CLUSTER_NAME" "$(bounded 60 kind get clusters 2>/dev/null)"; }

# The id of the cluster's node container: unique per container, readable without the cluster's API.
kind_node_id() { bounded 60 docker inspect --format '{{.Id}}' "$CLUSTER_NAME-control-plane" 2>/dev/null || true; }

# kind_internal_address: the node's address on its Docker network when that network is --internal, else
# nothing. Docker publishes no port for a container on an internal network, so kind cannot name the host port
# of the API server there (pkg/cluster/internal/providers/docker/provider.go GetAPIServerEndpoint reads
# NetworkSettings.Ports); the host reaches the node at that address instead (it is the bridge's other side).
kind_internal_address() {
  local network
  # shellcheck disable=SC2016 # a Go template, not shell
  network=$(bounded 60 docker inspect -f '{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}' \
    "$CLUSTER_NAME-control-plane" 2>/dev/null | awk '{ print $1 }') || return 0
  [ -n "$network" ] && [ "$(bounded 60 docker network inspect -f '{{.Internal}}' "$network" 2>/dev/null)" = true ] || return 0
  bounded 60 docker inspect -f "{{(index .NetworkSettings.Networks \"$network\").IPAddress}}" "$CLUSTER_NAME-control-plane"
}

# kind_kubeconfig: the cluster's kubeconfig for this host: kind's own, or on an --internal network kind's
# in-network one (server https://<node>:6443) with the node's address for its name, which the API server's
# certificate carries (kubeadm puts the advertise address in it).
kind_kubeconfig() {
  local address
  address=$(kind_internal_address)
  if [ -z "$address" ]; then
    bounded 60 kind get kubeconfig --name "$CLUSTER_NAME"
    return
  fi
  bounded 60 kind get kubeconfig --internal --name "$CLUSTER_NAME" |
    sed "s|server: https://$CLUSTER_NAME-control-plane:6443|server: https://$address:6443|"
}

# kind_ca: the CA of the cluster's kubeconfig (kind reads it from the node; no API call).
kind_ca() {
  kind_kubeconfig 2>/dev/null | awk '$1 == "certificate-authority-data:" { print $2; exit }'
}

# kind_owner: the gpulab.io/owner label of the cluster's node; fails when the API does not answer.
kind_owner() {
  kind_kubeconfig >"$GPULAB_RUN_DIR/kubeconfig" &&
    kc --kubeconfig "$GPULAB_RUN_DIR/kubeconfig" get node "$CLUSTER_NAME-control-plane" \
      -o jsonpath='{.metadata.labels.gpulab\.io/owner}'
}
