#!/bin/sh
# PID 1 of an mptlab UML guest.
#
# The root file system is the host's / (hostfs, read-only).  The kernel
# command line passes, as environment variables:
#   MPTLAB_RUN_DIR   where the guest sees the run directory (read-write):
#                    a fixed path, whatever the host's (a path-dependent
#                    amount of guest work moved virtual-time runs)
#   MPTLAB_HOST_RUN_DIR  the run directory's host path (default: MPTLAB_RUN_DIR)
#   MPTLAB_ENTRY     program to run (a path, usually inside the run dir)
#   MPTLAB_CLOCK     real or virtual (UML time-travel=inf-cpu), for the record
#   MPTLAB_GUEST_TIMEOUT  (virtual clock) seconds of guest time the entry may
#                    run; then it gets SIGTERM, 5 s later SIGKILL, and the
#                    file guest-timeout says so.  Under virtual time only the
#                    guest can measure its own time: the host's limit is in
#                    wall time and is just a backstop.
# The entry's stdout/stderr go to $MPTLAB_RUN_DIR/guest.log and its exit
# status to $MPTLAB_RUN_DIR/guest-exit-code.  Then the guest powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8

mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755 tmpfs /run
# The guest needs a writable /tmp (iperf3, Mininet); this hides the host's
# /tmp, so a run dir under /tmp is re-created on the tmpfs and mounted below.
mount -t tmpfs -o mode=1777 tmpfs /tmp
# Host dirs under /tmp that the guest needs (a checkout or venv there,
# mptlab.campaign.boot.hidden_host_dirs): mounted back, read-only.
if [ -n "$MPTLAB_HOST_RO" ]; then
	echo "$MPTLAB_HOST_RO" | tr ':' '\n' | while read -r dir; do
		mkdir -p "$dir" && mount -t hostfs -o ro,"$dir" hostfs "$dir" ||
			echo "mptlab-init: cannot mount host dir $dir" >&2
	done
fi
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null

power_off() {
	sync
	echo o > /proc/sysrq-trigger
	# sysrq powers off asynchronously; PID 1 must not exit meanwhile.
	sleep 60
}

if [ -z "$MPTLAB_RUN_DIR" ] || [ -z "$MPTLAB_ENTRY" ]; then
	echo "mptlab-init: MPTLAB_RUN_DIR and MPTLAB_ENTRY must be set" >&2
	power_off
fi

# MPTLAB_HOST_RUN_DIR: the run dir's host path, mounted at MPTLAB_RUN_DIR (a
# fixed path: mptlab.campaign.boot.GUEST_RUN_DIR); without it, the same path.
mkdir -p "$MPTLAB_RUN_DIR" 2>/dev/null
if ! mount -t hostfs -o "${MPTLAB_HOST_RUN_DIR:-$MPTLAB_RUN_DIR}" hostfs "$MPTLAB_RUN_DIR"; then
	echo "mptlab-init: cannot mount run dir ${MPTLAB_HOST_RUN_DIR:-$MPTLAB_RUN_DIR}" >&2
	power_off
fi

hostname mptlab-guest
ip link set lo up

cd "$MPTLAB_RUN_DIR" || power_off
if [ -n "$MPTLAB_GUEST_TIMEOUT" ]; then
	start=$(cut -d' ' -f1 /proc/uptime)
	timeout -k 5 "$MPTLAB_GUEST_TIMEOUT" "$MPTLAB_ENTRY" > "$MPTLAB_RUN_DIR/guest.log" 2>&1
	code=$?
	end=$(cut -d' ' -f1 /proc/uptime)
	# 124: timeout sent SIGTERM; 137: SIGKILL (also an OOM kill: hence the time
	# check, with 50 ms for /proc/uptime's 10 ms truncation).  awk's output to
	# /dev/null: PID 1 has no valid stdout/stderr when the console's input is
	# null, and mawk then exits 2 ("close failed on file /dev/stdout").
	if [ "$code" = 124 ] || [ "$code" = 137 ]; then
		if awk -v s="$start" -v e="$end" -v t="$MPTLAB_GUEST_TIMEOUT" 'BEGIN { exit !(e - s >= t - 0.05) }' > /dev/null 2>&1; then
			echo "$MPTLAB_GUEST_TIMEOUT" > "$MPTLAB_RUN_DIR/guest-timeout"
		fi
	fi
else
	"$MPTLAB_ENTRY" > "$MPTLAB_RUN_DIR/guest.log" 2>&1
	code=$?
fi
echo $code > "$MPTLAB_RUN_DIR/guest-exit-code.tmp"
mv "$MPTLAB_RUN_DIR/guest-exit-code.tmp" "$MPTLAB_RUN_DIR/guest-exit-code"
power_off
