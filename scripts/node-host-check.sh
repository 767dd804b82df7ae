#!/usr/bin/env bash
# Runs inside a privileged helper container on the host network (see host-prereqs.sh).
# Each fix only raises a limit or loads a module; anything else is left to the user with the exact
# command to run. Sources: kind pkg/cluster/internal/kubeadm/config.go (conntrack maxPerCore 0) and
# kubernetes-sigs/kind#2240; Kamaji controllers/soot/controllers/kubeproxy.go; Kamaji e2e/worker_kubeadm_join_test.go
# (br_netfilter, swapoff).
# env: GPULAB_ROOT (tests only: a fake /)
set -euo pipefail
root=${GPULAB_ROOT:-}

fail() {
  echo "[gpulab] ERROR: $1" >&2
  echo "[gpulab]   fix it on the Docker host with: $2" >&2
  exit 1
}

# raise_to KEY MIN: make the sysctl KEY at least MIN.
raise_to() {
  local key=$1 min=$2 path current
  path=$root/proc/sys/${key//.//}
  current=$(cat "$path")
  if [ "$current" -ge "$min" ]; then
    return 0
  fi
  echo "[gpulab] raising $key from $current to $min" >&2
  echo "$min" >"$path" 2>/dev/null || fail "$key is $current, below the $min a node container needs" "sudo sysctl -w $key=$min"
}

# Bridged pod traffic must traverse iptables (kube-proxy, Calico). The kernel's own sign that the bridge
# netfilter hooks exist is their sysctl, net.bridge.bridge-nf-call-iptables, there whenever br_netfilter's code
# is in the kernel: built in (then there is no /sys/module/br_netfilter, and nothing for modprobe to load) or
# loaded as a module. Only when it is missing may a module help.
if [ ! -e "$root/proc/sys/net/bridge/bridge-nf-call-iptables" ]; then
  modprobe br_netfilter 2>/dev/null || true
  [ -e "$root/proc/sys/net/bridge/bridge-nf-call-iptables" ] ||
    fail "bridge netfilter is off: no net.bridge.bridge-nf-call-iptables (the br_netfilter module is not loaded)" \
      "sudo modprobe br_netfilter"
fi
raise_to net.bridge.bridge-nf-call-iptables 1

# kube-proxy in a container cannot set nf_conntrack_max (read-only outside the host namespace) and
# crash-loops unless the host already has at least kubeadm's default: max(131072, 32768 per CPU).
if [ ! -e "$root/proc/sys/net/netfilter/nf_conntrack_max" ]; then
  modprobe nf_conntrack 2>/dev/null || fail "the nf_conntrack kernel module is not loaded" "sudo modprobe nf_conntrack"
fi
cpus=$(nproc)
conntrack_min=$((32768 * cpus))
if [ "$conntrack_min" -lt 131072 ]; then conntrack_min=131072; fi
raise_to net.netfilter.nf_conntrack_max "$conntrack_min"

# Several node containers share the host's inotify limits (kind's known issue "too many open files").
raise_to fs.inotify.max_user_instances 512
raise_to fs.inotify.max_user_watches 524288

# Swap is tolerated: tenant kubelets run with failSwapOn=false (TenantControlPlane kubelet patch).
if [ "$(wc -l <"$root/proc/swaps")" -gt 1 ]; then
  echo "[gpulab] note: swap is on; tenant kubelets are configured with failSwapOn=false" >&2
fi
echo "[gpulab] host prerequisites ok" >&2
