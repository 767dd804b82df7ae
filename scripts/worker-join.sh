#!/usr/bin/env bash
# Joins a tenant worker to its Kamaji control plane with kubeadm, as Kamaji's own e2e does
# (e2e/worker_kubeadm_join_test.go), with a JoinConfiguration made on the Pulumi host (join-config.sh, with the
# tenant's admin kubeconfig, which never reaches the worker): wait for systemd, join. The worker is a node
# container (CONTAINER set: commands go through docker exec) or the machine this runs on (sent over SSH).
#
# The bootstrap token never appears in a command line, stdout, stderr or a file on disk: the JoinConfiguration
# goes (mode 0600) onto the node's tmpfs, is read with `kubeadm join --config` and removed afterwards; the
# Pulumi host deletes the token once the join is over (delete-token.sh). A join the token would not outlive is
# not started. A node already joined to this tenant is left alone; one joined elsewhere is an error naming that
# API server; leftovers of a failed attempt are reset before the join is retried, and what a run killed with
# KILL left on the node is ended or removed first. One join runs at a time per worker (a lock; a re-run ends an
# earlier run of the same join that is still going).
# stdin: the JoinConfiguration. env: CONTAINER or NODE_NAME, TENANT, TIMEOUT (s, per step), KUBELET_CONF,
#        JOIN_CONFIG_RESOURCE (the Command that made it, named when it has expired)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
timeout=${TIMEOUT:-300}
node=${CONTAINER:-${NODE_NAME:?set CONTAINER or NODE_NAME}}
kubeadm_dir=${KUBEADM_DIR:-/etc/kubernetes}
kubelet_conf=${KUBELET_CONF:-$kubeadm_dir/kubelet.conf}
# tmpfs on the node: /tmp in a kind node (kind's flags), /run on a machine.
node_dir=/tmp
[ -n "${CONTAINER:-}" ] || node_dir=${GPULAB_NODE_TMPFS:-/run}
# Where an older gpulab copied the tenant's admin kubeconfig into a container; a run it killed may have left it.
old_admin_conf="$node_dir/gpulab-admin.conf"
join_conf="$node_dir/gpulab-join.yaml"
join_pid="$node_dir/gpulab-join.pid"
# kubeadm join waits up to 5 minutes for discovery and 4 for the kubelet's TLS bootstrap; the call is bounded
# at join_bound, and the bootstrap token must outlive it.
join_bound=$((2 * timeout + 60))

# on_node COMMAND...: run on the worker (in its container, or right here), bounded in time
# (NODE_CALL_TIMEOUT seconds, 120 unless a call sets more).
on_node() {
  if [ -n "${CONTAINER:-}" ]; then
    bounded "${NODE_CALL_TIMEOUT:-120}" docker exec "$CONTAINER" "$@"
  else
    bounded "${NODE_CALL_TIMEOUT:-120}" "$@"
  fi
}

# to_node_file PATH: standard input into a file only root can read, on the node's tmpfs.
to_node_file() {
  if [ -n "${CONTAINER:-}" ]; then
    bounded 120 docker exec -i "$CONTAINER" sh -c "umask 077 && cat >'$1'"
  else
    (
      umask 077
      cat >"$1"
    )
  fi
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

server_of() { awk '$1 == "server:" { print $2; exit }'; }

# The join writes its pid on the node (in the container's pid namespace), so that end_node_join can end it. In a
# container it runs under docker exec, and the Docker daemon does not end an exec's process when its client goes
# (moby/moby#9098; there is no API to, #35703): killing a run's docker exec leaves its kubeadm join going.
join_on_node() {
  # shellcheck disable=SC2016 # expanded on the node
  on_node sh -c 'echo $$ >"$1" && exec kubeadm join --config "$2"' sh "$join_pid" "$join_conf"
}

# end_node_join: ends a kubeadm join still running on the node (TERM, KILL 5 s later), printing its pid.
end_node_join() {
  # shellcheck disable=SC2016 # expanded on the node
  on_node sh -c 'p=$(cat "$1" 2>/dev/null) || exit 0
    rm -f "$1"
    case "$(tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null)" in *"kubeadm join "*) ;; *) exit 0 ;; esac
    kill -TERM "$p" 2>/dev/null || exit 0
    i=0
    while grep -q "^State:[[:space:]]*[^Z]" "/proc/$p/status" 2>/dev/null && [ "$i" -lt 50 ]; do # Z: ended
      sleep 0.1
      i=$((i + 1))
    done
    kill -KILL "$p" 2>/dev/null
    echo "$p"' sh "$join_pid"
}

