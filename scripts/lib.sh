#!/usr/bin/env bash
# Helpers sourced by the scripts that gpulab's Commands run. Everything here logs to stderr:
# stdout of a Command is its output (and for some, a secret), so nothing else may land there.
#
# Temporary files live in one private directory per run (GPULAB_RUN_DIR, mode 700), removed on
# exit and on HUP/INT/TERM (bash runs the trap when the command it waits on returns); a directory
# left by a run killed with KILL is removed by the next run.
# Scripts register their own cleanup with on_exit instead of setting an EXIT trap.
#
# Every program a script starts is bounded in time (`bounded`, `kc`, `attempt`): a kubectl waiting on an
# exec credential plugin, or a `docker exec` into a wedged container, would otherwise hang it forever
# (../shared/notes/boundaries.md, Processes).

# pulumi-command hands a Command's previous stdout and stderr to its update and delete in the
# environment (PULUMI_COMMAND_STDOUT/STDERR). Keep them as plain shell variables: no child inherits them.
# shellcheck disable=SC2034 # read by the scripts that source this file
GPULAB_PREVIOUS_STDOUT=${PULUMI_COMMAND_STDOUT-}
# shellcheck disable=SC2034
GPULAB_PREVIOUS_STDERR=${PULUMI_COMMAND_STDERR-}
unset PULUMI_COMMAND_STDOUT PULUMI_COMMAND_STDERR

log() { printf '[gpulab] %s\n' "$*" >&2; }

die() {
  log "ERROR: $*"
  exit 1
}

GPULAB_EXIT_HOOKS=()
# on_exit 'COMMAND': run COMMAND (evaluated then) when the script ends, last registered first.
on_exit() { GPULAB_EXIT_HOOKS+=("$1"); }

_gpulab_cleanup() {
  local i
  # An attempt still running (its job has a process group of its own, which a signal to ours missed).
  [ -z "${GPULAB_ATTEMPT_GROUP:-}" ] || _gpulab_kill_group "$GPULAB_ATTEMPT_GROUP"
  for ((i = ${#GPULAB_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do # last registered runs first
    eval "${GPULAB_EXIT_HOOKS[$i]}" || true
  done
  [ -n "${GPULAB_RUN_DIR:-}" ] && rm -rf "$GPULAB_RUN_DIR"
  return 0
}

_gpulab_run_dir() {
  local base=${TMPDIR:-/tmp} dir pid
  for dir in "$base"/gpulab-run.*; do
    [ -d "$dir" ] && [ -O "$dir" ] || continue
    pid=${dir##*/gpulab-run.}
    pid=${pid%%.*}
    kill -0 "$pid" 2>/dev/null || rm -rf "$dir" # its run is gone (killed): nobody else will remove it
  done
  GPULAB_RUN_DIR=$(mktemp -d "$base/gpulab-run.$$.XXXXXX")
  chmod 700 "$GPULAB_RUN_DIR"
  trap _gpulab_cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
_gpulab_run_dir

# wait_for SECONDS WHAT COMMAND...
# Runs COMMAND every GPULAB_POLL_INTERVAL seconds (default 2) until it succeeds, or fails once
# SECONDS have passed, naming WHAT it waited for and showing the last attempt's error output. Each
# attempt is bounded (see attempt; at most GPULAB_ATTEMPT_TIMEOUT, default 30 s, and never past the
# deadline), so a command that hangs, even one that ignores TERM, cannot carry the wait past its deadline.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout)) left attempt_limit
  local last_error="$GPULAB_RUN_DIR/wait-error"
  log "waiting up to ${timeout}s for ${what}"
  while :; do
    left=$((deadline - SECONDS))
    attempt_limit=${GPULAB_ATTEMPT_TIMEOUT:-30}
    ((left < attempt_limit)) && attempt_limit=$((left > 1 ? left : 1))
    if attempt "$attempt_limit" "$@" 2>"$last_error"; then
      break
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
# GPULAB_KILL_AFTER (5) seconds later, so one that ignores TERM ends too. `timeout` runs it in a process
# group of its own: a signal to this script's group does not reach it, and its -k bound still holds.
bounded() {
  local limit=$1 rc=0
  shift
  timeout --kill-after="${GPULAB_KILL_AFTER:-5}" "$limit" "$@" || rc=$?
  # 124: stopped with TERM; 137: it ignored TERM and was killed.
  if ((rc == 124 || rc == 137)); then log "${1##*/} did not finish within ${limit}s; stopped it"; fi
  return "$rc"
}

# _gpulab_kill_group PGID: TERM the group, KILL what is left after GPULAB_KILL_AFTER seconds.
_gpulab_kill_group() {
  local group=$1 waited=0
  kill -TERM -- "-$group" 2>/dev/null || return 0
  while kill -0 -- "-$group" 2>/dev/null && ((waited < ${GPULAB_KILL_AFTER:-5} * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -KILL -- "-$group" 2>/dev/null || true
}

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
      _gpulab_kill_group "$pid"
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
kc() { bounded "${GPULAB_CALL_TIMEOUT:-60}" kubectl --request-timeout="${GPULAB_REQUEST_TIMEOUT:-20s}" "$@"; }
