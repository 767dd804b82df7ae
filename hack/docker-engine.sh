#!/usr/bin/env bash
# A Docker engine where none answers, on machines you are root on (CI's, this project's development machines;
# a user's host has Docker and is left as it is).
#   start: if `docker info` answers, use that engine and change nothing. Otherwise install Debian's docker.io
#          (if dockerd is missing), start dockerd, wait for it (TIMEOUT), and run a privileged probe container.
#          Only where the probe fails because the machine's capability bounding set lacks CAP_SYS_RESOURCE
#          (Docker gives a privileged container every capability it knows; runc then fails with "unable to
#          apply caps: operation not permitted") is hack/runc-without-sys-resource made dockerd's default
#          runtime, and the probe run again.
#   stop:  stop the dockerd that `start` started and remove what it wrote; an engine it found is left alone.
#          The docker.io package stays installed (it is said so).
# env: TIMEOUT (60), GPULAB_ENGINE_DIR (what start did: /var/lib/gpulab-engine), DOCKER_CONFIG_DIR
#      (/etc/docker), GPULAB_RUNTIME_DIR (where the runtime wrapper goes: /usr/local/lib/gpulab); for tests:
#      GPULAB_PROC_STATUS (/proc/self/status), GPULAB_BUSYBOX (/bin/busybox)
set -euo pipefail
source "${BASH_SOURCE[0]%/*}/../scripts/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

action=${1:-}
timeout=${TIMEOUT:-60}
state=${GPULAB_ENGINE_DIR:-/var/lib/gpulab-engine}
config_dir=${DOCKER_CONFIG_DIR:-/etc/docker}
runtime_dir=${GPULAB_RUNTIME_DIR:-/usr/local/lib/gpulab}
runtime=gpulab-runc
probe_image=gpulab-probe:busybox
# CAP_SYS_RESOURCE is capability 24 (linux/capability.h).
sys_resource_bit=$((1 << 24))

engine_answers() { bounded 20 docker info >/dev/null; }

lacks_sys_resource() {
  local bounding
  bounding=$(awk '$1 == "CapBnd:" { print $2 }' "${GPULAB_PROC_STATUS:-/proc/self/status}")
  (((0x$bounding & sys_resource_bit) == 0))
}

# The probe image: Debian's static busybox (package busybox-static, /bin/busybox) imported as an image: no
# registry can be reached, and a static binary needs no library in the image.
probe_image_ready() {
  docker image inspect "$probe_image" >/dev/null 2>&1 && return 0
  local root="$GPULAB_RUN_DIR/probe-root"
  if ! has_text 'ok installed' "$(dpkg-query -W -f '${Status}' busybox-static 2>/dev/null)"; then
    install_packages busybox-static
  fi
  mkdir -p "$root/bin"
  cp "${GPULAB_BUSYBOX:-/bin/busybox}" "$root/bin/busybox"
  tar -C "$root" -c . | bounded 60 docker import --change 'ENTRYPOINT ["/bin/busybox"]' - "$probe_image" >/dev/null
}

install_packages() {
  log "installing Debian's $* (apt-get)"
  bounded 300 apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive bounded 600 apt-get install -y -qq --no-install-recommends "$@" >&2
}

# Runs the probe; its output in $GPULAB_RUN_DIR/probe.out.
probe() { bounded 60 docker run --rm --privileged --network none "$probe_image" true >"$GPULAB_RUN_DIR/probe.out" 2>&1; }

start_dockerd() {
  log "starting dockerd (log: $state/dockerd.log)"
  # A session of its own: it outlives this script, whose process groups end with it (lib.sh).
  setsid dockerd --pidfile "$state/dockerd.pid" >>"$state/dockerd.log" 2>&1 </dev/null &
  echo started >"$state/dockerd.started"
  wait_for "$timeout" "the Docker engine this script started to answer" engine_answers
}

stop_dockerd() {
  local pid
  pid=$(cat "$state/dockerd.pid" 2>/dev/null || true)
  # Only a dockerd: a pid the kernel handed out again since (a reboot) is someone else's.
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
    kill -TERM "$pid"
    wait_for "$timeout" "dockerd (pid $pid) to stop" dockerd_gone "$pid"
  fi
  rm -f "$state/dockerd.pid"
}

# Gone once it has ended, reaped or not: dockerd runs in a session of its own, so once this script has exited its
# parent is PID 1, and a container's PID 1 that is not an init may leave it a zombie for long (lib.sh).
dockerd_gone() { [ -z "$(_gpulab_started "$1")" ]; }

use_runtime_wrapper() {
  [ ! -e "$config_dir/daemon.json" ] ||
    die "$config_dir/daemon.json exists: gpulab does not edit a daemon configuration it did not write." \
      "Add a runtime that drops CAP_SYS_RESOURCE (hack/runc-without-sys-resource) yourself"
  install -D -m 755 "${BASH_SOURCE[0]%/*}/runc-without-sys-resource" "$runtime_dir/runc-without-sys-resource"
  mkdir -p "$config_dir"
  printf '{"runtimes": {"%s": {"path": "%s"}}, "default-runtime": "%s"}\n' \
    "$runtime" "$runtime_dir/runc-without-sys-resource" "$runtime" >"$config_dir/daemon.json"
  echo wrote >"$state/daemon.json.written"
  log "this machine's capability bounding set lacks CAP_SYS_RESOURCE, so privileged containers fail:" \
    "dockerd's default runtime is now $runtime_dir/runc-without-sys-resource (it drops that capability)"
  stop_dockerd
  start_dockerd
}

case "$action" in
start)
  if engine_answers 2>/dev/null; then
    log "a Docker engine answers: using it as it is"
    exit 0
  fi
  [ "$(id -u)" = 0 ] || die "no Docker engine answers and only root can start one: start Docker (docs/setup.md)"
  mkdir -p "$state"
  chmod 700 "$state"
  if ! command -v dockerd >/dev/null; then
    install_packages docker.io iptables
    echo installed >"$state/docker.io.installed"
  fi
  start_dockerd
  probe_image_ready
  if ! probe; then
    if grep -q 'unable to apply caps: operation not permitted' "$GPULAB_RUN_DIR/probe.out" && lacks_sys_resource; then
      use_runtime_wrapper
      probe || die "a privileged container still fails with the runtime wrapper: $(tail -n 3 "$GPULAB_RUN_DIR/probe.out")"
    else
      die "a privileged container fails on this engine: $(tail -n 3 "$GPULAB_RUN_DIR/probe.out")"
    fi
  fi
  log "the Docker engine answers and runs privileged containers"
  ;;
stop)
  if [ ! -e "$state/dockerd.started" ]; then
    log "no Docker engine was started by gpulab here: nothing to stop"
    exit 0
  fi
  stop_dockerd
  if [ -e "$state/daemon.json.written" ]; then
    rm -f "$config_dir/daemon.json" "$runtime_dir/runc-without-sys-resource"
    rmdir "$runtime_dir" 2>/dev/null || true
  fi
  [ ! -e "$state/docker.io.installed" ] || log "Debian's docker.io stays installed (apt-get remove docker.io removes it)"
  rm -rf "$state"
  log "stopped the Docker engine gpulab started"
  ;;
*) die "usage: docker-engine.sh start|stop" ;;
esac
