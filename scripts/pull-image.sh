#!/usr/bin/env bash
# Pulls one image into the host's Docker, once: the user's `docker login` and proxy settings apply
# (kind nodes' containerd pulls anonymously), and the host cache outlives `make down`.
# An image already present is not pulled again. A digest-pinned image is pulled by digest and then
# tagged, because nodes look images up by tag.
# env: IMAGE (registry/repository[:tag][@digest]), TAGGED (registry/repository:tag), PLATFORM (linux/amd64)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

if bounded 60 docker image inspect "$IMAGE" >/dev/null 2>&1 && bounded 60 docker image inspect "$TAGGED" >/dev/null 2>&1; then
  log "already on the host: $IMAGE"
  exit 0
fi
answer="$GPULAB_RUN_DIR/pull-output"
log "pulling $IMAGE ($PLATFORM)"
if ! bounded "${PULL_TIMEOUT:-1800}" docker pull --quiet --platform "$PLATFORM" "$IMAGE" >/dev/null 2>"$answer"; then
  if grep -qiE 'toomanyrequests|429 Too Many Requests' "$answer"; then
    die "pulling $IMAGE: the registry answered 429 Too Many Requests. Docker Hub allows 10 anonymous pulls per hour per IP address; run 'docker login' (pulls then count against your account's higher limit) and run make up again, or wait an hour"
  fi
  die "pulling $IMAGE failed; the registry said: $(tail -n 1 "$answer")"
fi
[ "$IMAGE" = "$TAGGED" ] || bounded 60 docker tag "$IMAGE" "$TAGGED"
log "pulled: $IMAGE"
