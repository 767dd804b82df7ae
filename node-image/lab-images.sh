#!/usr/bin/env bash
# `make lab-images`: the Docker lab's images of the programs the Go module proxy serves, made without a registry.
#
#   gpulab/kind-node:<kubernetes version>  a node image kind v0.33.0 runs (and a tenant worker can be): the
#       debootstrap tree of `make node-image` (node-image/packages), kubelet, kubeadm and kubectl of `make tools`,
#       kind's own node files (entrypoint, kubelet units: images/base/files of the pinned kind module, hash-checked
#       by Go), node-image/kind/files (containerd's config, the CNI and storage manifests kind applies), and, as
#       kindest/node carries them, the images kubeadm v1.36.4 runs, as archives containerd imports at boot
#       (gpulab-images.service): kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd
#       (kubeadm's DefaultEtcdVersion), CoreDNS (kubeadm's CoreDNSVersion), pause, and local-path-provisioner
#       with busybox for the storage manifest and the CNI installer.
#   quay.io/metallb/controller:<v>, quay.io/metallb/speaker:<v>  MetalLB's two programs, in the engine, under
#       the names the pinned MetalLB manifest runs, so the lab's loader (scripts/load-images.sh) finds them.
#
# Every program comes from `make tools` / `make lab-images` (GPULAB_BIN, default ./bin); every version is checked
# against the pinned kubeadm's constants. Each image is named as upstream names the one it stands for, and
# labelled as gpulab's build (gpulab.io/built-by). Cached: with an image of the inputs' hash present, nothing
# is built. Needs root (debootstrap, chroot) and a Docker engine. What it holds and why: docs/docker-lab.md.
# env: GPULAB_BIN (./bin), GPULAB_NODE_IMAGE_CACHE (.cache/node-image), GPULAB_NODE_SUITE (bookworm),
#      GPULAB_KIND_NODE_REPOSITORY (gpulab/kind-node), APT_DIR (/etc/apt), GO (go), TIMEOUT (debootstrap, 1800)
set -euo pipefail
# shellcheck source=../scripts/lib.sh
source "${BASH_SOURCE[0]%/*}/../scripts/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first

root=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
recipe="$root/node-image"
bin=${GPULAB_BIN:-$root/bin}
cache=${GPULAB_NODE_IMAGE_CACHE:-$root/.cache/node-image}
suite=${GPULAB_NODE_SUITE:-bookworm}
repository=${GPULAB_KIND_NODE_REPOSITORY:-gpulab/kind-node}
apt_dir=${APT_DIR:-/etc/apt}
go=${GO:-go}
started=$SECONDS
node_programs=(kubelet kubeadm kubectl)
image_programs=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubeadm-etcd coredns
  local-path-provisioner metallb-controller metallb-speaker)
busybox=/bin/busybox

# shellcheck source=image-lib.sh
source "${BASH_SOURCE[0]%/*}/image-lib.sh"

[ "$(id -u)" = 0 ] || die "make lab-images needs root (debootstrap and chroot)"
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "make lab-images builds amd64 images, on an amd64 Debian"
bounded 20 docker info >/dev/null 2>&1 || die "no Docker engine answers: \`bash hack/docker-engine.sh start\` gives one (as root)"
for program in "${node_programs[@]}" "${image_programs[@]}"; do
  [ -x "$bin/$program" ] || die "$bin/$program is missing: \`make lab-images\` builds it first (GPULAB_BIN=dir for others)"
done

read -r mirror keyring < <(debian_mirror "$suite") || true
[ -n "${mirror:-}" ] || die "no Debian source for $suite (main) in $apt_dir: the node image is debootstrapped from it"
keyring_args=()
[ "$keyring" = - ] || keyring_args=(--keyring="$keyring")
ensure_packages debootstrap busybox-static gcc libc6-dev

# module_dir WRAPPER MODULE: the pinned module's folder in Go's module cache (Go checks it against go.sum).
module_dir() { (cd "$root/tools/$1" && bounded 600 "$go" mod download -json "$2" | jq -r .Dir); }

