#!/usr/bin/env bash
# Loads images from the host's Docker into a node container's containerd, so the node never pulls
# them from a registry (pods use imagePullPolicy IfNotPresent). Images the node already has are
# skipped. Archives are saved for the node's platform only: with Docker's containerd image store, a
# multi-platform archive names platforms it does not hold and `ctr import` fails with "content digest
# ... not found" (kind issues 3795, 3996, 4224; the single-platform workaround of kind PR 4247).
# The import is the one kind uses (pkg/cluster/nodeutils/util.go LoadImageArchive) without
# --all-platforms, with the node's default (overlayfs) snapshotter.
# env: NODE (container name), IMAGES (space-separated registry/repository:tag), PLATFORM (linux/amd64),
#      TIMEOUT (seconds to wait for the node's containerd, default 120)
set -euo pipefail
# shellcheck source=lib.sh
source "${BASH_SOURCE[0]%/*}/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

containerd_answers() { bounded 20 docker exec "$NODE" ctr --namespace=k8s.io version >/dev/null; }
wait_for "${TIMEOUT:-120}" "containerd in $NODE" containerd_answers

save_args=()
if has_text --platform "$(bounded 20 docker image save --help 2>/dev/null)"; then
  save_args=(--platform "$PLATFORM")
fi
for image in $IMAGES; do
  if [ -n "$(bounded 60 docker exec "$NODE" ctr --namespace=k8s.io images ls -q "name==$image")" ]; then
    log "already in $NODE: $image"
    continue
  fi
  log "loading $image into $NODE"
  bounded "${LOAD_TIMEOUT:-900}" docker image save "${save_args[@]}" "$image" |
    bounded "${LOAD_TIMEOUT:-900}" docker exec -i "$NODE" ctr --namespace=k8s.io images import --digests - >/dev/null ||
    die "loading $image into $NODE failed (is it on the host? docker image inspect $image)"
done
log "$NODE has its $(wc -w <<<"$IMAGES") images"
