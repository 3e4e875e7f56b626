#!/usr/bin/env bash
# Install mptlab's nightly units (deploy/systemd/) for this checkout and start
# the timer:  make nightly-timer [NIGHTLY="a b"] [NIGHTLY_ARGS="..."] [NIGHTLY_AT="*-*-* 02:00"]
#
#   scripts/install-nightly-timer.sh            render, install into /etc/systemd/system, enable --now
#   scripts/install-nightly-timer.sh --render D render into D only (what the tests check)
#
# The units run `make nightly` in this checkout as the user who owns it, so
# the venv, the kernel cache (~/.cache/mptlab) and results/nightly are that
# user's.  Without systemd as the init system (containers, WSL), it says so
# and shows the cron line that does the same.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
nightly=${NIGHTLY:-blest-3g-wlan}
args=${NIGHTLY_ARGS:---reps 5 --quick --jobs 2 --publish}
when=${NIGHTLY_AT:-*-*-* 02:00:00}
user=${NIGHTLY_USER:-$(stat -c %U "$here")}
dest=/etc/systemd/system
envfile=/etc/default/mptlab-nightly
render_only=
case "${1:-}" in
  --render) dest=${2:?usage: --render DIR}; envfile=$dest/mptlab-nightly.env; render_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--render DIR]" >&2; exit 2 ;;
esac

case "$nightly$args$when${NIGHTLY_HOOK:-}" in *$'\n'*)
  echo "install-nightly-timer: a setting holds a newline" >&2; exit 2 ;;
esac

quote() {  # a value for systemd's EnvironmentFile: double-quoted, with \ " ` $ escaped
  # (the characters systemd, like the shell, unescapes inside double quotes)
  printf '"%s"' "$(printf '%s' "$1" | sed -e 's/[\\"`$]/\\&/g')"
}

render() {  # render SRC DST
  sed -e "s|@CHECKOUT@|$here|g" -e "s|@USER@|$user|g" -e "s|@WHEN@|$when|g" \
      -e "s|@ENVFILE@|$envfile|g" "$1" > "$2"
}

mkdir -p "$dest" "$(dirname "$envfile")"
for u in mptlab-nightly.service mptlab-nightly.timer; do
  render "$here/deploy/systemd/$u" "$dest/$u"
  echo "install-nightly-timer: wrote $dest/$u"
done
{
  echo "# mptlab nightly settings, read by mptlab-nightly.service (make nightly)"
  echo "NIGHTLY=$(quote "$nightly")"
  echo "NIGHTLY_ARGS=$(quote "$args")"
  echo "NIGHTLY_HOOK=$(quote "${NIGHTLY_HOOK:-}")"
} > "$envfile"
echo "install-nightly-timer: wrote $envfile"
[ -n "$render_only" ] && exit 0

if [ "$(ps -p 1 -o comm= 2>/dev/null)" != systemd ]; then
  echo "install-nightly-timer: systemd is not this machine's init system; the units are" >&2
  echo "installed but cannot be started.  A crontab line does the same job:" >&2
  echo "  0 2 * * * cd $here && make nightly NIGHTLY=\"$nightly\" NIGHTLY_ARGS=\"$args\" >> results/nightly.log 2>&1" >&2
  exit 1
fi
systemctl daemon-reload
systemctl enable --now mptlab-nightly.timer
systemctl list-timers mptlab-nightly.timer --no-pager
