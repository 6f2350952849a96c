#!/usr/bin/env bash
# mvapich2-edits.sh SRCDIR: the source edits MVAPICH2 1.7 needs to build, to
# run under the Soft-RoCE guest, and to not hang on two races of its own.
# Flags could not do these; each edit says why. Run once on a freshly
# unpacked tree (build-mvapich2.sh does).
set -euo pipefail
src=$1
cd "$src"

# glibc 2.32 removed sys_siglist; strsignal() gives the same text.
sed -i 's/sys_siglist\[\([a-z]*\)\]/strsignal(\1)/' \
    src/pm/mpirun/mpispawn.c src/mpid/ch3/channels/common/src/util/error_handling.c
grep -q 'include <string.h>' src/pm/mpirun/mpispawn.c ||
    sed -i '0,/#include/s//#include <string.h>\n#include/' src/pm/mpirun/mpispawn.c

# The OSU benchmarks of 2011 fix their iteration counts and largest message
# (4 MiB) in the source, with no options. Under TCG one osu_bw run at those
# counts takes longer than CI has; the counts are divided by OSU_DIV (at
# least 2 are kept) and the largest message capped at OSU_MAX_LOG2.
div=${OSU_DIV:-20}
maxlog=${OSU_MAX_LOG2:-18}
perl -0pi -e '
    my ($div, $maxlog) = ('"$div"', '"$maxlog"');
    sub scaled { my $n = int($_[0] / $div); $n < 2 ? 2 : $n }
    # globals such as "int loop = 10000;", "int skip_large = 10;"
    s/^(\s*(?:static\s+)?int\s+(?:loop|skip)\w*\s*=\s*)(\d+)/$1 . scaled($2)/gme;
    # macros such as "#define ITERATIONS 1000", "#define ITERS_SMALL (100)"
    s/^(#define\s+(?:SKIP|ITERATIONS|ITERS)\w*\s+\(?\s*)(\d+)/$1 . scaled($2)/gme;
    # the largest message, "(1<<22)": only ever lowered
    s/^(#define\s+MAX_(?:MSG_)?SIZE\s+\(\s*1\s*<<\s*)(\d+)/$1 . ($2 > $maxlog ? $maxlog : $2)/gme;
' osu_benchmarks/osu_*.c

# Two races of the uDAPL channel's on-demand connections
# (MV2_ON_DEMAND_THRESHOLD), found with gdb on runs hung over the software
# provider and, once each of these edits was in, never seen again (README,
# "MPI over our stack"). Neither depends on the DAT provider; both strike
# when the connection thread and the main thread overlap, which four ranks
# on two CPUs make common.
udapl=src/mpid/ch3/channels/mrail/src/udapl

# 1. The connection thread runs MRAILI_Init_vc for a connection it accepted:
# it takes receive buffers from the vbuf free list and posts them, then sets
# the connection's credit counters, while the main thread takes and returns
# vbufs on the same unlocked list and polls the CQ, where the new
# connection's first message may already be. A lost or doubled vbuf, or a
# counter overwritten after the main thread counted that message, and ranks
# wait for each other forever. One recursive lock now covers the free list,
# the CQ poll and MRAILI_Init_vc.
perl -0pi -e '
s{(#include <math.h>\n)}{$1#include <pthread.h>\n/* dat-edit: one lock for the vbuf list, the CQ poll and MRAILI_Init_vc */\nstatic pthread_once_t od_once = PTHREAD_ONCE_INIT;\nstatic pthread_mutex_t od_mutex;\nstatic void od_init(void)\n{\n    pthread_mutexattr_t a;\n    pthread_mutexattr_init(&a);\n    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);\n    pthread_mutex_init(&od_mutex, &a);\n}\nvoid mv2_od_lock(void) { pthread_once(&od_once, od_init); pthread_mutex_lock(&od_mutex); }\nvoid mv2_od_unlock(void) { pthread_mutex_unlock(&od_mutex); }\n} or die "vbuf.c: includes\n";
s{(get_vbuf \(\)\n\{\n    vbuf \*v;\n)}{$1    mv2_od_lock();\n} or die "vbuf.c: get_vbuf\n";
s{(    v->sreq = NULL;\n\n)(    return \(v\);)}{$1    mv2_od_unlock();\n$2} or die "vbuf.c: get_vbuf return\n";
s{(MRAILI_Release_vbuf \(vbuf \* v\)\n\{\n)}{$1    mv2_od_lock();\n} or die "vbuf.c: release\n";
s{(    num_vbuf_freed\+\+;\n)(\})}{$1    mv2_od_unlock();\n$2} or die "vbuf.c: release end\n";
' "$udapl/vbuf.c"
perl -0pi -e '
s{(int MPIDI_CH3I_MRAILI_Cq_poll\()}{void mv2_od_lock(void);\nvoid mv2_od_unlock(void);\n$1} or die "Cq_poll\n";
s{(    static int last_poll = 0;\n    int type = T_CHANNEL_NO_ARRIVE;\n\n)(    \*vbuf_handle = NULL;\n)}{$1    mv2_od_lock();\n$2} or die "Cq_poll: start\n";
s{(  fn_exit:\n\n)(    return type;)}{$1    mv2_od_unlock();\n$2} or die "Cq_poll: exit\n";
' "$udapl/udapl_channel_manager.c"
perl -0pi -e '
s{(\nvoid\nMRAILI_Init_vc \(MPIDI_VC_t \* vc, int pg_rank\)\n\{\n(?:    [^\n]*;\n){3})}{\nvoid mv2_od_lock(void);\nvoid mv2_od_unlock(void);\n$1    mv2_od_lock();\n} or die "Init_vc\n";
s{(         vc->mrail.srp.local_credit\[0\], vc->mrail.srp.preposts\[0\]\);\n)(\})}{$1    mv2_od_unlock();\n$2} or die "Init_vc: end\n";
' "$udapl/rdma_udapl_priv.c"

# 2. While the connection thread waits for the ESTABLISHED event of a
# connection it accepted, it dequeues from the connection EVD it shares with
# the main thread and drops every other event. One of them can be
# PEER_REJECTED for the main thread's own connect (two ranks connecting to
# each other at once: the higher rank rejects). The main thread then never
# resets that EP, the connection thread waits for the EP to become
# UNCONNECTED before it accepts the peer's request, and the peer waits for
# that accept. The connection thread now resets the EP itself, as the main
# thread would have; the main thread waits for the connection, not the
# event, so it goes on once the accept is done.
perl -0pi -e '
my $n = s{^( +)if \(event\.event_number != DAT_CONNECTION_EVENT_ESTABLISHED\)\n +continue;\n(\n +size = event\.event_data\.connect_event_data\.private_data_size;)}{$1if (event.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {\n$1    /* dat-edit: a rejection of our own connect still resets its EP */\n$1    if (event.event_number == DAT_CONNECTION_EVENT_PEER_REJECTED)\n$1        dat_ep_reset(event.event_data.connect_event_data.ep_handle);\n$1    continue;\n$1}\n$2}gm;
$n == 2 or die "od_conn_server: $n of 2 accept loops\n";
' "$udapl/rdma_udapl_init.c"
