#!/usr/bin/env bash
# Helpers sourced by the scripts that gpulab's Commands run. Everything here logs to stderr:
# stdout of a Command is its output (and for some, a secret), so nothing else may land there.
#
# Temporary files live in one private directory per run (GPULAB_RUN_DIR, mode 700), removed on
# exit and on HUP/INT/TERM (programs run as jobs the script waits for, so the trap runs at once); a
# directory left by a run killed with KILL is removed by the next run, which first ends what that run
# left running. Scripts register their own cleanup with on_exit instead of setting an EXIT trap.
#
# Every program a script starts is bounded in time (`bounded`, `kc`, `attempt`): a kubectl waiting on an
# exec credential plugin, or a `docker exec` into a wedged container, would otherwise hang it forever
# (--request-timeout bounds HTTP requests only). And none outlives the script: it ends their process
# groups when it ends, so its stdout closes with it.

# pulumi-command hands a Command's previous stdout and stderr to its update and delete in the
# environment (PULUMI_COMMAND_STDOUT/STDERR); a state from before the kind record holds the management
# kubeconfig there. `unset` keeps them from children, but a process's own environment stays readable in
# /proc/PID/environ for its whole life (proc(5): the environment execve gave it). So a script that gets them
# starts again without them (exec: same process), reading them from two here-strings (a pipe when short, bash
# 5.1+; a deleted file otherwise). Kept as plain shell variables: no child inherits them. (The /bin/sh that
# pulumi-command starts the script with keeps its copy: dash does not exec the last command of sh -c.)
# A script run as `bash -c TEXT` over SSH ($0 is no file) only unsets them.
if [ -n "${PULUMI_COMMAND_STDOUT+set}${PULUMI_COMMAND_STDERR+set}" ] && [ -f "$0" ]; then
  exec env -u PULUMI_COMMAND_STDOUT -u PULUMI_COMMAND_STDERR GPULAB_PREVIOUS_ON_FDS=1 bash "$0" "$@" \
    3<<<"${PULUMI_COMMAND_STDOUT-}" 4<<<"${PULUMI_COMMAND_STDERR-}"
fi
# shellcheck disable=SC2034 # read by the scripts that source this file
GPULAB_PREVIOUS_STDOUT=${PULUMI_COMMAND_STDOUT-} GPULAB_PREVIOUS_STDERR=${PULUMI_COMMAND_STDERR-}
# shellcheck disable=SC2034
if [ "${GPULAB_PREVIOUS_ON_FDS:-}" = 1 ]; then
  GPULAB_PREVIOUS_STDOUT=$(cat <&3) GPULAB_PREVIOUS_STDERR=$(cat <&4)
  exec 3<&- 4<&-
fi
unset PULUMI_COMMAND_STDOUT PULUMI_COMMAND_STDERR GPULAB_PREVIOUS_ON_FDS

log() { printf '[gpulab] %s\n' "$*" >&2; }

die() {
  log "ERROR: $*"
  exit 1
}

# A program's output is read whole, then searched: never `program | grep -q` (nor grep -m, head). The reader stops
# at its first match, the program dies of SIGPIPE writing the rest, and pipefail fails the pipeline at random
# (CI of 2026-12-04: `coredns -version | grep -qx CoreDNS-1.14.2` failed with that line in the output).
# has_line LINE TEXT: TEXT has a line that is exactly LINE.
has_line() { grep -qxF -- "$1" <<<"$2"; }
# has_text PART TEXT: PART is somewhere in TEXT.
has_text() { [[ $2 == *"$1"* ]]; }
# first_line TEXT: TEXT's first line.
first_line() { printf '%s\n' "${1%%$'\n'*}"; }

GPULAB_EXIT_HOOKS=()
# on_exit 'COMMAND': run COMMAND (evaluated then) when the script ends, last registered first.
on_exit() { GPULAB_EXIT_HOOKS+=("$1"); }

