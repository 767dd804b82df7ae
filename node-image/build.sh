#!/usr/bin/env bash
# `make node-image`: gpulab's node image, made without any image registry.
#
# A root file system debootstrapped (--variant=minbase) from the Debian mirror of this machine's own apt
# sources, with the packages of node-image/packages (systemd, containerd, runc, the CNI plugins, iptables...),
# plus kubelet, kubeadm and kubectl of `make tools` in /usr/bin (where kind's node image has them), gpulab's DRA
# kubelet plugin (tools/gpulab-dra-plugin; its unit is started only on a gpuSharing: dra tenant's node) and gpulab's
# HAMi device plugin (tools/gpulab-hami-plugin; its unit is started only on a HAMi tenant's node), the files
# of node-image/files (the kubelet's unit and kubeadm's drop-in, containerd's config, the runc wrapper, the
# unit that imports the images) and two image archives for containerd: the pause image containerd's
# sandbox_image names, compiled from kubernetes' own build/pause/linux/pause.c of the pinned k8s.io/kubernetes
# module, and a busybox image of Debian's static busybox (the host's busybox-static), for workloads.
# `docker import`ed with ENTRYPOINT /sbin/init and ENV container=docker, as kind's node image runs
# (kind images/base/Dockerfile), tagged gpulab/node:<hash of every input> and gpulab/node:<kubelet version>.
# What it holds and why: docs/real-nodes.md; the contract it keeps with kindest/node: model/node_contract.py.
#
# Cached: when an image with the inputs' hash exists, nothing is built (seconds). The debootstrap tree is kept
# under the cache folder, keyed by the mirror, release, architecture and package list only, so a new kubelet or
# a changed file rebuilds the image from the kept tree without debootstrapping again.
# Needs root (debootstrap, chroot) and a Docker engine (`bash hack/docker-engine.sh start` gives one).
# env: GPULAB_BIN (./bin: kubelet, kubeadm, kubectl, gpulab-dra-plugin, gpulab-hami-plugin),
#      GPULAB_NODE_IMAGE_CACHE (.cache/node-image),
#      GPULAB_NODE_SUITE (bookworm), GPULAB_NODE_REPOSITORY (gpulab/node), APT_DIR (/etc/apt), GO (go),
#      TIMEOUT (seconds for the debootstrap, 1800)
# usage: node-image/build.sh [--tree (only the debootstrap tree) | --mirror (print the Debian source it uses)]
set -euo pipefail
# shellcheck source=../scripts/lib.sh
source "${BASH_SOURCE[0]%/*}/../scripts/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

root=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
script="$root/node-image/build.sh"
recipe="$root/node-image"
bin=${GPULAB_BIN:-$root/bin}
cache=${GPULAB_NODE_IMAGE_CACHE:-$root/.cache/node-image}
suite=${GPULAB_NODE_SUITE:-bookworm}
repository=${GPULAB_NODE_REPOSITORY:-gpulab/node}
apt_dir=${APT_DIR:-/etc/apt}
go=${GO:-go}
programs=(kubelet kubeadm kubectl gpulab-dra-plugin)
programs+=(gpulab-hami-plugin) # HAMi's device plugin on a HAMi tenant's real node (process_lab/hami_plugin.py)
busybox_image=localhost/gpulab/busybox
started=$SECONDS

# shellcheck source=image-lib.sh
source "${BASH_SOURCE[0]%/*}/image-lib.sh"

if [ "${1:-}" = --mirror ]; then # the Debian source the tree would come from, and nothing else
  debian_mirror "$suite" | sed -n 1p | grep . || die "no Debian source for $suite (main) in $apt_dir"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "make node-image needs root (debootstrap and chroot)"
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "make node-image builds amd64 nodes, on an amd64 Debian"
bounded 20 docker info >/dev/null 2>&1 || die "no Docker engine answers: \`bash hack/docker-engine.sh start\` gives one (as root)"

read -r mirror keyring < <(debian_mirror "$suite") || true
[ -n "${mirror:-}" ] || die "no Debian source for $suite (main) in $apt_dir/sources.list or $apt_dir/sources.list.d:" \
  "the node image is debootstrapped from this machine's own Debian mirror; add one (deb <mirror> $suite main)"
keyring_args=()
[ "$keyring" = - ] || keyring_args=(--keyring="$keyring")
# debootstrap; Debian's static busybox (the workload image); gcc and the static C library (the pause binary).
ensure_packages debootstrap busybox-static gcc libc6-dev
busybox=/bin/busybox

packages=$(sed 's/#.*//; /^[[:space:]]*$/d' "$recipe/packages" | tr -d ' ' | paste -sd, -)
tree_key=$(printf '%s\n' "tree 1" "$mirror" "$suite" amd64 minbase "$packages" | sha)
tree="$cache/rootfs-${tree_key:0:16}"
if [ "${1:-}" = --tree ]; then # only the tree: while ./bin is still being built
  make_tree
  exit 0
fi
for program in "${programs[@]}"; do
  [ -x "$bin/$program" ] || die "$bin/$program is missing: \`make tools\` builds it (GPULAB_BIN=dir for others)"
done
kubernetes_version=$("$bin/kubeadm" version -o short)
# What `make up` checks before a DRA (HAMi) tenant's node runs the image (process_lab/preflight.py: the labels):
# each plugin's own bytes, so that a plugin rebuilt since the image was made is told apart too.
dra_plugin_sha256=$(sha256sum "$bin/gpulab-dra-plugin" | cut -d' ' -f1)
hami_plugin_sha256=$(sha256sum "$bin/gpulab-hami-plugin" | cut -d' ' -f1)

