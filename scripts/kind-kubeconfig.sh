#!/usr/bin/env bash
# Prints the kubeconfig of gpulab's kind cluster on stdout (the Command marks it secret and is made with
# addPreviousOutputInEnv off, so this secret is never handed to another run's environment). Only for the
# cluster kind-create.sh recorded: a same-named cluster with another node container is someone else's.
# env: CLUSTER_NAME, RECORD (kind-create.sh's stdout)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
# shellcheck source=kind-lib.sh
source "${BASH_SOURCE[0]%/*}/kind-lib.sh"
: "${CLUSTER_NAME:?}" "${RECORD:?}"
record=$RECORD
unset RECORD # not for the children: a record is not secret, but nothing else belongs in their environment

recorded=$(sed -n 's/^node=//p' <<<"$record" | sed -n 1p)
[ -n "$recorded" ] && [ "$(kind_node_id)" = "$recorded" ] ||
  die "kind cluster $CLUSTER_NAME is not the one gpulab created (node container ${recorded:0:12}); run pulumi up again"
kind_kubeconfig
