# mptlab in a container.  Build with `make docker` (scripts/docker-build.sh),
# not with a bare `docker build`: the script makes the Debian 12 base image
# with debootstrap (no registry needed), builds or reuses the kernel in the
# host's cache and stages it, with the host's local CA certificates, in
# build/docker/.  Run (docs/deployment.md):
#
#   docker run --rm --tmpfs /dev/shm:rw,nosuid,nodev,exec,size=4g \
#       --security-opt seccomp=build/docker/seccomp.json \
#       -v "$PWD/results:/mptlab/results" mptlab run blest-3g-wlan --reps 1 --quick
#
# Guests are User-Mode Linux processes: no --privileged, capability, KVM or
# host module is needed; Docker's default seccomp profile allows the ptrace
# calls UML makes, and seccomp.json adds the three calls that confine guests
# in namespaces of their own (scripts/docker-seccomp.sh).  UML keeps guest memory (mem=256M each) in a file on
# /dev/shm that it maps executable, and Docker mounts its own /dev/shm
# noexec ("Checking PROT_EXEC mmap in /dev/shm...Operation not permitted"),
# so --shm-size is not enough: /dev/shm must be an exec tmpfs.
ARG BASE=mptlab-base

# The system: the same Debian packages as on a host (scripts/install-deps.sh).
FROM ${BASE} AS system
# every stage inherits it: docker-build.sh removes the stale ones by it
LABEL mptlab.stage=1
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
WORKDIR /mptlab
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN apt-get update -q \
 && apt-get upgrade -y -q \
 && apt-get install -y -q --no-install-recommends ca-certificates \
 && scripts/install-deps.sh runtime \
 && rm -rf /var/lib/apt/lists/*

# The Python dependencies, in a stage of their own: pip needs PyPI (an index
# given with --build-arg PIP_INDEX) and, where the network intercepts TLS,
# the host's local CAs; neither stays in the final image.
FROM system AS venv
COPY build/docker/ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ARG PIP_INDEX=
ARG PIP_EXTRA_INDEX=
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# pyproject.toml's dependencies only (staged by docker-build.sh): other edits
# of pyproject.toml keep this layer
COPY build/docker/requirements.txt /tmp/requirements.txt
RUN python3 -m venv /mptlab/.venv \
 && /mptlab/.venv/bin/pip install -q ${PIP_INDEX:+--index-url "$PIP_INDEX"} \
      ${PIP_EXTRA_INDEX:+--extra-index-url "$PIP_EXTRA_INDEX"} \
      --upgrade pip "setuptools>=68" wheel -r /tmp/requirements.txt

# The checkout without build/ (the staged kernel and CAs, copied on their own
# below): a RUN rm in the final stage would leave them in the COPY's layer.
FROM system AS src
COPY . /src/
RUN rm -rf /src/build

FROM system
COPY --from=venv /mptlab/.venv /mptlab/.venv
# The kernel: the host's cached build for this checkout's key (not rebuilt),
# the executable without its debug info (116 MB -> 15 MB), and its modules.
ARG KERNEL_KEY
COPY build/docker/kernel/ /opt/mptlab/kernel/
# The C helpers guests run, built by docker-build.sh (no compiler in here),
# in the cache mptlab looks them up in (keyed by their sources' hashes)
COPY build/docker/cache/ /opt/mptlab/cache/
ENV MPTLAB_KERNEL_DIR=/opt/mptlab/kernel/${KERNEL_KEY} MPTLAB_CACHE=/opt/mptlab/cache \
    PATH=/mptlab/.venv/bin:$PATH
COPY --from=src /src/ /mptlab/
# mptlab itself, offline (its dependencies are in the venv already), editable
# like `make venv` so that the checkout's data files are found; and Debian's
# mininet for Mininet topologies, as the Makefile links it.
RUN .venv/bin/pip install -q --no-deps --no-build-isolation --no-index -e . --config-settings editable_mode=compat \
 && site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
 && ln -s /usr/lib/python3/dist-packages/mininet "$site/mininet" \
 && .venv/bin/python -m compileall -q mptlab \
 && test -x "$MPTLAB_KERNEL_DIR/linux"
ARG GIT_COMMIT=unknown
# provenance inside the image, which has no .git (mptlab/campaign/provenance.py)
ENV MPTLAB_GIT_COMMIT=${GIT_COMMIT}
LABEL org.opencontainers.image.title=mptlab org.opencontainers.image.revision=${GIT_COMMIT}
ENTRYPOINT ["/mptlab/.venv/bin/mptlab"]
CMD ["list"]
