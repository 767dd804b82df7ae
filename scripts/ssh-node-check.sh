#!/usr/bin/env bash
# Runs on a real worker machine (sent over SSH, as root) before it joins a tenant: everything
# kubeadm join and the kubelet need, each missing piece named with what to do. Changes nothing.
# env: KUBERNETES_VERSION (the tenant's), NODE (for messages), GPULAB_ROOT (tests only: a fake /)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${KUBERNETES_VERSION:?}"
root=${GPULAB_ROOT:-}
problems=()

# A CRI runtime: containerd or CRI-O.
if [ ! -S "$root/run/containerd/containerd.sock" ] && [ ! -S "$root/var/run/crio/crio.sock" ]; then
  problems+=("no container runtime socket (containerd or CRI-O): install and start containerd")
fi

# kubeadm and kubelet at exactly the tenant's version (the kubelet must not be newer than the API server).
if ! command -v kubeadm >/dev/null; then
  problems+=("kubeadm is not installed: install kubeadm $KUBERNETES_VERSION")
elif [ "$(bounded 30 kubeadm version -o short 2>/dev/null)" != "$KUBERNETES_VERSION" ]; then
  problems+=("kubeadm is $(bounded 30 kubeadm version -o short 2>/dev/null || echo unknown), the tenant runs $KUBERNETES_VERSION: install kubeadm $KUBERNETES_VERSION")
fi
if ! command -v flock >/dev/null; then
  problems+=("flock is not installed (gpulab's join holds a lock with it): install util-linux")
fi
if ! command -v kubelet >/dev/null; then
  problems+=("kubelet is not installed: install kubelet $KUBERNETES_VERSION")
else
  kubelet_version=$(bounded 30 kubelet --version 2>/dev/null | awk '{print $2}')
  if [ "$kubelet_version" != "$KUBERNETES_VERSION" ]; then
    problems+=("kubelet is ${kubelet_version:-unknown}, the tenant runs $KUBERNETES_VERSION: install kubelet $KUBERNETES_VERSION")
  fi
fi

# Kernel: bridged traffic through iptables, forwarding on. The sysctl is the kernel's sign that the bridge
# netfilter hooks exist, br_netfilter built in (no /sys/module/br_netfilter) or loaded as a module.
bridge_nf=$(cat "$root/proc/sys/net/bridge/bridge-nf-call-iptables" 2>/dev/null || echo missing)
if [ "$bridge_nf" = missing ]; then
  problems+=("bridge netfilter is off (no net.bridge.bridge-nf-call-iptables): modprobe br_netfilter (and add it to /etc/modules-load.d)")
elif [ "$bridge_nf" != 1 ]; then
  problems+=("net.bridge.bridge-nf-call-iptables is $bridge_nf: sysctl -w net.bridge.bridge-nf-call-iptables=1 (and persist it in /etc/sysctl.d)")
fi
if [ "$(cat "$root/proc/sys/net/ipv4/ip_forward" 2>/dev/null || echo 0)" != "1" ]; then
  problems+=("net.ipv4.ip_forward is off: sysctl -w net.ipv4.ip_forward=1 (and persist it in /etc/sysctl.d)")
fi

# Swap is tolerated: tenant kubelets run with failSwapOn=false.
if [ -r "$root/proc/swaps" ] && [ "$(wc -l <"$root/proc/swaps")" -gt 1 ]; then
  log "${NODE:-this machine}: swap is on; the tenant's kubelet runs with failSwapOn=false"
fi

if ((${#problems[@]})); then
  log "${NODE:-this machine} cannot join tenant (Kubernetes $KUBERNETES_VERSION) yet:"
  printf '[gpulab]   - %s\n' "${problems[@]}" >&2
  exit 1
fi
log "${NODE:-this machine} is ready to join (kubeadm and kubelet $KUBERNETES_VERSION, runtime, kernel settings)"
