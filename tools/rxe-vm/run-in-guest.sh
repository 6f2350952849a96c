#!/bin/bash
# run-in-guest.sh SCRIPT [ARGS...]
#
# Runs SCRIPT (a path on the host) inside a throwaway QEMU guest (TCG) whose
# root is the host's / over 9p and which has Soft-RoCE device rxe0 ACTIVE on
# dummy netdev dum0 (10.0.0.1/24).  Same cwd and exported environment as
# the caller; stdout/stderr are streamed; exits with SCRIPT's status.
# 124 = timeout (RXE_VM_TIMEOUT), 125 = guest/boot/rxe setup failure.
# If the host has a real RDMA device (/sys/class/infiniband/*) and
# RXE_VM_FORCE is not 1, SCRIPT is simply run on the host.
# See README.md in this directory for the environment variables.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG=rxe-vm

die() { echo "$PROG: $*" >&2; exit 125; }

[ $# -ge 1 ] || { echo "usage: $0 SCRIPT [ARGS...]" >&2; exit 2; }
SCRIPT=$1
shift
[ -f "$SCRIPT" ] || die "no such script: $SCRIPT"
SCRIPT=$(realpath "$SCRIPT")

# Real hardware: run directly.
if [ "${RXE_VM_FORCE:-0}" != 1 ] && compgen -G '/sys/class/infiniband/*' >/dev/null; then
	[ "${RXE_VM_QUIET:-0}" = 1 ] || echo "$PROG: host has an RDMA device, running $SCRIPT on the host" >&2
	if [ -x "$SCRIPT" ]; then exec "$SCRIPT" "$@"; else exec /bin/sh "$SCRIPT" "$@"; fi
fi

TIMEOUT=${RXE_VM_TIMEOUT:-900}
MEM=${RXE_VM_MEM:-2G}
SMP=${RXE_VM_SMP:-2}
CACHE9P=${RXE_VM_9P_CACHE:-mmap}
VERBOSE=${RXE_VM_VERBOSE:-0}
QEMU=${RXE_VM_QEMU:-qemu-system-x86_64}

command -v "$QEMU" >/dev/null || die "$QEMU not found (run tools/setup.sh as root)"

# --- pick the guest kernel: newest /boot/vmlinuz-* with rdma_rxe available.
pick_kernel() {
	local v best=
	if [ -n "${RXE_VM_KERNEL:-}" ]; then
		echo "$RXE_VM_KERNEL"
		return
	fi
	for k in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V); do
		v=${k#/boot/vmlinuz-}
		if [ -d "/lib/modules/$v" ] && modprobe -S "$v" --show-depends rdma_rxe >/dev/null 2>&1; then
			best=$v
		fi
	done
	echo "$best"
}
KVER=$(pick_kernel)
[ -n "$KVER" ] || die "no /boot/vmlinuz-* with rdma_rxe modules found (install linux-image-amd64: tools/setup.sh)"
KERNEL=/boot/vmlinuz-$KVER
[ -e "$KERNEL" ] || die "$KERNEL not found (RXE_VM_KERNEL=$KVER?)"
[ -r "$KERNEL" ] || die "$KERNEL not readable (it is root-only on Debian; run as root)"

# --- initramfs (cached, keyed by kernel version and the init script).
CACHE_DIR=${RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rxe-vm}
BUSYBOX=${RXE_VM_BUSYBOX:-$(command -v busybox || echo /bin/busybox)}

build_initramfs() {
	local t m line path args out mods=() seen=" "
	file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' ||
		ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic' ||
		die "$BUSYBOX is not a static busybox (install busybox-static)"
	command -v cpio >/dev/null || die "cpio not found (install cpio)"
	mkdir -p "$CACHE_DIR"
	t=$(mktemp -d "$CACHE_DIR/build.XXXXXX")
	mkdir -p "$t/bin" "$t/modules" "$t/proc" "$t/sys" "$t/dev" "$t/newroot"
	cp "$BUSYBOX" "$t/bin/busybox"
	cp "$HERE/guest-init.sh" "$t/init"
	chmod 755 "$t/init" "$t/bin/busybox"
	: >"$t/modules/order"
	# virtio/9p for the share; crc32_generic is needed by rxe ("failed to
	# init crc32") but is not a hard dependency, so it is listed first.
	for m in virtio_pci 9pnet_virtio 9p crc32_generic rdma_rxe ib_uverbs rdma_ucm dummy; do
		out=$(modprobe -S "$KVER" --show-depends "$m" 2>&1) || die "modprobe -S $KVER --show-depends $m failed: $out"
		while read -r line; do
			case "$line" in
			insmod\ *) ;;
			*) continue ;;   # "builtin X": nothing to load
			esac
			line=${line#insmod }
			path=${line%% *}
			args=
			[ "$path" = "$line" ] || args=${line#* }
			case "$seen" in *" $path "*) continue ;; esac
			seen="$seen$path "
			mods+=("$path|$args")
		done <<<"$out"
	done
	for line in "${mods[@]}"; do
		path=${line%%|*}
		args=${line#*|}
		m=$(basename "$path")
		case "$m" in
		*.ko) cp "$path" "$t/modules/$m" ;;
		*.ko.xz) xz -dc "$path" >"$t/modules/${m%.xz}"; m=${m%.xz} ;;
		*.ko.zst) zstd -qdc "$path" >"$t/modules/${m%.zst}"; m=${m%.zst} ;;
		*.ko.gz) gzip -dc "$path" >"$t/modules/${m%.gz}"; m=${m%.gz} ;;
		*) die "unknown module file type: $path" ;;
		esac
		echo "$m $args" >>"$t/modules/order"
	done
	(cd "$t" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$t.cpio.gz"
	mv -f "$t.cpio.gz" "$INITRD"
	find "$CACHE_DIR" -maxdepth 1 -name "initramfs-$KVER-*.cpio.gz" ! -path "$INITRD" -delete 2>/dev/null || true
	rm -rf "$t"
}
# Key: kernel version + build (size/mtime of the kernel), busybox, the init
# script and this builder, so any change to them makes a new initramfs.
key=$( {
	echo "$KVER"
	stat -Lc '%s-%Y' "$KERNEL"
	sha256sum "$BUSYBOX"
	cat "$HERE/guest-init.sh"
	declare -f build_initramfs
} | sha256sum | cut -c1-16)
INITRD=$CACHE_DIR/initramfs-$KVER-$key.cpio.gz
if [ ! -s "$INITRD" ] || [ "${RXE_VM_REBUILD:-0}" = 1 ]; then
	[ "${RXE_VM_QUIET:-0}" = 1 ] || echo "$PROG: building initramfs $INITRD" >&2
	build_initramfs