# The versions kubeadm deploys, from the pinned kubeadm's own constants; each program must be that version.
kubernetes_version=$("$bin/kubeadm" version -o short)
k8s_dir=$(module_dir kubernetes k8s.io/kubernetes)
constants="$k8s_dir/cmd/kubeadm/app/constants/constants.go"
constant() { sed -n "s/^[[:space:]]*$1 = \"\\(.*\\)\"/\\1/p" "$constants" | sed -n 1p; }
etcd_tag=$(constant DefaultEtcdVersion)
coredns_tag=$(constant CoreDNSVersion)
pause_tag=$(constant PauseVersion)
[ -n "$etcd_tag" ] && [ -n "$coredns_tag" ] && [ -n "$pause_tag" ] || die "cannot read kubeadm's image versions in $constants"
# version_is PROGRAM LINE ARG...: PROGRAM ARG... prints LINE, or the lab image would carry another version.
version_is() {
  local printed
  printed=$("$bin/$1" "${@:3}" 2>&1) || die "$bin/$1 ${*:3} failed: $(first_line "$printed")"
  has_line "$2" "$printed" ||
    die "kubeadm $kubernetes_version needs $bin/$1 to print '$2' (its version); it prints '$(first_line "$printed")'"
}
version_is kubeadm-etcd "etcd Version: ${etcd_tag%-*}" --version
version_is coredns "CoreDNS-${coredns_tag#v}" -version
for program in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet; do
  version_is "$program" "Kubernetes $kubernetes_version" --version
done
grep -q "sandbox_image = \"registry.k8s.io/pause:$pause_tag\"" "$recipe/kind/files/etc/containerd/config.toml" ||
  die "node-image/kind/files/etc/containerd/config.toml must name registry.k8s.io/pause:$pause_tag (kubeadm's pause)"
kind_dir=$(module_dir kind sigs.k8s.io/kind)
[ -f "$kind_dir/images/base/files/usr/local/bin/entrypoint" ] || die "no images/base/files in $kind_dir (the kind module)"
local_path_version=$(sed -n 's/^require github.com\/rancher\/local-path-provisioner \(v[^ ]*\).*/\1/p; s/^[[:space:]]*github.com\/rancher\/local-path-provisioner \(v[^ ]*\).*/\1/p' \
  "$root/tools/local-path-provisioner/go.mod" | sed -n 1p)
metallb_version=$(sed -n 's/^[[:space:]]*go.universe.tf\/metallb \(v[^ ]*\).*/\1/p; s/^require go.universe.tf\/metallb \(v[^ ]*\).*/\1/p' \
  "$root/tools/metallb/go.mod" | sed -n 1p)
[ -n "$local_path_version" ] && [ -n "$metallb_version" ] || die "cannot read the local-path-provisioner or MetalLB pin in tools/"
busybox_version=$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null | sed 's/^[0-9]*://; s/-.*//')

registry=registry.k8s.io
busybox_ref="localhost/gpulab/busybox:${busybox_version:-unknown}"
pause_ref="$registry/pause:$pause_tag"
local_path_ref="localhost/gpulab/local-path-provisioner:$local_path_version"
metallb_refs=("quay.io/metallb/controller:$metallb_version" "quay.io/metallb/speaker:$metallb_version")

packages=$(sed 's/#.*//; /^[[:space:]]*$/d' "$recipe/packages" | tr -d ' ' | paste -sd, -)
tree_key=$(printf '%s\n' "tree 1" "$mirror" "$suite" amd64 minbase "$packages" | sha) # build.sh's tree
tree="$cache/rootfs-${tree_key:0:16}"

