#!/usr/bin/env bash
# Waits until a new tenant API server is usable with its admin kubeconfig. "Ready" on the
# TenantControlPlane only means its Deployment is up; the kubeadm:cluster-admins binding that
# admin.conf needs and the cluster-info ConfigMap that kubeadm join reads are created afterwards
# by Kamaji's soot controllers (Kamaji e2e/worker_kubeadm_join_test.go retries for this).
# stdin: tenant admin kubeconfig. env: TENANT, TIMEOUT (s)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
kubeconfig_from_stdin

admin_is_cluster_admin() { [ "$(kc auth can-i '*' '*' --all-namespaces)" = "yes" ]; }
cluster_info_published() { kc -n kube-public get configmap cluster-info -o name; }

wait_for "${TIMEOUT:-300}" "tenant ${TENANT:-?}: admin.conf to be authorised (kubeadm:cluster-admins)" admin_is_cluster_admin
wait_for "${TIMEOUT:-300}" "tenant ${TENANT:-?}: kube-public/cluster-info for kubeadm discovery" cluster_info_published