_gpulab_cleanup() {
  local i
  # An attempt still running, and every bounded call (each in a process group of its own, which a signal to
  # ours misses): nothing this script started outlives it, and its stdout closes when it ends.
  _gpulab_end_groups "$GPULAB_RUN_DIR" ${GPULAB_ATTEMPT_GROUP:+"$GPULAB_ATTEMPT_GROUP"}
  for ((i = ${#GPULAB_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do # last registered runs first
    eval "${GPULAB_EXIT_HOOKS[$i]}" || true
  done
  [ -n "${GPULAB_RUN_DIR:-}" ] && rm -rf "$GPULAB_RUN_DIR"
  return 0
}

_gpulab_run_dir() {
  # GPULAB_TMPDIR: the user's TMPDIR where make gave pulumi a private one (removed after it; hack/up_outcome.py),
  # so that the next run still finds what a run killed with KILL left.
  local base=${GPULAB_TMPDIR:-${TMPDIR:-/tmp}} dir pid
  for dir in "$base"/gpulab-run.*; do
    [ -d "$dir" ] && [ -O "$dir" ] || continue
    pid=${dir##*/gpulab-run.}
    pid=${pid%%.*}
    [ -z "$(_gpulab_started "$pid")" ] || continue
    # Its run is gone (killed with KILL): end what it left running (a kubeadm join holding a lock, a hung
    # kubectl), then remove the directory; nobody else will.
    _gpulab_end_groups "$dir"
    rm -rf "$dir"
  done
  GPULAB_RUN_DIR=$(mktemp -d "$base/gpulab-run.$$.XXXXXX")
  chmod 700 "$GPULAB_RUN_DIR"
  mkdir "$GPULAB_RUN_DIR/groups"
  trap _gpulab_cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# _gpulab_started PID: when the process started (field 22 of /proc/PID/stat, proc(5)), to tell it from a later
# process that got the same id. Empty when it is gone, or has ended and waits to be reaped (state Z: a zombie
# still answers kill -0).
_gpulab_started() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) } # after the command name, which may hold spaces and parentheses
  read -r -a stat <<<"$stat"
  [ "${stat[0]}" = Z ] || printf '%s' "${stat[19]}"
}

# permanent_error FILE: succeeds, printing what kind of answer it is, when an attempt's error output (FILE) is
# one the API server gives again however long one waits (kubectl prints the API server's Status message):
# - object validation, a CRD's schema or x-kubernetes-validations rule among it: `The <Kind> "<name>" is
#   invalid: <field>: Invalid value: ...` (apimachinery pkg/api/errors NewInvalid, field.Invalid);
# - a webhook's refusal: `admission webhook "<name>" denied the request: ...` (apiserver pkg/admission/plugin/
#   webhook/errors/statuserror.go ToStatusErr), but not one for want of reading the cluster: MetalLB's webhooks
#   deny when their List of the existing objects fails (v0.16.1 internal/k8s/webhooks: `failed to get existing
#   <Kind> objects`), which passes with the API server's next answer.
# An InternalError is judged by wait_for from its repetition: most pass (a webhook not serving yet).
permanent_error() {
  if grep -qE ' is invalid: |Invalid value: ' "$1"; then
    echo "the API server's validation refuses the object"
  elif grep -q 'denied the request' "$1" && ! grep -q 'failed to get existing' "$1"; then
    echo "an admission webhook refuses the object"
  else
    return 1
  fi
}

# internal_error FILE: the message of an InternalError in an attempt's error output (kubectl: `Error from server
# (InternalError): ... Internal error occurred: MESSAGE`), one that can persist: a mutating webhook's patch the API
# server cannot apply (apiserver pkg/admission/plugin/webhook/mutating/dispatcher.go: NewInternalError of the
# JSON patch's error). Not one that passes: a webhook the API server cannot call yet (`failed calling webhook`,
# `conversion webhook for ... failed`), or storage busy or out of time (pkg/storage/errors: etcd's own words).
internal_error() {
  local line
  line=$(grep -m1 'Internal error occurred: ' "$1") || return 1
  case $line in
  *'failed calling webhook'* | *'conversion webhook for'* | *etcdserver* | *'timed out'* | *timeout* | \
    *'deadline exceeded'* | *'connection refused'*) return 1 ;;
  esac
  printf '%s\n' "${line#*Internal error occurred: }"
}

# wait_for SECONDS WHAT COMMAND...
# Runs COMMAND every GPULAB_POLL_INTERVAL seconds (default 2) until it succeeds, or fails once
# SECONDS have passed, naming WHAT it waited for and showing the last attempt's error output. Each
# attempt is bounded (see attempt; at most GPULAB_ATTEMPT_TIMEOUT, default 30 s, and never past the
# deadline), so a command that hangs, even one that ignores TERM, cannot carry the wait past its deadline.
# An answer that waiting cannot change (permanent_error, or the same InternalError three times in a row) stops
# the wait at once, with that answer and what to do: GPULAB_WAIT_FIX if the script set one.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout)) left attempt_limit kind internal previous="" repeats=0
  local last_error="$GPULAB_RUN_DIR/wait-error"
  log "waiting up to ${timeout}s for ${what}"
  while :; do
    left=$((deadline - SECONDS))
    attempt_limit=${GPULAB_ATTEMPT_TIMEOUT:-30}
    ((left < attempt_limit)) && attempt_limit=$((left > 1 ? left : 1))
    if attempt "$attempt_limit" "$@" 2>"$last_error"; then
      break
    fi
    kind=""
    if internal=$(internal_error "$last_error"); then
      if [ "$internal" = "$previous" ]; then repeats=$((repeats + 1)); else repeats=1; fi
      previous=$internal
      if ((repeats >= 3)); then kind="the API server failed the same way 3 times in a row"; fi
    else
      previous="" repeats=0
    fi
    if [ -n "$kind" ] || kind=$(permanent_error "$last_error"); then
      log "stopped waiting for ${what}: ${kind}, an answer that waiting does not change:"
      sed 's/^/    /' "$last_error" >&2
      die "${GPULAB_WAIT_FIX:-fix what it names, then run the same make command again}"
    fi
    if ((SECONDS >= deadline)); then
      log "last attempt said:"
      sed 's/^/    /' "$last_error" >&2
      die "timed out after ${timeout}s waiting for ${what}"
    fi
    sleep "${GPULAB_POLL_INTERVAL:-2}"
  done
  log "ready: ${what}"
}

