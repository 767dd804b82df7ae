#!/usr/bin/env bash
# Runs on a real worker machine (over SSH, as root) when it leaves its tenant on destroy: undoes
# kubeadm join. Idempotent. Firewall rules kube-proxy and the CNI left are listed, not flushed:
# the machine may have rules of its own.
# env: NODE
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

if command -v kubeadm >/dev/null; then
  bounded 300 kubeadm reset --force >&2
fi
rm -rf /etc/cni/net.d/*calico* /var/lib/calico
log "${NODE:-this machine} left its tenant; review leftover iptables rules with: iptables-save | grep -i -e kube -e cali"
