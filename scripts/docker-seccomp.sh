#!/usr/bin/env bash
# The seccomp profile mptlab's containers run with: Docker's default profile
# plus three system calls that guest confinement needs, and one more
# personality(2) value that virtual-time guests need.
#
#   scripts/docker-seccomp.sh OUT.json
#
# Why: each guest is confined in user and mount namespaces of its own
# (docs/deployment.md, "Confined guests").  The kernel lets any process make
# them, but Docker's default profile allows unshare(2), mount(2) and
# mount_setattr(2) only to containers holding CAP_SYS_ADMIN, which is close to
# --privileged.  Allowing the three calls and no capability is narrower: in
# the container's own namespaces mount still fails (no CAP_SYS_ADMIN there);
# only in a user namespace it made may a process mount, as an unprivileged
# user on the host may.  Measured: with this profile a confined run works in
# a container; with the default one mptlab refuses ("cannot confine the
# guest: unshare(user+mount namespace): Operation not permitted").
#
# Virtual-time guests (the default clock) start under `setarch -R`:
# personality(ADDR_NO_RANDOMIZE), because UML sizes the guest's memory from
# where the host put its heap and a run must repeat exactly
# (mptlab/campaign/boot.py, pin_prefix).  Docker's default profile allows
# personality() only for a few other values; measured: every run of a
# campaign in a container crashed at once ("setarch: failed to set
# personality to (null): Operation not permitted").
#
# The default profile is the installed engine's own: taken from Debian's
# golang-github-docker-docker-dev of the same source version as docker.io
# (the engine has it compiled in and cannot print it), downloaded once with
# apt-get download and kept in $MPTLAB_CACHE/docker/.
set -euo pipefail

out=${1:?usage: scripts/docker-seccomp.sh OUT.json}
cache=${MPTLAB_CACHE:-$HOME/.cache/mptlab}/docker
log() { echo "docker-seccomp: $*" >&2; }

ver=$(dpkg-query -W -f '${Version}' docker.io 2>/dev/null || true)
if [ -z "$ver" ]; then
  log "Debian's docker.io is not installed: no default profile to extend (scripts/install-deps.sh docker)"
  exit 1
fi
src=${ver%+b[0-9]*}  # a binNMU (+bN) rebuilds docker.io only; the -dev package keeps the source version
default=$cache/seccomp-default-$src.json
member=./usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json
if [ ! -f "$default" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download -q "golang-github-docker-docker-dev=$src" >/dev/null 2>&1); then
    apt-get update -q >/dev/null 2>&1 || true
    (cd "$tmp" && apt-get download -q "golang-github-docker-docker-dev=$src" >/dev/null) || {
      log "cannot download golang-github-docker-docker-dev=$src (Docker's default seccomp profile)"
      exit 1
    }
  fi
  dpkg-deb --fsys-tarfile "$tmp"/golang-github-docker-docker-dev_*.deb | tar -x -C "$tmp" "$member"
  cp "$tmp/$member" "$default.tmp"
  mv "$default.tmp" "$default"
fi
mkdir -p "$(dirname "$out")"
python3 - "$default" "$out" <<'PY'
import json
import sys

profile = json.load(open(sys.argv[1]))
profile["syscalls"].append(
    {
        "names": ["unshare", "mount", "mount_setattr"],
        "action": "SCMP_ACT_ALLOW",
        "comment": "mptlab: guests confined in user and mount namespaces (scripts/docker-seccomp.sh)",
    }
)
ADDR_NO_RANDOMIZE = 0x0040000
profile["syscalls"].append(
    {
        "names": ["personality"],
        "action": "SCMP_ACT_ALLOW",
        "args": [{"index": 0, "value": ADDR_NO_RANDOMIZE, "op": "SCMP_CMP_EQ"}],
        "comment": "mptlab: setarch -R for virtual-time guests (scripts/docker-seccomp.sh)",
    }
)
json.dump(profile, open(sys.argv[2], "w"), indent=1)
PY
