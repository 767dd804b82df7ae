#!/usr/bin/env bash
# Checks, and where it is safe raises, the host kernel settings that a kubelet and kube-proxy in a
# node container need. They are host-wide, so the check runs in a short-lived privileged container
# on the host's network namespace (the Docker daemon's host, which need not be this machine).
# env: IMAGE (the worker node image, already pulled or loaded from the source cache), TENANT
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
: "${IMAGE:?}"

log "tenant ${TENANT:-?}: checking host prerequisites (br_netfilter, conntrack, inotify, swap)"
# --privileged + --network host: sees and may write the host's sysctls; /lib/modules for modprobe.
bounded 300 docker run --rm -i --privileged --network host \
  --volume /lib/modules:/lib/modules:ro \
  --entrypoint bash "$IMAGE" -s <"$(dirname "$0")/node-host-check.sh" >&2