# kubernetes' pause, from the module the pinned kubeadm was built from (Go checks it against go.sum).
pause_dir=$(cd "$root/tools/kubernetes" && bounded 600 "$go" mod download -json k8s.io/kubernetes | jq -r .Dir)
[ -f "$pause_dir/build/pause/linux/pause.c" ] || die "no build/pause/linux/pause.c in $pause_dir (the k8s.io/kubernetes module)"
pause_tag=$(sed -n 's/^TAG ?= *//p' "$pause_dir/build/pause/Makefile")
kubeadm_pause=$(sed -n 's/^[[:space:]]*PauseVersion = "\(.*\)"/\1/p' "$pause_dir/cmd/kubeadm/app/constants/constants.go")
[ "$pause_tag" = "$kubeadm_pause" ] || die "build/pause/Makefile says pause $pause_tag, kubeadm's constants $kubeadm_pause"
pause_image="registry.k8s.io/pause:$pause_tag"
grep -q "sandbox_image = \"$pause_image\"" "$recipe/files/etc/containerd/config.toml" ||
  die "node-image/files/etc/containerd/config.toml must name sandbox_image = \"$pause_image\" (kubeadm $kubernetes_version's pause)"
busybox_version=$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null | sed 's/^[0-9]*://; s/-.*//')
busybox_ref="$busybox_image:${busybox_version:-unknown}"

image_key=$(
  {
    printf '%s\n' "$tree_key" "$pause_image" "$busybox_ref" "$(gcc --version | sed -n 1p)"
    sha "$script" "$root/node-image/image-lib.sh" "$pause_dir/build/pause/linux/pause.c" "$busybox" "${programs[@]/#/$bin/}"
    (cd "$recipe" && find files -print0 | LC_ALL=C sort -z | xargs -0 stat -c '%n %a %F') # names and modes
    (cd "$recipe" && find files -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha
)
tag="$repository:${image_key:0:12}"
stable="$repository:$kubernetes_version"

if bounded 20 docker image inspect "$tag" >/dev/null 2>&1; then
  bounded 20 docker tag "$tag" "$stable"
  log "$tag is up to date (also $stable): nothing to build ($((SECONDS - started)) s)"
  exit 0
fi

make_tree
release_date=$(sed -n 's/^Date: //p' "$tree"/var/lib/apt/lists/*_Release 2>/dev/null | sed -n 1p)

stage="$cache/stage"
rm -rf "$stage"
on_exit "rm -rf '$stage'"
cp -a "$tree" "$stage"
rm -f "$stage/.gpulab-complete"
cp -a "$recipe/files/." "$stage/"
for program in "${programs[@]}"; do
  install -m 755 "$bin/$program" "$stage/usr/bin/$program"
done
# /opt/cni/bin is where kubelets, containerd and Calico look for CNI plugins; Debian installs them in /usr/lib/cni.
mkdir -p "$stage/opt/cni" "$stage/etc/cni/net.d" "$stage/etc/kubernetes/manifests" "$stage/usr/share/gpulab/images"
ln -sfn /usr/lib/cni "$stage/opt/cni/bin"
# Every container gets its own machine id at boot (systemd writes one when the file is empty), as kind's
# entrypoint regenerates it: nodes of one image must not share it.
: >"$stage/etc/machine-id"
chroot "$stage" systemctl enable kubelet.service gpulab-images.service containerd.service >/dev/null 2>&1
# binfmt_misc is the kernel's, not the container's: kind masks systemd-binfmt too (images/base/Dockerfile).
chroot "$stage" systemctl mask systemd-binfmt.service >/dev/null 2>&1
rm -rf "$stage"/usr/share/doc/* "$stage"/usr/share/man/* "$stage"/usr/share/info/*

# The two images containerd imports at boot (gpulab-images.service).
pause_and_busybox "$GPULAB_RUN_DIR/images" "$pause_dir" "$pause_tag" "$pause_image" "$busybox" "$busybox_ref" \
  "$stage/usr/share/gpulab/images"

log "importing the node's root file system into the engine as $tag"
tar --numeric-owner -C "$stage" -c . | bounded 900 docker import \
  --change 'ENTRYPOINT ["/sbin/init"]' --change 'ENV container=docker' \
  --change "LABEL gpulab.io/node-image.inputs=$image_key" \
  --change "LABEL gpulab.io/node-image.kubernetes=$kubernetes_version" \
  --change "LABEL gpulab.io/node-image.dra-plugin=sha256:$dra_plugin_sha256" \
  --change "LABEL gpulab.io/node-image.hami-plugin=sha256:$hami_plugin_sha256" \
  --change "LABEL gpulab.io/node-image.debian=\"$mirror $suite ${release_date:-unknown date}\"" \
  --change "LABEL gpulab.io/node-image.images=\"$pause_image $busybox_ref\"" \
  - "$tag" >/dev/null
bounded 20 docker tag "$tag" "$stable"
# The workload image for the host's engine too: the lab's loader (scripts/load-images.sh) saves from there.
bounded 120 docker load -q <"$stage/usr/share/gpulab/images/busybox.tar" >/dev/null
size=$(bounded 20 docker image inspect -f '{{.Size}}' "$tag")
log "built $tag (also $stable): $((size / 1000000)) MB, Debian $suite of $mirror (Release ${release_date:-?})," \
  "kubelet $kubernetes_version, $pause_image, $busybox_ref; $((SECONDS - started)) s"
