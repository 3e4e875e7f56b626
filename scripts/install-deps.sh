#!/usr/bin/env bash
# Install the Debian packages mptlab needs, only those that are missing.
# Usage: scripts/install-deps.sh [group...]   groups: kernel runtime docker slurm
# (default: kernel runtime; `make test` and `make docker` add docker, `make
# test` slurm).
set -euo pipefail

kernel_pkgs="linux-source-6.12 build-essential bc flex bison libelf-dev libssl-dev xz-utils kmod"
runtime_pkgs="python3 python3-venv iproute2 iputils-ping procps psmisc ethtool iperf3 mptcpize
  tcpdump bridge-utils mininet d-itg nghttp2-client nghttp2-server ffmpeg chromium tshark
  openvswitch-switch"
# openvswitch-switch: `switch: ovs` topologies, whose guests run its daemons
# from the host's root; mptlab does not use the host's own OVS service.
# The container image (make docker): Debian's engine, debootstrap for the base
# image (no registry is needed) and Compose.  Debian 12 has Compose v1 only
# (docker-compose 1.29, which knows profiles); the v2 plugin is not packaged.
docker_pkgs="docker.io debootstrap docker-compose binutils python3"
# A single-node SLURM for tests/test_slurm.py (mptlab run --cluster slurm): the
# test runs its daemons from a configuration of its own, in a temp dir and on
# ports of its own; nothing here configures or starts a site's SLURM.
slurm_pkgs="slurmd slurmctld slurm-client munge"

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(kernel runtime)

want=""
for g in "${groups[@]}"; do
  case "$g" in
    kernel) want="$want $kernel_pkgs" ;;
    runtime) want="$want $runtime_pkgs" ;;
    docker) want="$want $docker_pkgs" ;;
    slurm) want="$want $slurm_pkgs" ;;
    *) echo "install-deps: unknown group '$g' (allowed: kernel, runtime, docker, slurm)" >&2; exit 2 ;;
  esac
done

missing=""
for p in $want; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing Debian packages:$missing"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists once if they are missing or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n1)" ]; then
  $sudo apt-get update -q
fi
# shellcheck disable=SC2086
$sudo apt-get install -y -q --no-install-recommends $missing
