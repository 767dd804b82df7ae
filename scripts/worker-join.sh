#!/usr/bin/env bash
# Joins a tenant worker container to its Kamaji control plane with kubeadm, the way Kamaji's own
# e2e does (e2e/worker_kubeadm_join_test.go): wait for systemd, create a join command against the
# tenant (retrying while Kamaji still sets up RBAC), run it in the container.
# The join command carries a bootstrap token: it never reaches stdout, stderr or a file outside
# the container's tmpfs.
# stdin: tenant admin kubeconfig. env: CONTAINER, TENANT, TIMEOUT (s, per step)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
: "${CONTAINER:?}"
timeout=${TIMEOUT:-300}

node_booted() {
  local state
  state=$(docker exec "$CONTAINER" systemctl is-system-running 2>&1 || true)
  case "$state" in
  running | degraded) return 0 ;;
  *)
    echo "systemd state: $state" >&2
    return 1
    ;;
  esac
}

already_joined() { docker exec "$CONTAINER" test -s /etc/kubernetes/kubelet.conf; }

# Kamaji's soot controller creates the kubeadm RBAC after the control plane turns Ready; until
# then token creation is Forbidden. Any failure is retried to the deadline; the last error is shown.
create_join_command() {
  join_command=$(docker exec "$CONTAINER" kubeadm token create --print-join-command --ttl 15m \
    --kubeconfig /tmp/gpulab-admin.conf)
}

kubeconfig_from_stdin

# kind waits for systemd in a node before using it; docker run returns as soon as PID 1 starts.
wait_for "$timeout" "systemd to boot in $CONTAINER" node_booted

if already_joined; then
  log "$CONTAINER is already joined to tenant ${TENANT:-?}; nothing to do"
  exit 0
fi

# /tmp in the node is a tmpfs (kind's flags), so the admin kubeconfig never touches a disk there.
docker exec -i "$CONTAINER" sh -c 'umask 077 && cat >/tmp/gpulab-admin.conf' <"$KUBECONFIG_FILE"
trap 'docker exec "$CONTAINER" rm -f /tmp/gpulab-admin.conf >/dev/null 2>&1 || true; rm -f "$KUBECONFIG_FILE"' EXIT

join_command=""
wait_for "$timeout" "a kubeadm join command from tenant ${TENANT:-?}" create_join_command
read -r -a join_args <<<"$join_command"
[ "${join_args[0]:-}" = "kubeadm" ] && [ "${join_args[1]:-}" = "join" ] ||
  die "tenant ${TENANT:-?} returned something other than a kubeadm join command"

log "joining $CONTAINER to tenant ${TENANT:-?}"
# SystemVerification: the node is a container (kernel config unreadable); FileExisting: kind images
# lack some host binaries kubeadm checks for; Swap: kubelet runs with failSwapOn=false.
if ! docker exec "$CONTAINER" "${join_args[@]}" \
  --ignore-preflight-errors=SystemVerification,FileExisting,Swap >/dev/null 2>"${TMPDIR:-/tmp}/gpulab-join.$$"; then
  # kubeadm's own error output does not contain the token; show it without the command line.
  sed 's/^/    /' "${TMPDIR:-/tmp}/gpulab-join.$$" >&2
  rm -f "${TMPDIR:-/tmp}/gpulab-join.$$"
  die "kubeadm join failed in $CONTAINER (see above)"
fi
rm -f "${TMPDIR:-/tmp}/gpulab-join.$$"
log "$CONTAINER joined tenant ${TENANT:-?}"