fi

# --- uncompressed vmlinux (cached): QEMU boots an ELF kernel with a PVH note
# directly, which skips the in-guest decompression (~4 s under TCG).
extract_vmlinux() {
	local out=$1 tmp off magic tool
	tmp=$(mktemp "$out.XXXXXX")
	for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd' 'gzip:\x1f\x8b\x08'; do
		tool=${magic%%:*}
		command -v "$tool" >/dev/null || continue
		for off in $(LC_ALL=C grep -obUaP "${magic#*:}" "$KERNEL" 2>/dev/null | cut -d: -f1); do
			tail -c "+$((off + 1))" "$KERNEL" | "$tool" -dc >"$tmp" 2>/dev/null
			if [ "$(head -c 4 "$tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] &&
				LC_ALL=C grep -qaF 'Xen' "$tmp"; then
				mv -f "$tmp" "$out"
				return 0
			fi
		done
	done
	rm -f "$tmp"
	return 1
}
BOOT_KERNEL=$KERNEL
if [ "${RXE_VM_PVH:-1}" = 1 ]; then
	kkey=$(stat -Lc '%s-%Y' "$KERNEL")
	VMLINUX=$CACHE_DIR/vmlinux-$KVER-$kkey
	if [ ! -s "$VMLINUX" ] && [ ! -e "$VMLINUX.nopvh" ]; then
		mkdir -p "$CACHE_DIR"
		find "$CACHE_DIR" -maxdepth 1 -name "vmlinux-$KVER-*" -delete 2>/dev/null || true
		extract_vmlinux "$VMLINUX" || : >"$VMLINUX.nopvh"
	fi
	[ ! -s "$VMLINUX" ] || BOOT_KERNEL=$VMLINUX
fi

