#!/bin/busybox sh
# /init of the rxe-vm initramfs (busybox, runs as PID 1 in the guest).
# Loads the virtio/9p modules, mounts the host root (9p tag "hostroot") on
# /newroot and runs the per-run stage2 script (on the host share) in a chroot.
# The per-run directory comes from the kernel command line: rxevm.dir=PATH.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

t() { echo "rxe-vm-init: $(cut -d' ' -f1 /proc/uptime) $*" >/dev/console; }

die() {
	echo "rxe-vm-init: $*" >/dev/console
	# Record the failure where the host can read it, if the share is mounted.
	if [ -n "$RUNDIR" ] && [ -d "/newroot$RUNDIR" ]; then
		echo "$*" >"/newroot$RUNDIR/infra-error"
	fi
	sync
	reboot -f   # qemu runs with -no-reboot: this ends qemu
}

RUNDIR=
CACHE=mmap
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	rxevm.dir=*) RUNDIR="${arg#rxevm.dir=}" ;;
	rxevm.cache=*) CACHE="${arg#rxevm.cache=}" ;;
	esac
done

t "insmod"
while read -r m; do
	[ -n "$m" ] || continue
	insmod "/modules/$m" || die "insmod $m failed"
done </modules/order

t "mount 9p"
mkdir -p /newroot
i=0
until mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=$CACHE hostroot /newroot; do
	i=$((i + 1))
	[ $i -lt 50 ] || die "cannot mount 9p share hostroot"
	sleep 0.1
done
[ -n "$RUNDIR" ] || die "no rxevm.dir= on the kernel command line"
[ -f "/newroot$RUNDIR/stage2.sh" ] || die "missing $RUNDIR/stage2.sh on the share"

mount --move /proc /newroot/proc || mount -t proc proc /newroot/proc
mount --move /sys /newroot/sys || mount -t sysfs sysfs /newroot/sys
mount --move /dev /newroot/dev || mount -t devtmpfs devtmpfs /newroot/dev

t "stage2"
chroot /newroot /bin/bash "$RUNDIR/stage2.sh" "$RUNDIR" </dev/null
rc=$?
t "stage2 done"
[ -f "/newroot$RUNDIR/status" ] || [ -f "/newroot$RUNDIR/infra-error" ] ||
	echo "stage2 exited $rc without writing a status" >"/newroot$RUNDIR/infra-error"
sync
reboot -f
