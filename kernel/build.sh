#!/usr/bin/env bash
# Build the mptlab User-Mode Linux kernel and the modules under test.
#
#   kernel/build.sh            build what is missing, print the kernel dir
#   kernel/build.sh --dir      print the kernel dir without building (exit 3 if not built)
#   kernel/build.sh --modules-dir   print the modules dir without building (exit 3 if not built)
#   kernel/build.sh --modules  rebuild only the modules (the kernel must exist)
#
# Inputs -> cache key.  The kernel tree is keyed by the Debian source version,
# the patch series, the config fragment and this script; the modules by their
# own sources.  Everything lands in $MPTLAB_CACHE (default ~/.cache/mptlab),
# so a fresh clone reuses an earlier build and nothing rebuilds unless an
# input changed:
#
#   $MPTLAB_CACHE/kernel/<khash>/src/            patched, configured, built tree
#   $MPTLAB_CACHE/kernel/<khash>/linux           the UML executable
#   $MPTLAB_CACHE/kernel/<khash>/build-info.json what went into it
#   $MPTLAB_CACHE/kernel/<khash>/modules/<mhash>/*.ko
#   $MPTLAB_CACHE/kernel/<khash>/selftests/      upstream MPTCP selftests, built
#
# build/kernel in the checkout is a symlink to the current kernel dir.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
# Debian's source package of the kernel line we patch (6.12 LTS, from
# bookworm-security; the series in patches/ is written against it).
ksrc=linux-source-6.12
cache=${MPTLAB_CACHE:-$HOME/.cache/mptlab}
jobs=${MPTLAB_JOBS:-$(nproc)}
mode=build
case "${1:-}" in
  "") ;;
  --dir) mode=dir ;;
  --modules-dir) mode=modules-dir ;;
  --modules) mode=modules ;;
  *) echo "usage: kernel/build.sh [--dir|--modules-dir|--modules]" >&2; exit 2 ;;
esac

log() { echo "kernel: $*" >&2; }

src_version() {
  dpkg-query -W -f '${Version}' "$ksrc" 2>/dev/null || true
}

# Hash of named files' contents (path relative to the repo, then content).
hash_files() {
  local f
  for f in "$@"; do
    printf '%s\0' "${f#"$root"/}"
    cat "$f"
    printf '\0'
  done | sha256sum | cut -c1-16
}

series_files() {
  local p
  while read -r p; do
    case "$p" in ''|\#*) continue ;; esac
    [ -f "$here/patches/$p" ] || { echo "kernel/patches/series lists '$p' but the file is missing" >&2; exit 1; }
    echo "$here/patches/$p"
  done < "$here/patches/series"
}

module_files() {
  find "$here/modules" -type f \( -name '*.c' -o -name '*.h' -o -name Kbuild -o -name Makefile \) | LC_ALL=C sort
}

