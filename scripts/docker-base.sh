#!/usr/bin/env bash
# The base image of the mptlab image: a Debian 12 (bookworm) root made with
# debootstrap and imported into the local Docker engine (`docker import`).
# No image registry is needed (the project's machines have none).
#
#   scripts/docker-base.sh        make (or reuse) the base image, print its tag
#
# Inputs -> cache key: this script, the suite and the Debian mirrors.  The
# root tarball is kept in $MPTLAB_CACHE/docker/ (default ~/.cache/mptlab), so
# a fresh clone or a pruned engine imports it again (~10 s) instead of
# bootstrapping (~2-3 min, mostly downloads).  The image is tagged
# mptlab-base:<key>.
#
# The mirrors are the host's own (its apt sources), since that is the one a
# machine behind a restricted network can reach; MPTLAB_DEBIAN_MIRROR and
# MPTLAB_DEBIAN_SECURITY_MIRROR override them.
set -euo pipefail

suite=bookworm
cache=${MPTLAB_CACHE:-$HOME/.cache/mptlab}/docker
log() { echo "docker-base: $*" >&2; }

# The first URI of the host's apt sources that serves "$1" (deb822 .sources
# files and one-line .list files).
host_mirror() {
  local want=$1 f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v want="$want" '
      /^[[:space:]]*$/ { if (uri != "" && hit) print uri; uri = ""; hit = 0; next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == want) hit = 1 }
      END { if (uri != "" && hit) print uri }' "$f"
  done
  { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } \
    | awk -v want="$want" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i == want) { print $(i - 1) } }'
}

mirror=${MPTLAB_DEBIAN_MIRROR:-$(host_mirror "$suite" | sed -n 1p)}
mirror=${mirror:-http://deb.debian.org/debian}
security=${MPTLAB_DEBIAN_SECURITY_MIRROR:-$(host_mirror "$suite-security" | sed -n 1p)}
security=${security:-http://deb.debian.org/debian-security}

key=$({ cat "${BASH_SOURCE[0]}"; echo "$suite $mirror $security $(dpkg --print-architecture)"; } \
  | sha256sum | cut -c1-16)
tag=mptlab-base:$key
tarball=$cache/debian-$suite-$key.tar

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

if [ ! -f "$tarball" ]; then
  command -v debootstrap >/dev/null || {
    log "debootstrap is not installed (scripts/install-deps.sh docker installs it)"
    exit 1
  }
  [ "$(id -u)" -eq 0 ] || { log "debootstrap needs root (device nodes, chroot)"; exit 1; }
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  log "debootstrap $suite from $mirror into $root (a few minutes, once per key $key)"
  # minbase: apt, dpkg and essential only; the Dockerfile installs the rest
  # from the same mirror with scripts/install-deps.sh, in cached layers.
  if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1; then
    tail -n 30 "$root.log" >&2
    log "debootstrap failed; log in $root.log"
    exit 1
  fi
  cat > "$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
EOF
  # what Docker's official Debian images do: no downloaded .debs or lists kept
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/dev/*
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -f "$root.log"
  log "root tarball: $tarball ($(du -h "$tarball" | cut -f1))"
fi
log "importing $tarball as $tag"
docker import --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
echo "$tag"
