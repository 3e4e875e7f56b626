#!/usr/bin/env bash
# Kernel style check: scripts/checkpatch.pl from the built source tree, run
# on the patch series and on every module source file.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kdir=$("$here/build.sh" --dir) || { echo "checkpatch: build the kernel first (make kernel)" >&2; exit 1; }
cp="$kdir/src/scripts/checkpatch.pl"
status=0
for p in $(grep -v '^#' "$here/patches/series"); do
  echo "== $p"
  # FILE_PATH_CHANGES: a new file (sched.c) asks for a MAINTAINERS entry, which is upstream's business
  "$cp" --no-tree --quiet --show-types --ignore FILE_PATH_CHANGES "$here/patches/$p" || status=1
done
for f in "$here"/modules/*.[ch]; do
  echo "== modules/$(basename "$f")"
  "$cp" --no-tree --quiet --show-types -f "$f" || status=1
done
exit $status
