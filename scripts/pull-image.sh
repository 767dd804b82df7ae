#!/usr/bin/env bash
# Pulls one image into the host's Docker, once: the user's `docker login` and proxy settings apply
# (kind nodes' containerd pulls anonymously), and the host cache outlives `make down`.
# An image already present is not pulled again. A digest-pinned image is pulled by digest and then
# tagged, because nodes look images up by tag. An image under localhost/ is built on this host (no registry serves
# it): missing, it is an error naming how to build it, never a pull.
# With a source cache (gpulab:sourceCache) nothing is pulled: the image is loaded from the cache's archive, and
# must then be the image the cache's index records (its id pins every layer; the cache checked it against the
# pinned digest when it was filled: hack/source_cache.py).
# env: IMAGE (registry/repository[:tag][@digest]), TAGGED (registry/repository:tag), PLATFORM (linux/amd64),
#      ARCHIVE and IMAGE_ID (from a source cache: its `docker save` archive and the image id its index records)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

if [ -n "${ARCHIVE:-}" ]; then
  present=$(bounded 60 docker image inspect -f '{{.Id}}' "$TAGGED" 2>/dev/null || true)
  if [ "$present" = "$IMAGE_ID" ]; then
    log "already on the host: $TAGGED (the source cache's image)"
    exit 0
  fi
  [ -f "$ARCHIVE" ] || die "$TAGGED: the source cache has no $ARCHIVE; run make cache again"
  log "loading $TAGGED from the source cache"
  bounded "${PULL_TIMEOUT:-1800}" docker load -q -i "$ARCHIVE" >/dev/null || die "docker load of $ARCHIVE failed (above)"
  present=$(bounded 60 docker image inspect -f '{{.Id}}' "$TAGGED" 2>/dev/null || true)
  [ "$present" = "$IMAGE_ID" ] || die "$ARCHIVE holds ${present:-no image $TAGGED}, not the image $IMAGE_ID the" \
    "source cache's index records for $TAGGED; run make cache again"
  log "loaded: $TAGGED"
  exit 0
fi

if bounded 60 docker image inspect "$IMAGE" >/dev/null 2>&1 && bounded 60 docker image inspect "$TAGGED" >/dev/null 2>&1; then
  log "already on the host: $IMAGE"
  exit 0
fi
case $IMAGE in
localhost/*) # built on this host (gpulab's: make lab-images, make node-image), served by no registry
  die "$IMAGE is not on the host, and no registry serves it: it is built here (gpulab's images under localhost/gpulab:" \
    "\`make lab-images\`), then make up loads it from the host's engine" ;;
esac
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