# bounded SECONDS COMMAND...: runs a program, stopped with TERM after SECONDS and with KILL
# GPULAB_KILL_AFTER (5) seconds later, so one that ignores TERM ends too. `timeout` runs it in a process group of
# its own (coreutils timeout.c calls setpgid(0, 0) unless --foreground; --foreground would leave the program's
# children untimed): a signal to this script's group, or to an attempt's, does not reach it. So the group is
# recorded in the run directory, and whatever ends early (an attempt at its limit, the script on exit, HUP,
# INT or TERM, the next run after a KILL) ends it. It runs as a job this shell waits for, so a signal to the
# script is handled at once, not when the program is done.
bounded() {
  local limit=$1 rc=0 pid group
  shift
  # The call's group is recorded by the job itself before `timeout` starts (exec keeps its pid and start time):
  # recorded after `&` instead, a KILL of this script on a loaded machine could fall between the program's
  # start and the record, and the next run would not find the group to end (seen once in make test).
  (
    _gpulab_started "$BASHPID" >"$GPULAB_RUN_DIR/groups/$BASHPID"
    exec timeout --kill-after="${GPULAB_KILL_AFTER:-5}" "$limit" "$@"
  ) 0<&0 & # 0<&0: a job keeps standard input
  pid=$!
  group="$GPULAB_RUN_DIR/groups/$pid"
  wait "$pid" || rc=$?
  rm -f "$group"
  # 124: stopped with TERM; 137: it ignored TERM and was killed.
  if ((rc == 124 || rc == 137)); then log "${1##*/} did not finish within ${limit}s; stopped it"; fi
  return "$rc"
}

