/*
 * casefork.h - the fork-per-case runner and the checks that report into it,
 * shared by provider_test, rmr_test and conformance.
 *
 * Every case runs in its own fork()ed child (fresh registry, nothing DAT is
 * called in the parent), so a crash or hang is reported for that case
 * instead of ending the run.  The child's stdout holds its failed checks and
 * its stderr the registry's and provider's log; both are captured and shown,
 * indented, only under a failing case.  The guest scripts parse the output:
 * `ok   <case>` or `FAIL <case>` per case, `# stat ` lines, and exactly one
 * `<label>: N passed, M failed` at the end.
 *
 * Include it first: it defines _GNU_SOURCE.
 */
#ifndef CTEST_CASEFORK_H
#define CTEST_CASEFORK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <dat2/udat.h>

#ifndef DAT_ERROR
#define DAT_ERROR(type, subtype) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (subtype)))
#endif

/* Exported by both registries, declared by neither's public headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

#define BAD_HANDLE(minor) DAT_ERROR(DAT_INVALID_HANDLE, (minor))
#define BAD_ARG(minor)    DAT_ERROR(DAT_INVALID_PARAMETER, (minor))
#define BAD_STATE(minor)  DAT_ERROR(DAT_INVALID_STATE, (minor))
#define NOT_FOUND(minor)  DAT_ERROR(DAT_PROVIDER_NOT_FOUND, (minor))

/* ------------------------------------------------------------------ */
/* The case being run (in the child)                                  */

extern const char *g_case;
extern int g_case_index;	/* position in the program's case table */
extern int g_fails;
/* Set by a case that met a known limitation of the device and nothing
 * else; counts as passed where the program says what it means
 * (casefork.xfail_ok), as a failure elsewhere. */
extern int g_xfail;
/* This case's captured stderr, so a case can check what was logged; ""
 * when stderr is not captured (<ENV>_VERBOSE). */
extern char g_errpath[];

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* To stderr: shown only under a failing case. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* fail() with "<what>: expected <want>, got <got>". */
void fail_rc(DAT_RETURN want, DAT_RETURN got, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "0x80120000 DAT_INVALID_ADDRESS/DAT_INVALID_ADDRESS_UNREACHABLE", from
 * the registry's own dat_strerror (and casefork.describe_more). */
const char *describe(DAT_RETURN r);
const char *event_name(DAT_EVENT_NUMBER n);
const char *dto_status_name(DAT_DTO_COMPLETION_STATUS s);

const char *env_or(const char *var, const char *dflt);
/*
 * The first of `span` connection qualifiers the tests listen on: $var if
 * set, else `preferred` if [preferred, preferred+span) is outside this
 * network namespace's ephemeral ports, else the first such window below or
 * above them.  A qualifier is a TCP port on the sock provider and an
 * rdma_cm port on verbs, and any process's outgoing connection (or its
 * TIME_WAIT) can hold an ephemeral port a test then fails to listen on.
 */
int qual_base(const char *var, int preferred, int span);
double now_s(void);
/* Page-aligned and zeroed; a failure ends the case. */
void *must_alloc(size_t n);

/*
 * CHECK_RC(expr, want, fmt...): expr must return exactly want (major and
 * minor).  A program may define, before including this header, how expr is
 * evaluated (CHECK_RC_EVAL) and what a right answer records
 * (CHECK_RC_PASSED): conformance runs expected failures of the reference in
 * a grandchild and counts the calls it covered.
 */
#ifndef CHECK_RC_EVAL
#define CHECK_RC_EVAL(var, expr, want) ((var) = (expr))
#endif
#ifndef CHECK_RC_PASSED
#define CHECK_RC_PASSED(text, want) ((void)0)
#endif
#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)
#define CHECK_RC(expr, want, ...) do { \
	DAT_RETURN got_, want_ = (want); \
	CHECK_RC_EVAL(got_, expr, want_); \
	if (got_ != want_) \
		fail_rc(want_, got_, __VA_ARGS__); \
	else \
		CHECK_RC_PASSED(#expr, want_); \
} while (0)
#define CHECK_EQ(got, want, what) do { \
	unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want); \
	if (g_ != w_) fail("%s: expected 0x%llx, got 0x%llx", (what), w_, g_); \
} while (0)

/* ------------------------------------------------------------------ */
/* The runner                                                         */

struct tcase {
	const char *name;
	const char *area;	/* conformance: the file it is in; else NULL */
	void (*fn)(void);
	int ref;		/* also run in reference mode (-R) */
};

/* What differs between the programs; the rest of the output is the same. */
struct casefork {
	const char *prog;	/* "provider_test": note()'s prefix, the temporary directory */
	const char *env;	/* "PT": PT_VERBOSE (stderr not captured), PT_KEEP (keep the directory) */
	const char *label;	/* of the summary line; "-reference" is added in reference mode */
	int ref;		/* reference mode: with no case named, only the .ref cases */
	unsigned timeout_s;	/* per case (SIGALRM) */
	int timeout_says_secs;	/* ": timed out after N s" rather than ": timed out" */
	int timed;		/* "ok   NAME (x s)": provider.sh reads the rest of the line as the name */
	/* The case's own process group, killed when it ends, so helpers it
	 * forked die with it; off where the whole run should stay in the
	 * group that `timeout` kills. */
	int own_group;
	/* Text after an ok line of a g_xfail case, and after "# N case(s) "
	 * in the totals; NULL: the program has no such cases. */
	const char *xfail_ok, *xfail_total;
	void (*header)(void);	/* prints the run's first line */
	/* In the child, after a case with no failed check (conformance: its
	 * `# stat` lines, which an ok line is followed by). */
	void (*passed)(void);
	/* Given describe()'s text in text, may append to it or replace it. */
	void (*describe_more)(DAT_RETURN r, char *text, size_t size);
};

/* 1 (after a message on stderr) if argv[first..] names a case not in cases. */
int casefork_unknown(const struct tcase *cases, int n, int argc, char **argv, int first);
/* Runs the cases argv[first..] names (none: all, or the .ref ones in
 * reference mode), each in a child, and prints the summary; returns the
 * exit status. */
int casefork_main(const struct casefork *cf, const struct tcase *cases, int n, int argc, char **argv, int first);

#endif
