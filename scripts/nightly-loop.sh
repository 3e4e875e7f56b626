#!/bin/sh
# The compose profile "nightly" (docker-compose.yml): run the nightly set every
# night at NIGHTLY_AT (HH:MM, the container's time zone, UTC by default), in
# the foreground, for as long as the container lives.
#
#   NIGHTLY       the experiments (default blest-3g-wlan)
#   NIGHTLY_ARGS  mptlab nightly's options (default --reps 5 --quick --jobs 2)
#   NIGHTLY_HOOK  shell command run when a night regressed (findings on stdin)
#   NIGHTLY_ONCE  1: run one night now and exit with its status (a first check)
#
# Results, history and trend pages go to /mptlab/results/nightly (the
# results volume).  Stopping the container stops the night: mptlab stops its
# guests on SIGTERM, and the next start begins a new night.
set -u
mptlab=${MPTLAB_BIN:-/mptlab/.venv/bin/mptlab}  # MPTLAB_BIN: for tests
at=${NIGHTLY_AT:-02:00}
case "$at" in
  [0-2][0-9]:[0-5][0-9]) ;;
  *) echo "nightly-loop: NIGHTLY_AT=$at is not HH:MM" >&2; exit 2 ;;
esac

night() {
  # shellcheck disable=SC2086  # NIGHTLY and NIGHTLY_ARGS are word lists
  if [ -n "${NIGHTLY_HOOK:-}" ]; then
    "$mptlab" nightly ${NIGHTLY:-blest-3g-wlan} ${NIGHTLY_ARGS:---reps 5 --quick --jobs 2} \
      --publish --on-regression "$NIGHTLY_HOOK"
  else
    "$mptlab" nightly ${NIGHTLY:-blest-3g-wlan} ${NIGHTLY_ARGS:---reps 5 --quick --jobs 2} \
      --publish
  fi
}

if [ "${NIGHTLY_ONCE:-0}" = 1 ]; then
  night
  exit $?
fi
trap 'exit 143' TERM INT
while :; do
  now=$(date +%s)
  next=$(date -d "today $at" +%s) || { echo "nightly-loop: NIGHTLY_AT=$at is no time" >&2; exit 2; }
  [ "$next" -gt "$now" ] || next=$(date -d "tomorrow $at" +%s)
  echo "nightly-loop: next night at $(date -d "@$next" '+%Y-%m-%d %H:%M %Z')"
  sleep $((next - now)) &
  wait $!
  night
  echo "nightly-loop: night ended with status $?"
done