# _gpulab_end_groups RUN_DIR [PGID...]: end the process groups given and those of the bounded calls RUN_DIR
# records, all at once: TERM, then KILL after GPULAB_KILL_AFTER seconds for what is left. A recorded group
# whose leader is gone, or is another process by now (same id, another start time), is left alone.
_gpulab_end_groups() {
  local dir=$1 record pid started groups=() waited=0
  shift
  groups=("$@")
  for record in "$dir"/groups/*; do
    [ -f "$record" ] || continue
    pid=${record##*/}
    started=$(_gpulab_started "$pid")
    [ -n "$started" ] && [ "$started" = "$(cat "$record")" ] && groups+=("$pid")
    rm -f "$record"
  done
  ((${#groups[@]})) || return 0
  _gpulab_signal_groups TERM "${groups[@]}" || return 0
  # Until the leaders are gone (`timeout` waits for its program first). Not `kill -0` on the group: an ended
  # process stays in it as a zombie until its parent, for an orphan init, reaps it.
  while _gpulab_any_running "${groups[@]}" && ((waited < ${GPULAB_KILL_AFTER:-5} * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  _gpulab_signal_groups KILL "${groups[@]}" || true # what is left in them
}

_gpulab_any_running() {
  local pid
  for pid in "$@"; do
    [ -z "$(_gpulab_started "$pid")" ] || return 0
  done
  return 1
}

# _gpulab_signal_groups SIGNAL PGID...: succeeds if any group (or, before it made its group, its leader) got it.
_gpulab_signal_groups() {
  local signal=$1 pid found=1
  shift
  for pid in "$@"; do
    { kill "-$signal" -- "-$pid" || kill "-$signal" "$pid"; } 2>/dev/null && found=0
  done
  return "$found"
}

_gpulab_run_dir

# attempt SECONDS COMMAND...: COMMAND, ended after SECONDS. A program goes through `bounded`; a shell
# function (a probe keeps access to the script's variables) runs as a background job with its own process
# group (job control), and the whole group is killed at the limit, whatever its commands are doing. The
# function runs in a subshell: what it writes to files counts, variables it sets do not reach the script.
attempt() {
  local limit=$1 pid rc=0 ticks=0
  shift
  if [ "$(type -t "$1")" != function ]; then
    bounded "$limit" "$@"
    return
  fi
  set -m
  "$@" &
  pid=$!
  set +m
  GPULAB_ATTEMPT_GROUP=$pid
  while kill -0 "$pid" 2>/dev/null; do
    if ((ticks >= limit * 10)); then # tenths of a second: SECONDS ticks too coarsely for short limits
      echo "$1 did not finish within ${limit}s; stopped it" >&2
      _gpulab_end_groups "$GPULAB_RUN_DIR" "$pid" # its group, and the bounded calls it made
      break
    fi
    sleep 0.1
    ticks=$((ticks + 1))
  done
  wait "$pid" 2>/dev/null || rc=$?
  GPULAB_ATTEMPT_GROUP=""
  return "$rc"
}

# kubeconfig_from_stdin: Pulumi passes kubeconfigs on standard input (never in arguments or the
# environment, which other processes can read). Stored in the run's private directory.
kubeconfig_from_stdin() {
  KUBECONFIG_FILE="$GPULAB_RUN_DIR/kubeconfig"
  (
    umask 077
    cat >"$KUBECONFIG_FILE"
  )
  [ -s "$KUBECONFIG_FILE" ] || die "no kubeconfig on standard input"
  export KUBECONFIG="$KUBECONFIG_FILE"
}

# kubectl with a per-request timeout (an API server that accepts connections but never answers fails
# the call), and the whole call bounded (--request-timeout does not cover exec credential plugins).
# container_join_lock CONTAINER: the host-side file worker-join.sh locks for a container worker's joins. Not make's
# private TMPDIR for pulumi (GPULAB_TMPDIR keeps the user's): every run must find the same file, until the
# container is gone (worker-join-unlock.sh removes it on destroy).
container_join_lock() { printf '%s/gpulab-join.%s.lock' "${GPULAB_TMPDIR:-${TMPDIR:-/tmp}}" "$1"; }

kc() { bounded "${GPULAB_CALL_TIMEOUT:-60}" kubectl --request-timeout="${GPULAB_REQUEST_TIMEOUT:-20s}" "$@"; }
