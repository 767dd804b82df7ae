#!/usr/bin/env bash
# Helpers of the scripts that make gpulab's images without a registry (build.sh, lab-images.sh), sourced
# after lib.sh: the Debian source of this machine, Debian packages, the debootstrap tree both node images start
# from, and image archives written without an engine.
# make_tree reads: cache, tree, suite, mirror, packages, keyring_args (set by the sourcing script).
# shellcheck disable=SC2154 # apt_dir, cache, tree, suite, mirror, packages, keyring_args: the sourcing script sets them
set -euo pipefail

sha() { sha256sum "$@" | cut -d' ' -f1; }

# debian_mirror SUITE: "URI KEYRING" of the first `deb` source of this machine that serves SUITE's main
# component, from /etc/apt/sources.list and sources.list.d/*.list (one-line form) and *.sources (deb822).
debian_mirror() {
  local wanted=$1 file
  shopt -s nullglob
  for file in "$apt_dir/sources.list" "$apt_dir"/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    # deb [options] URI SUITE COMPONENT...
    awk -v suite="$wanted" '
      $1 == "deb" {
        keyring = "-"; i = 2
        if ($2 ~ /^\[/) {
          for (; i <= NF; i++) { if ($i ~ /signed-by=/) { keyring = $i; sub(/.*signed-by=/, "", keyring); sub(/\]$/, "", keyring) }
                                 if ($i ~ /\]$/) { i++; break } }
        }
        if ($(i + 1) != suite) next
        for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i, keyring; exit }
      }' "$file"
  done
  for file in "$apt_dir"/sources.list.d/*.sources; do
    # deb822 stanzas, separated by blank lines; `Enabled: no` turns one off.
    awk -v suite="$wanted" '
      function check() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && (" " components " ") ~ / main / && enabled != "no") {
          split(uris, u, " "); print u[1], (keyring == "" ? "-" : keyring); found = 1; exit
        }
        types = suites = components = uris = keyring = enabled = ""
      }
      /^[[:space:]]*#/ { next }
      /^[[:space:]]*$/ { check(); next }
      { key = tolower($1); sub(/:$/, "", key); value = $0; sub(/^[^:]*:[[:space:]]*/, "", value)
        if (key == "types") types = value; else if (key == "uris") uris = value
        else if (key == "suites") suites = value; else if (key == "components") components = value
        else if (key == "signed-by") keyring = value; else if (key == "enabled") enabled = tolower(value) }
      END { if (!found) check() }' "$file"
  done
  shopt -u nullglob
}

installed() { has_text 'ok installed' "$(dpkg-query -W -f '${Status}' "$1" 2>/dev/null)"; }

ensure_packages() { # ensure_packages PACKAGE...: install those of Debian's PACKAGEs that are missing, with apt
  local missing=() package
  for package in "$@"; do installed "$package" || missing+=("$package"); done
  [ ${#missing[@]} = 0 ] && return 0
  log "installing Debian's ${missing[*]} (apt-get)"
  bounded 300 apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive bounded 600 apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# docker_archive ROOT NAME ENTRYPOINT USER OUT: a `docker save` archive (the format `ctr images import` and
# `docker load` read) of one layer made of ROOT, written without an engine; the same ROOT always gives the
# same image id (files sorted, owned by root, time 0). PATH is the usual one, as images of distroless bases set
# it: a pod's `command: [kube-apiserver]` is looked up there.
docker_archive() {
  local rootfs=$1 name=$2 entrypoint=$3 user=$4 out=$5 work diff config
  work=$(mktemp -d "$GPULAB_RUN_DIR/archive.XXXXXX")
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$work/layer.tar" .
  diff=$(sha "$work/layer.tar")
  mkdir "$work/$diff"
  mv "$work/layer.tar" "$work/$diff/layer.tar"
  jq -cn --arg diff "sha256:$diff" --argjson entrypoint "$entrypoint" --arg user "$user" \
    '{architecture: "amd64", os: "linux", created: "1970-01-01T00:00:00Z",
      config: ({Entrypoint: $entrypoint, Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
               + (if $user == "" then {} else {User: $user} end)),
      rootfs: {type: "layers", diff_ids: [$diff]}}' >"$work/config.json"
  config=$(sha "$work/config.json")
  mv "$work/config.json" "$work/$config.json"
  jq -cn --arg config "$config.json" --arg name "$name" --arg layer "$diff/layer.tar" \
    '[{Config: $config, RepoTags: [$name], Layers: [$layer]}]' >"$work/manifest.json"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" -cf "$out" manifest.json "$config.json" "$diff"
  rm -rf "$work"
}

# pause_and_busybox WORK PAUSE_SOURCE PAUSE_TAG PAUSE_REF BUSYBOX BUSYBOX_REF OUT: the archives OUT/pause.tar
# (Kubernetes' build/pause/linux/pause.c, static) and OUT/busybox.tar (BUSYBOX with every applet), made in WORK.
# The busybox image holds the mount points a runtime spec names (containerd's default spec: /proc, /dev, /sys,
# /run), so that it also runs from a read-only mount of the image (tests/real/test_node_image.py does).
pause_and_busybox() {
  local work=$1 pause_source=$2 pause_tag=$3 pause_ref=$4 busybox=$5 busybox_ref=$6 out=$7 applet
  mkdir -p "$work/pause" "$work/busybox"/{bin,dev,etc,proc,run,sys,tmp}
  chmod 1777 "$work/busybox/tmp"
  gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-gpulab" -o "$work/pause/pause" "$pause_source/build/pause/linux/pause.c"
  docker_archive "$work/pause" "$pause_ref" '["/pause"]' 65535:65535 "$out/pause.tar"
  cp "$busybox" "$work/busybox/bin/busybox"
  for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$work/busybox/bin/$applet"
  done
  docker_archive "$work/busybox" "$busybox_ref" '["/bin/sh"]' "" "$out/busybox.tar"
}

# make_tree: the debootstrap tree of $tree_key in $tree, kept between runs.
make_tree() {
  mkdir -p "$cache"
  if [ ! -e "$tree/.gpulab-complete" ]; then
    log "debootstrap $suite from $mirror into $tree (minbase: ${packages//,/ }); about two minutes"
    rm -rf "$tree.partial"
    on_exit "rm -rf '$tree.partial'"
    bounded "${TIMEOUT:-1800}" debootstrap --variant=minbase --arch=amd64 "${keyring_args[@]}" --include="$packages" \
      "$suite" "$tree.partial" "$mirror" >"$GPULAB_RUN_DIR/debootstrap.log" 2>&1 || {
      tail -n 20 "$GPULAB_RUN_DIR/debootstrap.log" >&2
      die "debootstrap of $suite from $mirror failed (above)"
    }
    # The downloaded packages and apt's lists are of no use in a node; the Release file stays, for the trace.
    rm -rf "$tree.partial"/var/cache/apt/archives/*.deb "$tree.partial"/var/lib/apt/lists/*_Packages
    touch "$tree.partial/.gpulab-complete"
    for old in "$cache"/rootfs-*; do
      [ "$old" = "$tree.partial" ] || [ "$old" = "$tree" ] || rm -rf "$old" # one kept tree, not one per change
    done
    mv "$tree.partial" "$tree"
  else
    log "debootstrap tree of $suite from $mirror: kept in $tree"
  fi
}
