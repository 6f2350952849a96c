#!/bin/busybox sh
# /init of the rxe-vm initramfs (busybox, PID 1 in the guest).
# 1. loads the kernel modules listed in /modules/order (virtio/9p for the host
#    share, plus the Soft-RoCE stack: cheaper here than modprobe over 9p);
# 2. brings up lo and dummy netdev dum0 (10.0.0.1/24);
# 3. mounts the host root (9p tag "hostroot") on /newroot and runs the
#    per-run stage2 script (on the share) in a chroot; stage2 adds rxe0.
# The per-run directory comes from the kernel command line: rxevm.dir=PATH.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

t() { echo "rxe-vm-init: $(cut -d' ' -f1 /proc/uptime 2>/dev/null || cut -d' ' -f1 /newroot/proc/uptime) $*" >/dev/console; }

RUNDIR=
CACHE=mmap
HOST=rxe-vm
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	rxevm.dir=*) RUNDIR="${arg#rxevm.dir=}" ;;
	rxevm.cache=*) CACHE="${arg#rxevm.cache=}" ;;
	rxevm.host=*) HOST="${arg#rxevm.host=}" ;;
	esac
done

ERR=
die() {
	echo "rxe-vm-init: $*" >/dev/console
	# Record the failure where the host can read it, if the share is mounted.
	if [ -n "$RUNDIR" ] && [ -d "/newroot$RUNDIR" ]; then
		echo "$*" >"/newroot$RUNDIR/infra-error"
	fi
	sync
	reboot -f   # qemu runs with -no-reboot: this ends qemu
	sleep 60
}

t "insmod"
while read -r m args; do
	[ -n "$m" ] || continue
	# A failure in the RDMA part is reported later (once the share is up).
	insmod "/modules/$m" $args || ERR="${ERR}insmod $m failed; "
done </modules/order

t "net"
{
	ip link set lo up &&
		ip link add dum0 type dummy &&
		ip addr add 10.0.0.1/24 dev dum0 &&
		ip link set dum0 up
} >/dev/console 2>&1 || ERR="${ERR}dum0 setup failed; "

t "mount 9p"
mkdir -p /newroot
i=0
until mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=$CACHE hostroot /newroot; do
	i=$((i + 1))
	[ $i -lt 50 ] || die "cannot mount 9p share hostroot ($ERR)"
	sleep 0.1
done
[ -n "$RUNDIR" ] || die "no rxevm.dir= on the kernel command line"
[ -f "/newroot$RUNDIR/stage2.sh" ] || die "missing $RUNDIR/stage2.sh on the share"
[ -z "$ERR" ] || die "$ERR"

mount --move /proc /newroot/proc || mount -t proc proc /newroot/proc
mount --move /sys /newroot/sys || mount -t sysfs sysfs /newroot/sys
mount --move /dev /newroot/dev || mount -t devtmpfs devtmpfs /newroot/dev
# Fresh tmpfs for runtime dirs.  /tmp stays the host's (shared), so temp
# files the caller made (configs, cwd, DAT_OVERRIDE files) are visible.
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || die "mount /run"
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm || die "mount /dev/shm"
mount -t devpts devpts /newroot/dev/pts
[ -e /newroot/dev/fd ] || ln -s /proc/self/fd /newroot/dev/fd
hostname "${HOST:-rxe-vm}"

t "stage2"
chroot /newroot /bin/bash "$RUNDIR/stage2.sh" "$RUNDIR" </dev/null
rc=$?
t "stage2 done"
[ -f "/newroot$RUNDIR/status" ] || [ -f "/newroot$RUNDIR/infra-error" ] ||
	echo "stage2 exited $rc without writing a status" >"/newroot$RUNDIR/infra-error"
sync
reboot -f
