#!/usr/bin/env bash
# `make lab-images`' image of gpulab's HAMi device plugin (tools/gpulab-hami-plugin), for the Docker lab's tenants
# with `devicePlugin: gpulab` (components/docker/hami_device_plugin.py runs it as a DaemonSet), made without a
# registry: nothing but make tools' static, CGO-free binary, at /usr/bin/gpulab-hami-plugin (where gpulab's node
# image has it), and a /tmp. It needs nothing else at run time: the pod's service account token and CA are mounted
# by the kubelet, the API server is reached at KUBERNETES_SERVICE_HOST (an address: no DNS, no CA bundle), and it
# writes only its sockets in the kubelet's device plugin folder (a hostPath).
#
# Named as model/versions.py pins it (HAMI_DEVICE_PLUGIN_IMAGE, read from that line: one place), under localhost/ so
# that a missing image is never looked for on a registry; its tag is the k8s.io/kubelet version the plugin is built
# with (tools/gpulab-hami-plugin/go.mod), which the binary's --version line must name. Labelled as gpulab's build
# (gpulab.io/built-by) with the hash of its inputs (the script, the binary, the name) and tagged with that hash too;
# cached: with the image of those inputs present, nothing is built. Its own script, not a part of lab-images.sh:
# the kind node image's inputs (lab-images.sh and image-lib.sh among them) stay as they were, so neither rebuilds
# the other. Needs a Docker engine; not root.
# env: GPULAB_BIN (./bin), GPULAB_HAMI_PLUGIN_IMAGE (another name for it; then set versions.hamiDevicePluginImage)
set -euo pipefail
# shellcheck source=../scripts/lib.sh
source "${BASH_SOURCE[0]%/*}/../scripts/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

root=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
bin=${GPULAB_BIN:-$root/bin}
program="$bin/gpulab-hami-plugin"
in_image=/usr/bin/gpulab-hami-plugin # model/kube_objects/hami_device_plugin.py PROGRAM
started=$SECONDS

pin=$(sed -n 's/^HAMI_DEVICE_PLUGIN_IMAGE = "\(.*\)"$/\1/p' "$root/model/versions.py")
[ -n "$pin" ] || die "cannot read HAMI_DEVICE_PLUGIN_IMAGE = \"...\" in model/versions.py (the plugin image's pin)"
ref=${GPULAB_HAMI_PLUGIN_IMAGE:-$pin}
case $ref in
*@*) die "GPULAB_HAMI_PLUGIN_IMAGE=$ref has a digest: an image built here has none; name it repository:tag" ;;
*/*:*) ;;
*) die "GPULAB_HAMI_PLUGIN_IMAGE=$ref is not repository:tag, e.g. localhost/gpulab/hami-device-plugin:v0.36.4" ;;
esac
repository=${ref%:*}

[ -x "$program" ] || die "$program is missing: \`make lab-images\` builds it (make tools' gpulab-hami-plugin; GPULAB_BIN=dir for others)"
bounded 20 docker info >/dev/null 2>&1 || die "no Docker engine answers: \`bash hack/docker-engine.sh start\` gives one (as root)"
kubelet_api=$(sed -n 's/^require k8s.io\/kubelet \(v[^ ]*\).*/\1/p' "$root/tools/gpulab-hami-plugin/go.mod" | sed -n 1p)
[ -n "$kubelet_api" ] || die "cannot read the k8s.io/kubelet pin in tools/gpulab-hami-plugin/go.mod"
printed=$("$program" --version 2>&1) || die "$program --version failed: $(first_line "$printed")"
has_line "gpulab-hami-plugin (k8s.io/kubelet $kubelet_api)" "$printed" ||
  die "$program prints '$(first_line "$printed")', not the k8s.io/kubelet $kubelet_api of tools/gpulab-hami-plugin: \`make tools\` again"
[ "$ref" != "$pin" ] || [ "${pin##*:}" = "$kubelet_api" ] ||
  die "model/versions.py pins $pin, but the plugin is built with k8s.io/kubelet $kubelet_api: make the pin's tag $kubelet_api"
# A FROM-scratch image has no dynamic loader: the binary must be static (tools/programs.toml: cgo = false).
! LC_ALL=C grep -qa 'ld-linux' "$program" || die "$program is dynamically linked; the image has no C library: build it with CGO_ENABLED=0"

sha() { sha256sum "$@" | cut -d' ' -f1; }
program_sha=$(sha "$program")
key=$({
  printf '%s\n' "hami-plugin 1" "$ref" "$in_image"
  sha "${BASH_SOURCE[0]}" "$program"
} | sha)
hashed="$repository:${key:0:12}"
label() { bounded 20 docker image inspect -f "{{index .Config.Labels \"$1\"}}" "$2" 2>/dev/null; }
if [ "$(label gpulab.io/hami-plugin.inputs "$hashed" || true)" = "$key" ]; then
  bounded 20 docker tag "$hashed" "$ref"
  log "$hashed is up to date (also $ref): nothing to build ($((SECONDS - started)) s)"
  exit 0
fi

stage="$GPULAB_RUN_DIR/hami-plugin"
mkdir -p "$stage/usr/bin" "$stage/tmp"
chmod 1777 "$stage/tmp"
install -m 755 "$program" "$stage$in_image"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -c . | bounded 300 docker import \
  --change "ENTRYPOINT [\"$in_image\"]" \
  --change 'LABEL gpulab.io/built-by="gpulab make lab-images"' \
  --change "LABEL gpulab.io/hami-plugin.inputs=$key" \
  --change "LABEL gpulab.io/hami-plugin.sha256=sha256:$program_sha" \
  --change "LABEL gpulab.io/hami-plugin.kubelet-api=$kubelet_api" \
  - "$hashed" >/dev/null
bounded 20 docker tag "$hashed" "$ref"
size=$(bounded 20 docker image inspect -f '{{.Size}}' "$hashed" 2>/dev/null || echo 0)
log "built $hashed (also $ref): $((size / 1000000)) MB, gpulab-hami-plugin of k8s.io/kubelet $kubelet_api; $((SECONDS - started)) s"
