# mptlab in a container: the same two commands as on a Debian machine.
#
#   docker build -t mptlab .
#   docker run --rm --shm-size=4g -v mptlab-cache:/root/.cache/mptlab \
#       -v "$PWD/results:/mptlab/results" mptlab run blest-3g-wlan --reps 2 --quick
#
# Guests are User-Mode Linux processes: no privileges, KVM or host modules
# are needed, but UML keeps guest memory in /dev/shm (256 MiB per guest),
# hence --shm-size.  Not tested on the project's build machines, which
# have no Docker engine (see docs/deployment.md).
FROM debian:bookworm

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends make git ca-certificates sudo python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /mptlab
COPY . .
# Debian packages, the venv and the kernel: what `make experiment` would do on first use
RUN apt-get update && scripts/install-deps.sh && make venv kernel && rm -rf /var/lib/apt/lists/*

ENTRYPOINT [".venv/bin/mptlab"]
CMD ["list"]
