#!/usr/bin/env bash
# Joins a tenant worker to its Kamaji control plane with kubeadm, the way Kamaji's own e2e does
# (e2e/worker_kubeadm_join_test.go): wait for systemd, create a join command against the tenant
# (retrying while Kamaji still sets up RBAC), run it. The worker is a kindest/node container
# (CONTAINER set: commands go through docker exec) or the machine this runs on (sent over SSH).
# The join command carries a bootstrap token: it never reaches stdout, stderr or a file outside
# the node's tmpfs.
# stdin: tenant admin kubeconfig. env: CONTAINER or NODE_NAME, TENANT, TIMEOUT (s, per step),
#        IGNORE_PREFLIGHT (kubeadm preflight checks to skip), KUBELET_CONF
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
timeout=${TIMEOUT:-300}
node=${CONTAINER:-${NODE_NAME:?set CONTAINER or NODE_NAME}}
kubelet_conf=${KUBELET_CONF:-/etc/kubernetes/kubelet.conf}

# on_node COMMAND...: run on the worker (in its container, or right here).
on_node() {
  if [ -n "${CONTAINER:-}" ]; then docker exec "$CONTAINER" "$@"; else "$@"; fi
}

node_booted() {
  local state
  state=$(on_node systemctl is-system-running 2>&1 || true)
  case "$state" in
  running | degraded) return 0 ;;
  *)
    echo "systemd state: $state" >&2
    return 1
    ;;
  esac
}

already_joined() { on_node test -s "$kubelet_conf"; }

# Kamaji's soot controller creates the kubeadm RBAC after the control plane turns Ready; until
# then token creation is Forbidden. Any failure is retried to the deadline; the last error is shown.
create_join_command() {
  join_command=$(on_node kubeadm token create --print-join-command --ttl 15m --kubeconfig "$admin_conf")
}

kubeconfig_from_stdin

# kind waits for systemd in a node before using it; docker run returns as soon as PID 1 starts.
wait_for "$timeout" "systemd to boot on $node" node_booted

if already_joined; then
  log "$node is already joined to tenant ${TENANT:-?}; nothing to do"
  exit 0
fi

if [ -n "${CONTAINER:-}" ]; then
  # /tmp in the node is a tmpfs (kind's flags), so the admin kubeconfig never touches a disk there.
  admin_conf=/tmp/gpulab-admin.conf
  docker exec -i "$CONTAINER" sh -c 'umask 077 && cat >/tmp/gpulab-admin.conf' <"$KUBECONFIG_FILE"
  trap 'docker exec "$CONTAINER" rm -f /tmp/gpulab-admin.conf >/dev/null 2>&1 || true; rm -f "$KUBECONFIG_FILE"' EXIT
else
  admin_conf=$KUBECONFIG_FILE # already a private temp file, removed on exit
fi

join_command=""
wait_for "$timeout" "a kubeadm join command from tenant ${TENANT:-?}" create_join_command
read -r -a join_args <<<"$join_command"
[ "${join_args[0]:-}" = "kubeadm" ] && [ "${join_args[1]:-}" = "join" ] ||
  die "tenant ${TENANT:-?} returned something other than a kubeadm join command"
[ -n "${NODE_NAME:-}" ] && join_args+=(--node-name "$NODE_NAME")

log "joining $node to tenant ${TENANT:-?}"
join_errors=$(mktemp "${TMPDIR:-/tmp}/gpulab-join.XXXXXX")
# Container default: SystemVerification (the node is a container, its kernel config unreadable),
# FileExisting (kind images lack some host binaries kubeadm checks for), Swap (failSwapOn=false).
if ! on_node "${join_args[@]}" --ignore-preflight-errors="${IGNORE_PREFLIGHT:-SystemVerification,FileExisting,Swap}" \
  >/dev/null 2>"$join_errors"; then
  # kubeadm's own error output does not contain the token; show it without the command line.
  sed 's/^/    /' "$join_errors" >&2
  rm -f "$join_errors"
  die "kubeadm join failed on $node (see above)"
fi
rm -f "$join_errors"
log "$node joined tenant ${TENANT:-?}"
