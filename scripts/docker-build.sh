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
#    build-info.json and modules, pyproject.toml's dependencies, and the
#    host's local CA certificates (pip inside the build verifies TLS the way
#    the host does: the project's machines reach PyPI through a proxy whose
#    CA is there), and seccomp.json, the profile containers run with
#    (scripts/docker-seccomp.sh);
# 4. docker build, with the host's pip index if it has one.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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

previous=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
log "building image $tag from $base, kernel $(basename "$kdir")"
start=$(date +%s)
# The build's containers reach the apt and pip mirrors through the default
# bridge (NAT), as on the project's machines; MPTLAB_DOCKER_BUILD_ARGS adds
# options such as --network host where only the host can reach them.
# shellcheck disable=SC2086
docker build -t "$tag" \
  --build-arg BASE="$base" \
  --build-arg KERNEL_KEY="$(basename "$kdir")" \
  --build-arg PIP_INDEX="$pip_index" \
  --build-arg PIP_EXTRA_INDEX="$pip_extra" \
  --build-arg GIT_COMMIT="$commit" \
  ${MPTLAB_DOCKER_BUILD_ARGS:-} .
# The image this tag named before is dangling now; its own layers (~20 MB for a
# code change, 2.4 GB when the Debian packages changed) would pile up build
# after build.  Layers the new image shares stay.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$tag")" ] \
   && [ "$(docker image inspect -f '{{len .RepoTags}}' "$previous" 2>/dev/null)" = 0 ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
size=$(docker image inspect -f '{{.Size}}' "$tag")
log "image $tag: $((size / 1000000)) MB, built in $(( $(date +%s) - start )) s"
