#!/usr/bin/env bash
# Make sure a Docker engine answers: start Debian's dockerd when it is
# installed but not running (machines without systemd, CI).
#
#   scripts/docker-engine.sh     exit 0: the engine answers (prints the
#                                        dockerd PID if this call started it)
#                                exit 2: docker.io is not installed
#                                exit 1: dockerd could not be started (its log tail on stderr)
set -uo pipefail

logf=${MPTLAB_DOCKERD_LOG:-/var/log/mptlab-dockerd.log}
log() { echo "docker-engine: $*" >&2; }

docker info >/dev/null 2>&1 && exit 0
if ! command -v dockerd >/dev/null; then
  log "docker.io is not installed (scripts/install-deps.sh docker)"
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  log "the Docker engine is not running and only root can start it (sudo dockerd, or systemctl start docker)"
  exit 1
fi
# A dockerd of ours may still be starting, or the pidfile be stale after a kill.
if ! pgrep -x dockerd >/dev/null; then
  rm -f /var/run/docker.pid
  log "starting dockerd (log: $logf)"
  setsid dockerd >"$logf" 2>&1 < /dev/null &
  started=$!
fi
# Measured: ~1 s from start to the first answer here; allow 60 for a loaded machine.
for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then
    [ -n "${started:-}" ] && echo "$started"
    exit 0
  fi
  if ! pgrep -x dockerd >/dev/null; then
    break
  fi
  sleep 1
done
log "dockerd failed to start: $(tail -n 5 "$logf" 2>/dev/null | tr '\n' ' ')"
exit 1
