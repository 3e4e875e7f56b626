#!/usr/bin/env bash
# Build the mptlab Docker image (`make docker`): no registry, no kernel rebuild.
#
#   scripts/docker-build.sh [TAG]       default tag: mptlab
#
# 1. the kernel: kernel/build.sh builds it or finds it in the host's cache
#    (~/.cache/mptlab/kernel/<key>, ~10 min once, then reused);
# 2. the base image: scripts/docker-base.sh (debootstrapped Debian 12,
#    `docker import`, cached as a tarball in ~/.cache/mptlab/docker);
# 3. build/docker/: the kernel executable (debug info stripped), its
#    build-info.json and modules, the C helpers (cache/helpers/, built with the
#    checkout's .venv), pyproject.toml's dependencies, and the
#    host's local CA certificates (pip inside the build verifies TLS the way
#    the host does: the project's machines reach PyPI through a proxy whose
#    CA is there), and seccomp.json, the profile containers run with
#    (scripts/docker-seccomp.sh);
# 4. docker build, with the host's pip index if it has one.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# One client for every build, the engine's own (Debian's docker.io, installed
# by scripts/install-deps.sh docker): the legacy builder keys its RUN-step
# cache on what the client sends, and two clients miss each other's layers.
# Measured: after a build with a docker 28 CLI found first in PATH, the same
# tree built with Debian's 20.10 CLI redid the apt and pip layers (295 s
# instead of 1 s).  MPTLAB_DOCKER picks another client.
docker_cli=${MPTLAB_DOCKER:-/usr/bin/docker}
[ -x "$docker_cli" ] || docker_cli=docker
docker() { command "$docker_cli" "$@"; }
tag=${1:-mptlab}
log() { echo "docker: $*" >&2; }
cd "$root"

# the engine: started here if installed and not running (messages say why not)
scripts/docker-engine.sh || exit 1

kdir=$(kernel/build.sh | tail -n1)
mdir=$(kernel/build.sh --modules-dir)
base=$(scripts/docker-base.sh)

stage=build/docker
rm -rf "$stage"
mkdir -p "$stage/kernel/$(basename "$kdir")/modules" "$stage/ca"
# Debug info is 90 % of the executable and nothing in a container reads it.
objcopy --strip-debug "$kdir/linux" "$stage/kernel/$(basename "$kdir")/linux"
cp "$kdir/build-info.json" "$stage/kernel/$(basename "$kdir")/"
cp -r "$mdir" "$stage/kernel/$(basename "$kdir")/modules/"
# not part of the image: what containers are run with (--security-opt)
scripts/docker-seccomp.sh "$stage/seccomp.json"
# The C helpers guests run (the background replayer, spin_sleep.so), built
# here into a cache the image carries: the image has no C compiler, and
# without them every background run failed ("no background replayer").
MPTLAB_CACHE="$stage/cache" .venv/bin/python -c '
from mptlab import home
from mptlab.workloads.helpers import bgtraffic, spin
bgtraffic.build(home.cache_dir()); spin.build(home.cache_dir())'
python3 -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
  pyproject.toml > "$stage/requirements.txt"
for crt in /usr/local/share/ca-certificates/*.crt; do
  if [ -f "$crt" ]; then cp "$crt" "$stage/ca/"; fi
done

pip_index=${PIP_INDEX_URL:-}
pip_extra=${PIP_EXTRA_INDEX_URL:-}
if [ -z "$pip_index" ] && [ -x .venv/bin/pip ]; then
  pip_index=$(.venv/bin/pip config get global.index-url 2>/dev/null || true)
fi
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)

log "building image $tag from $base, kernel $(basename "$kdir")"
start=$(date +%s)
# The build's containers reach the apt and pip mirrors through the default
# bridge (NAT), as on the project's machines; MPTLAB_DOCKER_BUILD_ARGS adds
# options such as --network host where only the host can reach them.
buildlog=$(mktemp)
trap 'rm -f "$buildlog"' EXIT
# shellcheck disable=SC2086
docker build -t "$tag" \
  --build-arg BASE="$base" \
  --build-arg KERNEL_KEY="$(basename "$kdir")" \
  --build-arg PIP_INDEX="$pip_index" \
  --build-arg PIP_EXTRA_INDEX="$pip_extra" \
  --build-arg GIT_COMMIT="$commit" \
  ${MPTLAB_DOCKER_BUILD_ARGS:-} . | tee "$buildlog"
# Images of earlier builds that no tag names any more (the image this tag
# named before, the stages of a build whose inputs changed) keep their own
# layers: 2 MB after a code change, 2.2 GB after a change of the Debian
# packages, build after build.  Remove those of mptlab's stages (the label
# all of them carry) that this build neither made nor reused and that are
# older than it (a concurrent build's are not).
used=$(grep -oE '^ ---> [0-9a-f]{12}' "$buildlog" | awk '{print $2}' || true)
for id in $(docker images -q --filter dangling=true --filter label=mptlab.stage); do
  grep -qx "$id" <<<"$used" && continue
  created=$(date -d "$(docker image inspect -f '{{.Created}}' "$id" 2>/dev/null)" +%s 2>/dev/null || echo "$start")
  if [ "$created" -lt "$start" ]; then docker rmi "$id" >/dev/null 2>&1 || true; fi
done
size=$(docker image inspect -f '{{.Size}}' "$tag")
log "image $tag: $((size / 1000000)) MB, built in $(( $(date +%s) - start )) s"