# --- per-run directory on the host, visible in the guest via 9p.
RUNDIR=$(mktemp -d "${RXE_VM_RUNDIR:-${TMPDIR:-/tmp}}/rxe-vm.XXXXXX")
RUNDIR=$(realpath "$RUNDIR")
case "$RUNDIR" in *[[:space:]]*) rm -rf "$RUNDIR"; die "run directory path has whitespace: $RUNDIR (set RXE_VM_RUNDIR)" ;; esac
chmod 755 "$RUNDIR"
cp "$HERE/guest-stage2.sh" "$RUNDIR/stage2.sh"
{
	printf 'RXE_SCRIPT=%q\n' "$SCRIPT"
	printf 'RXE_CWD=%q\n' "$PWD"
	printf 'RXE_ARGS=('
	for a in "$@"; do printf ' %q' "$a"; done
	printf ' )\n'
} >"$RUNDIR/control"
{
	for n in $(compgen -e); do
		case "$n" in
		PWD | OLDPWD | SHLVL | _ | HOSTNAME | BASH_* | SHELLOPTS | BASHOPTS | RXE_VM_*) continue ;;
		esac
		printf 'export %s=%q\n' "$n" "${!n}"
	done
} >"$RUNDIR/env"
: >"$RUNDIR/stdout"
: >"$RUNDIR/stderr"
: >"$RUNDIR/console.log"

QPID=
TAILS=()
cleanup() {
	local p
	[ -z "$QPID" ] || kill "$QPID" 2>/dev/null || true
	for p in "${TAILS[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ "${RXE_VM_KEEP:-0}" = 1 ]; then
		echo "$PROG: kept run directory $RUNDIR" >&2
	else
		rm -rf "$RUNDIR"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# qemu exits on guest reboot (-no-reboot) and on panic (panic=-1).
timeout -k 10 "$TIMEOUT" "$QEMU" \
	-accel tcg -cpu "${RXE_VM_CPU:-max}" -m "$MEM" -smp "$SMP" \
	-nodefaults -no-user-config -display none -nic none -no-reboot \
	-serial "file:$RUNDIR/console.log" -monitor none \
	-kernel "$BOOT_KERNEL" -initrd "$INITRD" \
	-append "console=ttyS0 loglevel=3 quiet panic=-1 mitigations=off rxevm.dir=$RUNDIR rxevm.cache=$CACHE9P rxevm.host=$(uname -n | tr -cd 'A-Za-z0-9.-') ${RXE_VM_APPEND:-}" \
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap" \
	</dev/null >"$RUNDIR/qemu.log" 2>&1 &
QPID=$!

# Stream the script's output (the guest writes it straight to the host files).
tail -s 0.2 -n +1 -f --pid="$QPID" "$RUNDIR/stdout" &
TAILS+=($!)
tail -s 0.2 -n +1 -f --pid="$QPID" "$RUNDIR/stderr" >&2 &
TAILS+=($!)
if [ "$VERBOSE" = 1 ]; then
	tail -s 0.2 -n +1 -f --pid="$QPID" "$RUNDIR/console.log" >&2 &
	TAILS+=($!)
fi

qrc=0
wait "$QPID" || qrc=$?
QPID=
for p in "${TAILS[@]}"; do wait "$p" 2>/dev/null || true; done
TAILS=()

show_diag() {
	echo "$PROG: --- guest console (last 40 lines) ---" >&2
	tail -n 40 "$RUNDIR/console.log" >&2 || true
	if [ -s "$RUNDIR/setup.log" ]; then
		echo "$PROG: --- rxe setup log ---" >&2
		cat "$RUNDIR/setup.log" >&2
	fi
	if [ -s "$RUNDIR/qemu.log" ]; then
		echo "$PROG: --- qemu ---" >&2
		cat "$RUNDIR/qemu.log" >&2
	fi
}

if [ -s "$RUNDIR/status" ]; then
	rc=$(cat "$RUNDIR/status")
	exit "$rc"
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	echo "$PROG: timeout: guest did not finish within ${TIMEOUT}s (RXE_VM_TIMEOUT)" >&2
	show_diag
	exit 124
fi
if [ -s "$RUNDIR/infra-error" ]; then
	echo "$PROG: guest setup failed: $(cat "$RUNDIR/infra-error")" >&2
else
	echo "$PROG: guest failed to boot or run (qemu exit $qrc, no status written)" >&2
fi
show_diag
exit 125