# One join at a time per worker. Two tenants' joins on one machine (one machine under two spellings of its
# address) would otherwise race: the second would overwrite the first's JoinConfiguration, or reset its
# half-done join. So would a re-run and the run it replaces: cancelling `pulumi up` kills only the /bin/sh that
# pulumi-command started, and the script goes on. A machine's lock is on the machine itself, so every address
# that reaches it finds the same lock; a container's is on this host, where its joins run. The lock (flock(1),
# util-linux) is held by the open file, so also by every process the run started: the `kubeadm join` of a run
# killed with KILL holds it until lib.sh's next run ends it (it records the process groups of its calls).
if [ -n "${CONTAINER:-}" ]; then
  join_lock_file=$(container_join_lock "$CONTAINER")
else
  join_lock_file="$node_dir/gpulab-join.lock"
fi
command -v flock >/dev/null || die "flock is not installed on $(hostname); install util-linux"

# lock_holders: the processes that have the lock file open (/proc/PID/fd, proc(5)), one per line; not this
# script, nor the find that looked (which inherited the file, and is gone by the time the list is read).
lock_holders() {
  local fds fd pid
  fds=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "$join_lock_file" 2>/dev/null || true) # paths without spaces
  for fd in $fds; do
    pid=${fd#/proc/}
    pid=${pid%%/*}
    [ "$pid" != $$ ] && [ -e "/proc/$pid" ] || continue
    printf '    pid %s: %s\n' "$pid" "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
  done
}

exec {join_lock}>>"$join_lock_file"
if ! flock -n "$join_lock"; then
  # Who holds it, as the holder wrote it into the file: PID START_TIME TENANT SINCE.
  read -r holder_pid holder_started holder_tenant holder_since <"$join_lock_file" || true
  if [ "${holder_tenant:-}" = "${TENANT:-?}" ] && [ -n "${holder_pid:-}" ] &&
    [ "$(_gpulab_started "$holder_pid")" = "${holder_started:-}" ]; then
    # This very join, started earlier by a Pulumi run that is gone (Pulumi locks the stack: no other run of
    # it can be going on). It ends its calls and removes its files and token on TERM (lib.sh).
    log "an earlier run of this join (pid $holder_pid, since ${holder_since:-?}) is still running on $node: ending it"
    kill -TERM "$holder_pid" 2>/dev/null || true
  fi
  log "waiting up to ${timeout}s for the join lock on $node ($join_lock_file)"
  if ! bounded $((timeout + 10)) flock -w "$timeout" "$join_lock"; then
    log "the join lock on $node ($join_lock_file) is still held by:"
    lock_holders >&2
    holder="gpulab join (tenant ${holder_tenant:-unknown}, pid ${holder_pid:-unknown}, since ${holder_since:-unknown})"
    [ "${holder_tenant:-}" != "${TENANT:-?}" ] ||
      die "an earlier $holder still holds the lock on $node after ${timeout}s; end the processes above"
    die "another $holder has held the lock on $node for ${timeout}s; one machine can join one tenant only:" \
      "check that no two tenants list this machine under gpulab:tenants[].workers"
  fi
fi
# The file stays (removing a lock file another run has open would let two runs hold "the lock"); it holds no secret.
printf '%s %s %s %s\n' $$ "$(_gpulab_started $$)" "${TENANT:-?}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$join_lock_file"

# Read into memory and checked here before anything goes to the node: only a JoinConfiguration does, never
# anything else handed in by mistake (an admin kubeconfig).
material=$(cat)
[[ $'\n'"$material"$'\n' == *$'\n'"kind: JoinConfiguration"$'\n'* ]] ||
  die "standard input is not a kubeadm JoinConfiguration (join-config.sh makes it); nothing was sent to $node"
endpoint=$(printf '%s\n' "$material" | awk '$1 == "apiServerEndpoint:" { gsub(/"/, "", $2); print $2; exit }')
[ -n "$endpoint" ] || die "the JoinConfiguration on standard input has no apiServerEndpoint"
tenant_server="https://$endpoint"
# A join retried after an earlier failure gets the same material; its token may have expired.
expires=$(printf '%s\n' "$material" | sed -n 's/^# gpulab: token expires //p')
# Removed from the node (its container, or right here) when the run ends, even if it was only half written.
# shellcheck disable=SC2016 # expanded when the run ends
on_exit 'on_node rm -f "$join_conf" >/dev/null 2>&1'
printf '%s\n' "$material" | to_node_file "$join_conf"
unset material
remake="make a new one: pulumi up --replace \"\$(pulumi stack --show-urns | grep -o 'urn:[^ ]*${JOIN_CONFIG_RESOURCE:-join-config}')\""

# kind waits for systemd in a node before using it; docker run returns as soon as PID 1 starts.
wait_for "$timeout" "systemd to boot on $node" node_booted
# With the lock held, a join still running on the node is an earlier run's that lost its script.
ended=$(end_node_join) || die "cannot end a kubeadm join an earlier run left running on $node"
[ -z "$ended" ] || log "ended a kubeadm join an earlier run left running on $node (pid $ended there)"
# An older gpulab copied the admin kubeconfig into a container for its join; one of its runs killed with KILL
# left it on the node's tmpfs, which a container keeps until it is removed. (This run's JoinConfiguration is
# already there, written over any an earlier run left.)
if [ -n "${CONTAINER:-}" ]; then
  on_node rm -f "$old_admin_conf" >/dev/null 2>&1 || die "cannot remove leftovers of an earlier join on $node"
fi

if on_node test -s "$kubelet_conf"; then
  joined_server=$(on_node cat "$kubelet_conf" | server_of)
  if [ "$joined_server" = "$tenant_server" ]; then
    log "$node is already joined to tenant ${TENANT:-?}; nothing to do"
    exit 0
  fi
  die "$node is already a node of the cluster at ${joined_server:-an unknown API server}, not of tenant" \
    "${TENANT:-?} ($tenant_server): run 'kubeadm reset' on it first, or use another machine"
fi
# Checked only now: a joined node needs no token. It was made on the Pulumi host some time ago, and must
# outlive the whole join, not just its start.
if [ -n "$expires" ]; then
  [[ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" < "$expires" ]] ||
    die "the join material for $node expired at $expires (its bootstrap token is short-lived); $remake"
  left=$(($(date -u -d "$expires" +%s) - $(date -u +%s)))
  ((left > join_bound)) || die "the join material for $node expires in ${left}s, before a join could finish" \
    "(up to ${join_bound}s); $remake"
fi
# A failed attempt leaves kubeadm's files behind (no kubelet.conf yet), and kubeadm join then stops
# in preflight. Nothing of a working node is there to lose: reset it and join afresh.
if on_node test -e "$kubeadm_dir/bootstrap-kubelet.conf" || on_node test -e "$kubeadm_dir/pki/ca.crt"; then
  log "$node holds files of an earlier, unfinished join; resetting it with kubeadm reset"
  on_node kubeadm reset --force >/dev/null 2>&1 || die "kubeadm reset failed on $node"
fi

log "joining $node to tenant ${TENANT:-?}"
join_errors="$GPULAB_RUN_DIR/join-errors"
on_exit 'end_node_join >/dev/null 2>&1'
if ! NODE_CALL_TIMEOUT=$join_bound join_on_node >/dev/null 2>"$join_errors"; then
  # kubeadm's own error output does not contain the token.
  sed 's/^/    /' "$join_errors" >&2
  die "kubeadm join failed on $node (see above); the next run resets the node and tries again"
fi
log "$node joined tenant ${TENANT:-?}"
