#!/usr/bin/env bash
# Helpers sourced by the scripts that gpulab's Commands run. Everything here logs to stderr:
# stdout of a Command is its output (and for some, a secret), so nothing else may land there.

log() { printf '[gpulab] %s\n' "$*" >&2; }

die() {
  log "ERROR: $*"
  exit 1
}

# wait_for SECONDS WHAT COMMAND...
# Runs COMMAND every GPULAB_POLL_INTERVAL seconds (default 2) until it succeeds, or fails once
# SECONDS have passed, naming WHAT it waited for and showing the last attempt's error output.
wait_for() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  local last_error
  last_error=$(mktemp "${TMPDIR:-/tmp}/gpulab-wait.XXXXXX")
  log "waiting up to ${timeout}s for ${what}"
  until "$@" 2>"$last_error"; do
    if ((SECONDS >= deadline)); then
      log "last attempt said:"
      sed 's/^/    /' "$last_error" >&2
      rm -f "$last_error"
      die "timed out after ${timeout}s waiting for ${what}"
    fi
    sleep "${GPULAB_POLL_INTERVAL:-2}"
  done
  rm -f "$last_error"
  log "ready: ${what}"
}

# kubeconfig_from_stdin: Pulumi passes kubeconfigs on standard input (never in arguments or the
# environment, which other processes can read). Store it in a private temp file removed on exit.
kubeconfig_from_stdin() {
  KUBECONFIG_FILE=$(mktemp "${TMPDIR:-/tmp}/gpulab-kubeconfig.XXXXXX")
  chmod 600 "$KUBECONFIG_FILE"
  trap 'rm -f "$KUBECONFIG_FILE"' EXIT
  cat >"$KUBECONFIG_FILE"
  [ -s "$KUBECONFIG_FILE" ] || die "no kubeconfig on standard input"
  export KUBECONFIG="$KUBECONFIG_FILE"
}
