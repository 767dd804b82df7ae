#!/usr/bin/env bash
# Helpers sourced by the scripts that gpulab's Commands run. Everything here logs to stderr:
# stdout of a Command is its output (and for some, a secret), so nothing else may land there.
#
# Temporary files live in one private directory per run (GPULAB_RUN_DIR, mode 700), removed on
# exit and on HUP/INT/TERM (bash runs the trap when the command it waits on returns); a directory
# left by a run killed with KILL is removed by the next run.
# Scripts register their own cleanup with on_exit instead of setting an EXIT trap.

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
# deadline), so a command that hangs cannot carry the wait past its deadline.
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

# attempt SECONDS COMMAND...: a program is stopped after SECONDS; a shell function runs as it is
# (it keeps access to the script's variables), so the calls inside it bound themselves: kubectl
# through kc (--request-timeout), anything else through `timeout`.
attempt() {
  local limit=$1
  shift
  if [ "$(type -t "$1")" = function ]; then
    "$@"
  else
    timeout --kill-after=5 "$limit" "$@"
  fi
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

# kubectl with a per-request timeout: an API server that accepts connections but never answers
# fails the call instead of hanging it.
kc() { kubectl --request-timeout="${GPULAB_REQUEST_TIMEOUT:-20s}" "$@"; }
