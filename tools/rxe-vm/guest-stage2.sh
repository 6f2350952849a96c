#!/bin/bash
# Stage 2 of the rxe-vm guest: runs inside the chroot of the host root (9p),
# as root, with the guest kernel.  Brings up Soft-RoCE (rxe0 on dum0,
# 10.0.0.1/24), then runs the caller's script with the caller's environment
# and working directory.  Copied into the per-run directory by run-in-guest.sh.
set -u
RUNDIR=$1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd /

fail() {
	echo "$*" >"$RUNDIR/infra-error"
	echo "rxe-vm: $*" >/dev/console
	exit 1
}
log() { echo "rxe-vm-stage2: $*" >>"$RUNDIR/setup.log"; }

log "$(cut -d" " -f1 /proc/uptime) stage2 start"
# init (busybox) normally loaded the modules and brought up dum0 already;
# this is the fallback (e.g. an old initramfs), through the host's modprobe.
{
	if [ ! -d /sys/module/rdma_rxe ] || [ ! -d /sys/module/rdma_ucm ]; then
		# rxe needs a crc32 shash; the generic one is a module and is not
		# auto-loaded without udev ("failed to init crc32" otherwise).
		for m in crc32_generic rdma_rxe ib_uverbs rdma_ucm dummy; do
			modprobe "$m" || fail "modprobe $m failed"
		done
	fi
	if [ ! -e /sys/class/net/dum0 ]; then
		ip link set lo up || fail "ip link set lo up"
		ip link add dum0 type dummy || fail "ip link add dum0"
		ip addr add 10.0.0.1/24 dev dum0 || fail "ip addr add dum0"
		ip link set dum0 up || fail "ip link set dum0 up"
	fi
	# An active rdma_cm id (and a TCP socket) takes its local port from the
	# ephemeral range, 32768-60999 by default; the tests listen on fixed
	# ports inside it (dapltest 45278 and up, the conformance suite
	# 49000-52999), so a connection's port could be one a test was about to
	# listen on: dat_psp_create failed with DAT_CONN_QUAL_IN_USE now and
	# then (dapltest -T L in CI, 11-26). Above every fixed port of ours
	# (MPI's are 1024 + pid, dtest's side channel TCP 15828).
	echo "53000 60999" >/proc/sys/net/ipv4/ip_local_port_range || fail "ip_local_port_range"
	log "$(cut -d" " -f1 /proc/uptime) rdma link add"
	rdma link add rxe0 type rxe netdev dum0 || fail "rdma link add rxe0 type rxe netdev dum0 failed"
} >>"$RUNDIR/setup.log" 2>&1

ok=
for _ in $(seq 100); do
	st=
	read -r st </sys/class/infiniband/rxe0/ports/1/state 2>/dev/null
	if [ "$st" = "4: ACTIVE" ]; then
		ok=1
		break
	fi
	sleep 0.1
done
[ -n "$ok" ] || fail "rxe0 port 1 did not become ACTIVE: $(rdma link show 2>&1)"
[ -e /dev/infiniband/uverbs0 ] || fail "/dev/infiniband/uverbs0 missing"
log "$(cut -d" " -f1 /proc/uptime) rxe0 ACTIVE"

# Run the caller's script: control sets RXE_SCRIPT, RXE_ARGS, RXE_CWD; env
# restores the caller's exported environment.
(
	# shellcheck disable=SC1091
	. "$RUNDIR/env"
	# shellcheck disable=SC1091
	. "$RUNDIR/control"
	cd "$RXE_CWD" || { echo "rxe-vm: cannot cd to $RXE_CWD in guest" >&2; exit 125; }
	if [ -x "$RXE_SCRIPT" ]; then
		exec "$RXE_SCRIPT" "${RXE_ARGS[@]}"
	else
		exec /bin/sh "$RXE_SCRIPT" "${RXE_ARGS[@]}"
	fi
) >"$RUNDIR/stdout" 2>"$RUNDIR/stderr" </dev/null
rc=$?
log "$(cut -d" " -f1 /proc/uptime) script exited $rc"
# The host reads it only after qemu has exited (init syncs before reboot).
echo $rc >"$RUNDIR/status"
exit 0