kernel_key() {
  local ver=$1
  { echo "$ksrc $ver"; hash_files "$here/build.sh" "$here/patches/series" \
      $(series_files) $(LC_ALL=C ls "$here"/config/*.config); } | sha256sum | cut -c1-16
}

if [ "$mode" = build ] || [ "$mode" = modules ]; then
  "$root/scripts/install-deps.sh" kernel
fi
ver=$(src_version)
if [ -z "$ver" ]; then
  log "Debian's $ksrc is not installed (run kernel/build.sh without --dir)"
  exit 3
fi
khash=$(kernel_key "$ver")
kdir=$cache/kernel/$khash

modules_dir() {
  echo "$kdir/modules/$(hash_files $(module_files))"
}

if [ "$mode" = dir ]; then
  [ -x "$kdir/linux" ] || exit 3
  echo "$kdir"
  exit 0
fi
if [ "$mode" = modules-dir ]; then
  [ -d "$(modules_dir)" ] || exit 3
  modules_dir
  exit 0
fi

build_kernel() {
  local tmp=$kdir.tmp.$$
  log "building UML kernel from Debian $ksrc $ver (key $khash)"
  log "output: $kdir (takes ~10 min on 2 cores; later builds reuse it)"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  log "unpacking /usr/src/$ksrc.tar.xz"
  tar -C "$tmp" -xf "/usr/src/$ksrc.tar.xz"
  mv "$tmp/$ksrc" "$tmp/src"
  local p
  for p in $(series_files); do
    log "applying $(basename "$p")"
    patch -d "$tmp/src" -p1 --quiet --forward < "$p"
  done
  (
    cd "$tmp/src"
    make ARCH=um defconfig >/dev/null
    ./scripts/kconfig/merge_config.sh -m .config "$here"/config/*.config >/dev/null
    make ARCH=um olddefconfig >/dev/null
  )
  check_config "$tmp/src/.config"
  log "compiling (log: $tmp/build.log)"
  if ! with_progress "$tmp/build.log" make -C "$tmp/src" ARCH=um -j"$jobs" linux modules; then
    tail -n 40 "$tmp/build.log" >&2
    log "kernel build failed; full log in $tmp/build.log"
    exit 1
  fi
  cp "$tmp/src/linux" "$tmp/linux"
  local release
  release=$(make -s -C "$tmp/src" ARCH=um kernelrelease)
  cat > "$tmp/build-info.json" <<JSON
{
  "kernel_key": "$khash",
  "source_package": "$ksrc",
  "source_version": "$ver",
  "kernel_release": "$release",
  "arch": "um",
  "patches": [$(for p in $(series_files); do printf '"%s",' "$(basename "$p")"; done | sed 's/,$//')],
  "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
  rm -rf "$kdir"
  mv "$tmp" "$kdir"
  log "kernel $release built in $kdir"
}

# Run a long command with its output in $1, printing a line every 30 s
# (elapsed time, objects compiled so far, the latest one) so that a build
# of several minutes does not look hung.
with_progress() {
  local logf=$1 pid start n last
  shift
  start=$(date +%s)
  "$@" >"$logf" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( ($(date +%s) - start) % 30 == 0 )); then
      n=$(grep -c '^  CC' "$logf" || true)
      last=$(grep '^  CC' "$logf" | tail -n1 | awk '{print $2}')
      log "  $(( $(date +%s) - start )) s: $n files compiled${last:+, now $last}"
      sleep 1
    fi
  done
  wait "$pid"
}

# Every option the fragment asks for must survive olddefconfig: a dependency
# that Kconfig silently drops would otherwise surface as a confusing failure
# in the middle of an experiment.
check_config() {
  local cfg=$1 bad="" line k v got
  while read -r line; do
    case "$line" in CONFIG_*=*) ;; *) continue ;; esac
    k=${line%%=*}; v=${line#*=}
    got=$(grep -E "^$k=" "$cfg" | head -n1 || true)
    if [ "$v" = n ]; then
      [ -z "$got" ] || bad="$bad $line(got:$got)"
    elif [ "$got" != "$line" ]; then
      bad="$bad $line(got:${got:-unset})"
    fi
  done < <(cat "$here"/config/*.config)
  if [ -n "$bad" ]; then
    log "config options not honoured by Kconfig:$bad"
    exit 1
  fi
}

build_modules() {
  local mhash mdir work
  mdir=$(modules_dir)
  mhash=$(basename "$mdir")
  if [ -d "$mdir" ]; then
    echo "$mdir"
    return
  fi
  work=$kdir/modules-build.$$
  rm -rf "$work"
  mkdir -p "$work"
  cp -r "$here/modules/." "$work/"
  log "building modules (key $mhash)"
  if ! make -C "$kdir/src" ARCH=um M="$work" -j"$jobs" modules >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    log "module build failed"
    rm -rf "$work"
    exit 1
  fi
  mkdir -p "$mdir.tmp.$$"
  cp "$work"/*.ko "$mdir.tmp.$$/"
  (cd "$mdir.tmp.$$" && sha256sum ./*.ko > SHA256SUMS)
  mv "$mdir.tmp.$$" "$mdir"
  rm -rf "$work"
  log "modules: $(cd "$mdir" && echo *.ko)"
  echo "$mdir"
}

# The upstream MPTCP selftests of this source tree, built for the guest: the
# C helpers are compiled on the host against the patched uapi headers (the
# guest runs host binaries through hostfs), the scripts copied next to them,
# in the source's layout (net/mptcp/*.sh source ../lib.sh, ../net_helper.sh).
build_selftests() {
  local src=$kdir/src/tools/testing/selftests/net
  local out=$kdir/selftests.tmp.$$ prog
  rm -rf "$out"
  mkdir -p "$out/include/linux" "$out/net/mptcp"
  cp "$kdir/src/include/uapi/linux/mptcp.h" "$kdir/src/include/uapi/linux/mptcp_pm.h" \
    "$out/include/linux/"
  for prog in mptcp_connect pm_nl_ctl mptcp_sockopt mptcp_inq; do
    gcc -Wall -O2 -I"$out/include" -o "$out/net/mptcp/$prog" "$src/mptcp/$prog.c" -lpthread
  done
  cp "$src"/mptcp/*.sh "$src/mptcp/settings" "$out/net/mptcp/"
  cp "$src/lib.sh" "$src/net_helper.sh" "$out/net/"
  rm -rf "$out/include" "$kdir/selftests"
  mv "$out" "$kdir/selftests"
  log "selftests: $(cd "$kdir/selftests/net/mptcp" && echo *.sh | wc -w) scripts in $kdir/selftests/net/mptcp"
}

if [ "$mode" = modules ] && [ ! -x "$kdir/linux" ]; then
  log "no kernel for key $khash yet: run kernel/build.sh first"
  exit 3
fi
[ -x "$kdir/linux" ] || build_kernel
[ -d "$kdir/selftests" ] || build_selftests
mdir=$(build_modules)
mkdir -p "$root/build"
ln -sfn "$kdir" "$root/build/kernel"
log "ready: $kdir/linux (source $ver), modules in $mdir"
echo "$kdir"