image_key=$(
  {
    printf '%s\n' "kind-node 1" "$tree_key" "$busybox_ref" "$(gcc --version | sed -n 1p)" "${metallb_refs[@]}"
    sha "$0" "$root/node-image/image-lib.sh" "$k8s_dir/build/pause/linux/pause.c" "$busybox" \
      "${node_programs[@]/#/$bin/}" "${image_programs[@]/#/$bin/}"
    (cd "$kind_dir/images/base" && find files -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    (cd "$recipe" && find files kind -print0 | LC_ALL=C sort -z | xargs -0 stat -c '%n %a %F')
    (cd "$recipe" && find files kind -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha
)
tag="$repository:${image_key:0:12}"
stable="$repository:$kubernetes_version"
engine_has() { bounded 20 docker image inspect "$1" >/dev/null 2>&1; }
if engine_has "$tag" && engine_has "${metallb_refs[0]}" && engine_has "${metallb_refs[1]}" &&
  [ "$(bounded 20 docker image inspect -f '{{index .Config.Labels "gpulab.io/kind-node.inputs"}}' "${metallb_refs[0]}")" = "$image_key" ]; then
  bounded 20 docker tag "$tag" "$stable"
  log "$tag and MetalLB $metallb_version are up to date (also $stable): nothing to build ($((SECONDS - started)) s)"
  exit 0
fi

make_tree
work="$cache/kind-stage"
rm -rf "$work"
mkdir -p "$work"
on_exit "rm -rf '$work'"
stage="$work/root"
archives="$stage/usr/share/gpulab/images"
cp -a "$tree" "$stage"
rm -f "$stage/.gpulab-complete"

# image ROOT REF ENTRYPOINT_JSON: an archive containerd imports at boot.
image() { docker_archive "$1" "$2" "$3" "" "$archives/$(tr -c 'a-zA-Z0-9.\n-' _ <<<"$2").tar"; }

# static_image NAME REF PROGRAM: one static program at /usr/local/bin/NAME (where upstream's images have it).
static_image() {
  local dir="$work/images/$1"
  mkdir -p "$dir/usr/local/bin" "$dir/tmp" "$dir/etc"
  chmod 1777 "$dir/tmp"
  install -m 755 "$bin/$3" "$dir/usr/local/bin/$1"
  echo "nobody:x:65534:65534:nobody:/:/sbin/nologin" >"$dir/etc/passwd"
  image "$dir" "$2" "[\"/usr/local/bin/$1\"]"
}

# copy_with_libraries DEST FILE...: FILEs of the tree, with the shared libraries they load, into DEST.
copy_with_libraries() {
  local dest=$1 file library dir
  shift
  # Debian 12's merged /usr: /lib, /lib64, /bin and /sbin are links into /usr, as in the tree.
  for dir in lib lib64 bin sbin; do
    mkdir -p "$dest/usr/$dir"
    [ -e "$dest/$dir" ] || ln -s "usr/$dir" "$dest/$dir"
  done
  for file in "$@"; do
    mkdir -p "$dest$(dirname "$file")"
    cp -a "$stage$file" "$dest$file"
    for library in $(chroot "$stage" /usr/bin/ldd "$file" 2>/dev/null | grep -o '/[^ ]*'); do
      mkdir -p "$dest$(dirname "$library")"
      cp -aL "$stage$library" "$dest$library"
    done
  done
}

mkdir -p "$archives"
for program in kube-apiserver kube-controller-manager kube-scheduler; do
  static_image "$program" "$registry/$program:$kubernetes_version" "$program"
done
static_image etcd "$registry/etcd:$etcd_tag" kubeadm-etcd
static_image local-path-provisioner "$local_path_ref" local-path-provisioner
# CoreDNS: at /coredns, kubeadm's Deployment passes only its arguments (phases/addons/dns/manifests.go); as root,
# which the Deployment's capability NET_BIND_SERVICE then lets bind :53 (the official image, non-root, carries
# that capability on the file instead).
mkdir -p "$work/images/coredns/etc"
install -m 755 "$bin/coredns" "$work/images/coredns/coredns"
image "$work/images/coredns" "$registry/coredns/coredns:$coredns_tag" '["/coredns"]'
# kube-proxy with iptables (both backends, and the wrapper that picks the node's) and a shell for the wrapper.
proxy="$work/images/kube-proxy"
# iptables loads its matches (statistic, comment, ...) as shared objects, each with libraries of its own (libm).
mapfile -t extensions < <(cd "$stage" && find usr/lib/x86_64-linux-gnu/xtables -name '*.so' | sed 's|^|/|')
copy_with_libraries "$proxy" /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi "${extensions[@]}"
mkdir -p "$proxy/etc" "$proxy/usr/local/bin" "$proxy/run" "$proxy/tmp"
cp "$stage/etc/protocols" "$stage/etc/ethertypes" "$proxy/etc/" 2>/dev/null || cp "$stage/etc/protocols" "$proxy/etc/"
install -m 755 "$busybox" "$proxy/bin/busybox"
for applet in sh grep ln; do ln -s busybox "$proxy/bin/$applet"; done
install -m 755 "$recipe/kind/kube-proxy/iptables-wrapper" "$proxy/usr/sbin/iptables-wrapper"
for name in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -s iptables-wrapper "$proxy/usr/sbin/$name"
done
install -m 755 "$bin/kube-proxy" "$proxy/usr/local/bin/kube-proxy"
image "$proxy" "$registry/kube-proxy:$kubernetes_version" '["/usr/local/bin/kube-proxy"]'
# pause and busybox, as build.sh makes them.
pause_and_busybox "$work/images" "$k8s_dir" "$pause_tag" "$pause_ref" "$busybox" "$busybox_ref" "$archives"

# The node: gpulab's node files (the runc wrapper, the image import unit), kind's node files over them, then the
# kind flavour's own (containerd's config, kind's manifests). Debian's containerd.service is kept (kind's runs a
# containerd built into /usr/local/bin).
cp -a "$recipe/files/." "$stage/"
kind_files="$kind_dir/images/base/files"
install -m 755 "$kind_files/usr/local/bin/entrypoint" "$stage/usr/local/bin/entrypoint"
mkdir -p "$stage/kind/bin" "$stage/kind/manifests"
install -m 755 "$kind_files"/kind/bin/*.sh "$stage/kind/bin/"
for unit in kubelet.service kubelet.slice undo-mount-hacks.service; do
  install -m 644 "$kind_files/etc/systemd/system/$unit" "$stage/etc/systemd/system/$unit"
done
rm -f "$stage/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
install -m 644 "$kind_files"/etc/systemd/system/kubelet.service.d/*.conf "$stage/etc/systemd/system/kubelet.service.d/"
install -m 644 "$kind_files/etc/default/kubelet" "$stage/etc/default/kubelet"
install -m 644 "$kind_files"/etc/sysctl.d/*.conf "$stage/etc/sysctl.d/"
cp -a "$recipe/kind/files/." "$stage/"
sed -i "s|@BUSYBOX@|$busybox_ref|g; s|@PAUSE@|$pause_ref|g; s|@LOCAL_PATH_PROVISIONER@|$local_path_ref|g" \
  "$stage"/kind/manifests/*.yaml
echo "$kubernetes_version" >"$stage/kind/version"
for program in "${node_programs[@]}"; do
  install -m 755 "$bin/$program" "$stage/usr/bin/$program"
done
mkdir -p "$stage/opt/cni" "$stage/etc/cni/net.d" "$stage/etc/kubernetes/manifests"
ln -sfn /usr/lib/cni "$stage/opt/cni/bin"
: >"$stage/etc/machine-id"
# As kind's image (images/base/Dockerfile): journald does not read the host's kernel log; binfmt_misc is the
# kernel's, not the container's.
echo "ReadKMsg=no" >>"$stage/etc/systemd/journald.conf"
chroot "$stage" systemctl enable kubelet.service containerd.service undo-mount-hacks.service gpulab-images.service >/dev/null 2>&1
chroot "$stage" systemctl mask systemd-binfmt.service >/dev/null 2>&1
rm -rf "$stage"/usr/share/doc/* "$stage"/usr/share/man/* "$stage"/usr/share/info/*

preloaded=$(for archive in "$archives"/*.tar; do tar -xOf "$archive" manifest.json | jq -r '.[0].RepoTags[0]'; done | sort | paste -sd' ')
log "importing the kind node's root file system into the engine as $tag"
tar --numeric-owner -C "$stage" -c . | bounded 900 docker import \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'ENV container=docker' \
  --change 'LABEL gpulab.io/built-by="gpulab make lab-images"' \
  --change "LABEL gpulab.io/kind-node.inputs=$image_key" \
  --change "LABEL gpulab.io/kind-node.kubernetes=$kubernetes_version" \
  --change "LABEL gpulab.io/kind-node.images=\"$preloaded\"" \
  - "$tag" >/dev/null
# systemd stops cleanly on SIGRTMIN+3 (kind's image sets it); `docker import` cannot set a stop signal.
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$tag" | bounded 300 docker build -q -t "$tag" - >"$GPULAB_RUN_DIR/build.log" 2>&1 ||
  die "docker build of $tag's stop signal failed: $(tail -n 3 "$GPULAB_RUN_DIR/build.log")"
bounded 20 docker tag "$tag" "$stable"

# MetalLB's controller and speaker, into the engine (they run in the management cluster's node: the lab loads
# them there from the engine). Upstream's images run /controller and /speaker (its Dockerfiles).
for part in controller speaker; do
  dir="$work/images/metallb-$part"
  mkdir -p "$dir/tmp" "$dir/etc"
  chmod 1777 "$dir/tmp"
  install -m 755 "$bin/metallb-$part" "$dir/$part"
  ref="quay.io/metallb/$part:$metallb_version"
  docker_archive "$dir" "$ref" "[\"/$part\"]" "" "$work/metallb-$part.tar"
  bounded 300 docker load -q <"$work/metallb-$part.tar" >/dev/null
  # The inputs' hash on the image, for the up-to-date check above (docker import cannot label a loaded image).
  printf 'FROM %s\nLABEL gpulab.io/built-by="gpulab make lab-images" gpulab.io/kind-node.inputs=%s\n' "$ref" "$image_key" |
    bounded 300 docker build -q -t "$ref" - >"$GPULAB_RUN_DIR/build.log" 2>&1 ||
    die "docker build of $ref's labels failed: $(tail -n 3 "$GPULAB_RUN_DIR/build.log")"
done
# The busybox image for the engine too: tests and the CNI check run it from there.
bounded 120 docker load -q <"$archives/busybox.tar" >/dev/null
size=$(bounded 20 docker image inspect -f '{{.Size}}' "$tag")
log "built $tag (also $stable): $((size / 1000000)) MB, kind's node files of $(basename "$kind_dir"), images $preloaded;" \
  "and ${metallb_refs[*]}; $((SECONDS - started)) s"
