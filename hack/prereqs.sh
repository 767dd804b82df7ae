#!/usr/bin/env bash
# Installs kind, kubectl and the Pulumi CLI into ./bin at the versions pinned in model/versions.py
# when the ones on PATH are missing or differ. Nothing else is touched. hack/preflight.sh has
# already checked the host (Linux, Docker, tools, disk) before make gets here.
# With a source cache each file comes from there instead (get below).
# env: PYTHON (the venv's python, to read the pins), GPULAB_HOST_TOOLS (below), SOURCE_CACHE and STACK (the stack's gpulab:sourceCache, which
#      make names, and the stack),
#      NEED_KIND (no: the stack has no kind management cluster, so kind is not installed; default yes)
set -euo pipefail
# shellcheck source=../scripts/lib.sh
source "${BASH_SOURCE[0]%/*}/../scripts/lib.sh" # no fork before lib.sh: it drops the secrets handed in the environment first
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
export PATH="$bin:$PATH"

case "$(uname -m)" in
x86_64) arch=amd64 pulumi_arch=x64 ;;
aarch64 | arm64) arch=arm64 pulumi_arch=arm64 ;;
*) die "unsupported CPU architecture $(uname -m); kind publishes amd64 and arm64 only" ;;
esac

# KIND_VERSION, KIND_SHA256, KUBECTL_VERSION, KUBECTL_SHA256, PULUMI_VERSION
eval "$("${PYTHON:-python3}" -m model.versions)"

# Two `make up` at once (two terminals, two stacks) install into the same ./bin: one at a time, or one would
# delete the Pulumi archive the other is extracting. flock(1) (util-linux) locks the open file, which goes
# when this script ends, however it ends; the second run then finds the tools in place and downloads nothing.
command -v flock >/dev/null || die "flock is not installed; install util-linux"
exec {bin_lock}>>"$bin/.install.lock"
if ! flock -n "$bin_lock"; then
  log "another gpulab run is installing tools into $bin; waiting up to 600s for it"
  bounded 610 flock -w 600 "$bin_lock" || die "another gpulab run has been installing tools into $bin for 600s"
fi

# get URL [FILE]: the file at URL into FILE (or on stdout): from the stack's source cache when make names one
# (SOURCE_CACHE; hack/source_cache.py checks the file there against the cache's index), else downloaded.
get() {
  local cached=""
  if [ -n "${SOURCE_CACHE:-}" ]; then
    # As a module from the project folder, where python -m finds gpulab's packages (the subshell's cd only).
    cached=$(cd "$root" && "${PYTHON:-python3}" -m hack.source_cache path --stack "${STACK:-dev}" "$1") ||
      die "the source cache $SOURCE_CACHE cannot serve $1 (above)"
    [ -n "$cached" ] || die "the source cache $SOURCE_CACHE has no $1: make cache STACK=${STACK:-dev} fills it"
  fi
  if [ -n "$cached" ]; then
    if [ -n "${2:-}" ]; then cp "$cached" "$2"; else cat "$cached"; fi
  elif [ -n "${2:-}" ]; then
    curl -fsSL --retry 3 -o "$2" "$1"
  else
    curl -fsSL --retry 3 "$1"
  fi
}

# fetch URL FILE EXPECTED_SHA256 CHECKSUM_URL: download, verify against the pinned checksum (amd64)
# or else against the checksum upstream publishes next to the file, then move into place.
fetch() {
  local url=$1 file=$2 expected=$3 checksum_url=$4 partial
  partial=$(mktemp "$bin/.download.XXXXXX")
  if [ -n "${SOURCE_CACHE:-}" ]; then log "taking $url from the source cache"; else log "downloading $url"; fi
  get "$url" "$partial" || {
    rm -f "$partial"
    die "download failed: $url"
  }
  if [ -z "$expected" ]; then
    expected=$(get "$checksum_url" | grep -F "$(basename "$url")" | awk 'NR == 1 {print $1}' || true)
    [ -n "$expected" ] || expected=$(get "$checksum_url" | awk 'NR == 1 {print $1}')
  fi
  echo "$expected  $partial" | sha256sum --check --status || {
    rm -f "$partial"
    die "checksum mismatch for $url (expected $expected)"
  }
  mv "$partial" "$file"
}

need_kind=${NEED_KIND:-yes}
# GPULAB_HOST_TOOLS=DIR: the user's own kind, kubectl and Pulumi CLI (with its language host) in DIR, used as they
# are, whatever their versions (make puts DIR first on PATH): nothing is installed, and the versions are said.
if [ -n "${GPULAB_HOST_TOOLS:-}" ]; then
  wanted=(kubectl pulumi pulumi-language-python)
  [ "$need_kind" = yes ] && wanted+=(kind)
  for tool in "${wanted[@]}"; do
    [ -x "$GPULAB_HOST_TOOLS/$tool" ] || die "GPULAB_HOST_TOOLS=$GPULAB_HOST_TOOLS has no $tool"
  done
  log "host tools of GPULAB_HOST_TOOLS, not the pins (kind $KIND_VERSION, kubectl $KUBECTL_VERSION, pulumi" \
    "v$PULUMI_VERSION): $( [ "$need_kind" = yes ] && "$GPULAB_HOST_TOOLS/kind" version | awk '{print "kind", $2 ", "}')kubectl" \
    "$("$GPULAB_HOST_TOOLS/kubectl" version --client | awk '/Client Version/ {print $3}'), pulumi $("$GPULAB_HOST_TOOLS/pulumi" version)"
  exit 0
fi
if [ "$need_kind" = yes ] && [ "$(kind version 2>/dev/null | awk '{print $2}')" != "$KIND_VERSION" ]; then
  sha=""
  [ "$arch" = amd64 ] && sha=$KIND_SHA256
  url="https://github.com/kubernetes-sigs/kind/releases/download/$KIND_VERSION/kind-linux-$arch"
  fetch "$url" "$bin/kind" "$sha" "$url.sha256sum"
  chmod +x "$bin/kind"
fi

if ! has_line "Client Version: $KUBECTL_VERSION" "$(kubectl version --client 2>/dev/null)"; then
  sha=""
  [ "$arch" = amd64 ] && sha=$KUBECTL_SHA256
  url="https://dl.k8s.io/release/$KUBECTL_VERSION/bin/linux/$arch/kubectl"
  fetch "$url" "$bin/kubectl" "$sha" "$url.sha256"
  chmod +x "$bin/kubectl"
fi

if [ "$(pulumi version 2>/dev/null)" != "v$PULUMI_VERSION" ]; then
  archive="pulumi-v$PULUMI_VERSION-linux-$pulumi_arch.tar.gz"
  fetch "https://get.pulumi.com/releases/sdk/$archive" "$bin/pulumi.tar.gz" "" \
    "https://github.com/pulumi/pulumi/releases/download/v$PULUMI_VERSION/pulumi-$PULUMI_VERSION-checksums.txt"
  tar -xzf "$bin/pulumi.tar.gz" -C "$bin" --strip-components=1
  rm -f "$bin/pulumi.tar.gz"
fi

kind_found=
[ "$need_kind" = yes ] && kind_found="$(kind version | awk '{print "kind", $2}'), "
log "prerequisites: $(docker version --format 'docker {{.Server.Version}}'), ${kind_found}kubectl $KUBECTL_VERSION, pulumi $(pulumi version)"
