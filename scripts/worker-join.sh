#!/usr/bin/env bash
# Joins a tenant worker to its Kamaji control plane with kubeadm, the way Kamaji's own e2e does
# (e2e/worker_kubeadm_join_test.go): wait for systemd, create a bootstrap token against the tenant
# (retrying while Kamaji still sets up RBAC), join. The worker is a kindest/node container
# (CONTAINER set: commands go through docker exec) or the machine this runs on (sent over SSH).
#
# The bootstrap token never appears in a command line, stdout, stderr or a file on disk: it goes into
# a kubeadm JoinConfiguration (mode 0600) on the node's tmpfs, read with `kubeadm join --config`,
# removed afterwards; and the token is deleted from the tenant once the join is over, failed or not.
# A node already joined to this tenant is left alone; one joined elsewhere is an error naming that
# API server; leftovers of a failed attempt are reset before the join is retried, and the files a run
# killed with KILL left on the node's tmpfs are removed first. One join runs at a time per worker (a lock; a
# re-run ends an earlier run of the same join that is still going). The token lives only a little longer than
# the join's bound (join_bound).
# With JOIN_CONFIG_ON_STDIN=1 (SSH workers; process mode's node containers) the worker gets only the
# JoinConfiguration, made on the Pulumi host (join-config.sh): no admin kubeconfig and no token creation on it.
# stdin: tenant admin kubeconfig, or the JoinConfiguration. env: CONTAINER or NODE_NAME, TENANT,
#        TIMEOUT (s, per step), IGNORE_PREFLIGHT (kubeadm preflight checks to skip), KUBELET_CONF
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
admin_conf="$node_dir/gpulab-admin.conf"
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

# Kamaji's soot controller creates the kubeadm RBAC after the control plane turns Ready; until
# then token creation is Forbidden. Any failure is retried to the deadline; the last error is shown.
token_description="gpulab: joins $node to tenant ${TENANT:-?}"
create_join_command() {
  # Valid for as long as the join may take (and a little more), then expired even if nobody deletes it.
  on_node kubeadm token create --print-join-command --ttl "$((join_bound + 120))s" --kubeconfig "$admin_conf" \
    --description "$token_description" >"$GPULAB_RUN_DIR/join-command"
}

# delete_stale_tokens: the tokens earlier runs made for this node and could not delete (killed with KILL).
# Found by their description (public); the listing prints names and descriptions, never a token.
delete_stale_tokens() {
  local listing name description wanted
  wanted=$(printf '%s' "$token_description" | base64 | tr -d '\n')
  listing=$(kc -n kube-system get secrets --field-selector type=bootstrap.kubernetes.io/token \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.data.description}{"\n"}{end}') || {
    log "could not list earlier bootstrap tokens of $node; they expire by themselves"
    return 0
  }
  while read -r name description; do
    [ -n "$name" ] && [ "$description" = "$wanted" ] || continue
    kc -n kube-system delete secret "$name" --ignore-not-found >/dev/null &&
      log "deleted bootstrap token ${name#bootstrap-token-} left by an interrupted join of $node"
  done <<<"$listing"
}

# One join at a time per worker. Two tenants' joins on one machine (one machine under two spellings of its
# address) would otherwise race: the second would overwrite the first's JoinConfiguration, or reset its
# half-done join. So would a re-run and the run it replaces: cancelling `pulumi up` kills only the /bin/sh that
# pulumi-command started, and the script goes on. A machine's lock is on the machine itself, so every address
# that reaches it finds the same lock; a container's is on this host, where its joins run. The lock (flock(1),
# util-linux) is held by the open file, so also by every process the run started: the `kubeadm join` of a run
# killed with KILL holds it until lib.sh's next run ends it (it records the process groups of its calls).
if [ -n "${CONTAINER:-}" ]; then
  join_lock_file="${TMPDIR:-/tmp}/gpulab-join.$CONTAINER.lock"
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

