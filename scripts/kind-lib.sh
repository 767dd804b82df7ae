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
    RECORD_NODE=$(sed -n 's/^node=//p' <<<"$previous" | head -n 1)
    RECORD_NETWORK=$(sed -n 's/^network=//p' <<<"$previous" | head -n 1)
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

kind_cluster_exists() { bounded 60 kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; }

# The id of the cluster's node container: unique per container, readable without the cluster's API.
kind_node_id() { bounded 60 docker inspect --format '{{.Id}}' "$CLUSTER_NAME-control-plane" 2>/dev/null || true; }

# kind_ca: the CA of the cluster's kubeconfig (kind reads it from the node; no API call).
kind_ca() {
  bounded 60 kind get kubeconfig --name "$CLUSTER_NAME" 2>/dev/null |
    awk '$1 == "certificate-authority-data:" { print $2; exit }'
}

# kind_owner: the gpulab.io/owner label of the cluster's node; fails when the API does not answer.
kind_owner() {
  bounded 60 kind get kubeconfig --name "$CLUSTER_NAME" >"$GPULAB_RUN_DIR/kubeconfig" &&
    kc --kubeconfig "$GPULAB_RUN_DIR/kubeconfig" get node "$CLUSTER_NAME-control-plane" \
      -o jsonpath='{.metadata.labels.gpulab\.io/owner}'
}
