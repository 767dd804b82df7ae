#!/usr/bin/env bash
# Before gpulab makes a tenant's kube-proxy objects (model/docker_lab/kube_proxy.py): waits until none of those names is
# still Kamaji's. A TenantControlPlane that had Kamaji's kube-proxy addon and lost it is cleaned up by Kamaji's soot
# controller some time after the TCP changed: it deletes those of the six objects that carry its label
# kamaji.clastix.io/project=kamaji (Kamaji internal/resources/addons/kube_proxy.go, ShouldCleanup and CleanUp), and only
# those, so gpulab's (without the label) are safe from it once they are made after it. Made before, they would meet
# Kamaji's objects (AlreadyExists). A tenant that never had the addon passes at once.
# stdin: tenant admin kubeconfig. env: TENANT, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
kubeconfig_from_stdin

KAMAJIS=kamaji.clastix.io/project=kamaji
# kubeadm's names (cmd/kubeadm/app/phases/addons/proxy), as `kubectl get -o name` prints them.
NAMES=(
  serviceaccount/kube-proxy
  clusterrolebinding.rbac.authorization.k8s.io/kubeadm:node-proxier
  role.rbac.authorization.k8s.io/kube-proxy
  rolebinding.rbac.authorization.k8s.io/kube-proxy
  configmap/kube-proxy
  daemonset.apps/kube-proxy
)

# Succeeds when no object of those names carries Kamaji's label; else names them on stderr.
kamajis_gone() {
  local found left=() name
  found=$(kc -n kube-system get serviceaccounts,roles,rolebindings,configmaps,daemonsets -l "$KAMAJIS" -o name) ||
    return 1
  found+=$'\n'$(kc get clusterrolebindings -l "$KAMAJIS" -o name) || return 1
  for name in "${NAMES[@]}"; do
    if grep -qxF "$name" <<<"$found"; then left+=("$name"); fi
  done
  ((${#left[@]} == 0)) && return 0
  echo "still Kamaji's (label $KAMAJIS): ${left[*]}" >&2
  return 1
}

wait_for "${TIMEOUT:-300}" "tenant ${TENANT:-?}: Kamaji to remove its kube-proxy addon's objects" kamajis_gone
