#!/usr/bin/env bash
# mvapich2-edits.sh SRCDIR: the source edits MVAPICH2 1.7 needs to build and
# to run under the Soft-RoCE guest. Flags could not do these; each edit says
# why. Run once on a freshly unpacked tree (build-mvapich2.sh does).
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