given_config=${JOIN_CONFIG_ON_STDIN:-0}
if [ "$given_config" = 1 ]; then
  to_node_file "$join_conf"
  # shellcheck disable=SC2016 # expanded when the run ends
  on_exit 'rm -f "$join_conf"'
  # Read where it is: on the node (in its container, or right here on a machine).
  endpoint=$(on_node cat "$join_conf" | awk '$1 == "apiServerEndpoint:" { gsub(/"/, "", $2); print $2; exit }')
  [ -n "$endpoint" ] || die "no JoinConfiguration with an apiServerEndpoint on standard input"
  tenant_server="https://$endpoint"
  # A join retried after an earlier failure gets the same material; its token may have expired.
  expires=$(on_node cat "$join_conf" | sed -n 's/^# gpulab: token expires //p')
  remake="make a new one: pulumi up --replace \"\$(pulumi stack --show-urns | grep -o 'urn:[^ ]*${JOIN_CONFIG_RESOURCE:-join-config}')\""
  if [ -n "$expires" ] && [[ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$expires" ]]; then
    die "the join material for $node expired at $expires (its bootstrap token is short-lived); $remake"
  fi
else
  kubeconfig_from_stdin
  tenant_server=$(server_of <"$KUBECONFIG_FILE")
  [ -n "$tenant_server" ] || die "the tenant kubeconfig names no API server"
fi

# kind waits for systemd in a node before using it; docker run returns as soon as PID 1 starts.
wait_for "$timeout" "systemd to boot on $node" node_booted
# With the lock held, a join still running on the node is an earlier run's that lost its script.
ended=$(end_node_join) || die "cannot end a kubeadm join an earlier run left running on $node"
[ -z "$ended" ] || log "ended a kubeadm join an earlier run left running on $node (pid $ended there)"
# A run killed with KILL could not clean up: its admin kubeconfig and JoinConfiguration are still on the
# node's tmpfs. Nothing else removes them (a container keeps /tmp until it is removed).
if [ -n "${CONTAINER:-}" ] && [ "$given_config" = 1 ]; then
  # This run's JoinConfiguration is already there (written over any left by an earlier run); the token it
  # carries was made on the Pulumi host, which deletes it (delete-token.sh).
  on_node rm -f "$admin_conf" >/dev/null 2>&1 || die "cannot remove leftovers of an earlier join on $node"
elif [ -n "${CONTAINER:-}" ]; then
  on_node rm -f "$admin_conf" "$join_conf" >/dev/null 2>&1 || die "cannot remove leftovers of an earlier join on $node"
  delete_stale_tokens
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
# A failed attempt leaves kubeadm's files behind (no kubelet.conf yet), and kubeadm join then stops
# in preflight. Nothing of a working node is there to lose: reset it and join afresh.
if on_node test -e "$kubeadm_dir/bootstrap-kubelet.conf" || on_node test -e "$kubeadm_dir/pki/ca.crt"; then
  log "$node holds files of an earlier, unfinished join; resetting it with kubeadm reset"
  on_node kubeadm reset --force >/dev/null 2>&1 || die "kubeadm reset failed on $node"
fi

if [ "$given_config" != 1 ]; then
  to_node_file "$admin_conf" <"$KUBECONFIG_FILE"
  # shellcheck disable=SC2016 # expanded when the run ends
  on_exit 'on_node rm -f "$admin_conf" "$join_conf" >/dev/null 2>&1'

  wait_for "$timeout" "a bootstrap token from tenant ${TENANT:-?}" create_join_command
  read -r -a words <"$GPULAB_RUN_DIR/join-command"
  endpoint="" token="" ca_hash=""
  [ "${words[0]:-}" = "kubeadm" ] && [ "${words[1]:-}" = "join" ] && endpoint=${words[2]:-}
  for ((i = 3; i + 1 < ${#words[@]}; i++)); do
    case "${words[$i]}" in
    --token) token=${words[$((i + 1))]} ;;
    --discovery-token-ca-cert-hash) ca_hash=${words[$((i + 1))]} ;;
    esac
  done
  rm -f "$GPULAB_RUN_DIR/join-command"
  [ -n "$endpoint" ] && [ -n "$token" ] && [ -n "$ca_hash" ] ||
    die "tenant ${TENANT:-?} returned something other than a kubeadm join command"
  # Delete the token when this run ends, whatever happens: nobody else may join with it.
  # shellcheck disable=SC2016 # expanded when the run ends
  on_exit 'on_node kubeadm token delete "${token%%.*}" --kubeconfig "$admin_conf" >/dev/null 2>&1 && log "bootstrap token deleted from tenant ${TENANT:-?}"'

  # Container default: SystemVerification (the node is a container, its kernel config unreadable),
  # FileExisting (kind images lack some host binaries kubeadm checks for), Swap (failSwapOn=false).
  ignore=${IGNORE_PREFLIGHT:-SystemVerification,FileExisting,Swap}
  {
    printf 'apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n'
    printf 'discovery:\n  bootstrapToken:\n    apiServerEndpoint: "%s"\n    token: "%s"\n' "$endpoint" "$token"
    printf '    caCertHashes: ["%s"]\n' "$ca_hash"
    printf 'nodeRegistration:\n'
    [ -n "${NODE_NAME:-}" ] && printf '  name: "%s"\n' "$NODE_NAME"
    printf '  ignorePreflightErrors: [%s]\n' "$(sed 's/[^,][^,]*/"&"/g; s/,/, /g' <<<"$ignore")"
  } | to_node_file "$join_conf"
fi

if [ "$given_config" = 1 ] && [ -n "$expires" ]; then
  # The token was made on the Pulumi host some time ago: it must outlive the whole join, not just its start.
  left=$(($(date -u -d "$expires" +%s) - $(date -u +%s)))
  ((left > join_bound)) || die "the join material for $node expires in ${left}s, before a join could finish" \
    "(up to ${join_bound}s); $remake"
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
