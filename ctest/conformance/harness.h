/*
 * harness.h - the conformance suite's shared harness (ctest/conformance/).
 *
 * One binary (build/conformance) holds every case of every area (errors,
 * protection, faults, load, input).  Each case runs in its own fork()ed
 * child (common/casefork.h): a crash or hang is reported for that case.  The
 * child's failed checks (stdout) and the registry/provider log (stderr) are
 * shown, indented, only under a failing case.
 *
 * Figures: a passing case prints `# stat <case> <key> <value...>` lines that
 * guest/conformance.sh adds up:
 *   calls   the dat_* functions the case called and checked (taken from the
 *           text of every CHECK_RC / CALL expression: computed, not declared)
 *   errors  error outcomes checked (non-success return codes, error
 *           completions, error connection events)
 *   faults  fault scenarios survived
 *   eps ops bytes lost dup   load figures (connected EPs, operations,
 *           bytes compared, completions lost / duplicated)
 *   threads kills  threads posting at once (threads.c); peer-kill rounds
 *           survived (kills.c)
 */
#ifndef CONFORMANCE_HARNESS_H
#define CONFORMANCE_HARNESS_H

/* CHECK_RC: see common/casefork.h; an expected failure of the reference
 * runs isolated (EVAL_RC), a right answer counts coverage and errors. */
#define CHECK_RC_EVAL(var, expr, want) EVAL_RC(var, expr, want)
#define CHECK_RC_PASSED(text, want) (cover_text(text), count_error(want))
#include "../common/casefork.h"

#include <dat2/dat_registry.h>

#define NOT_IMPL          DAT_ERROR(DAT_NOT_IMPLEMENTED, 0)
/* Not a DAT code: what an isolated call that crashed is reported as. */
#define CRASHED(sig)      ((DAT_RETURN)(0x7f000000u | (unsigned)(sig)))

#define SEC     1000000u	/* DAT_TIMEOUT is in microseconds */
#define WAIT_US (30 * SEC)	/* event waits: generous under TCG */
#define QUIET_US (1 * SEC)

/* ------------------------------------------------------------------ */
/* Configuration (from the environment, set by guest/conformance.sh)   */

extern const char *g_ia;	/* CONF_IA: the IA every case opens */
extern const char *g_ia2;	/* CONF_IA2: a second entry of the same provider (another IA) */
extern int g_ref;		/* -R: reference registry+provider (informational) */
extern int g_qual_base;		/* CONF_QUAL: first connection qualifier */

/* ------------------------------------------------------------------ */
/* Reporting and figures                                              */

struct stats {
	long errors, faults, eps, ops, bytes, lost, dup, threads, kills;
};
extern struct stats g_stats;

/* Records every dat_* name called in an expression's source text. */
void cover_text(const char *text);
/* Runs nothing; records names (for calls made through pointers or loops). */
void cover(const char *names);
int count_error(DAT_RETURN want);
DAT_RETURN isolated_fail_rc(void);

/* In reference mode an expected failure runs in a grandchild, so a crash of
 * the reference on a bad handle is reported as such. */
#define EVAL_RC(var, expr, want) do { \
	if (g_ref && (want) != DAT_SUCCESS) { \
		int fd_[2]; pid_t p_; \
		fflush(stdout); fflush(stderr); \
		if (pipe(fd_) != 0) { var = isolated_fail_rc(); break; } \
		p_ = fork(); \
		if (p_ == 0) { DAT_RETURN r_ = (expr); if (write(fd_[1], &r_, sizeof(r_)) < 0) _exit(2); _exit(0); } \
		close(fd_[1]); \
		var = isolated_rc(p_, fd_[0]); \
	} else { \
		var = (expr); \
	} \
} while (0)
DAT_RETURN isolated_rc(pid_t pid, int fd);

/* The major code only (for cases where DAT leaves the minor open). */
#define CHECK_TYPE(expr, type, ...) do { \
	DAT_RETURN got_ = (expr); \
	if (DAT_GET_TYPE(got_) != (DAT_RETURN)(type)) { \
		char what_[400]; \
		snprintf(what_, sizeof(what_), __VA_ARGS__); \
		fail("%s: expected major %s, got %s", what_, describe(DAT_ERROR(type, 0)), describe(got_)); \
	} else { \
		cover_text(#expr); \
		g_stats.errors++; \
	} \
} while (0)
/* A call whose success the caller tests; records coverage. */
#define CALL(expr) (cover_text(#expr), (expr))

/* ------------------------------------------------------------------ */
/* Cases                                                              */

#define CASE(area, n, ref) { #n, area, case_##n, ref }

extern const struct tcase errors_cases[], protection_cases[], faults_cases[], load_cases[], input_cases[],
	extensions_cases[], counters_cases[], threads_cases[], kills_cases[], placement_cases[],
	progress_cases[], fastpath_cases[];
extern const int errors_ncases, protection_ncases, faults_ncases, load_ncases, input_ncases, extensions_ncases,
	counters_ncases, threads_ncases, kills_ncases, placement_ncases,
	progress_ncases, fastpath_ncases;

/* ------------------------------------------------------------------ */
/* DAT helpers                                                        */

DAT_IA_HANDLE open_ia(const char *name);	/* NULL after a reported failure */
void close_ia(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags, const char *what);
DAT_PZ_HANDLE make_pz(DAT_IA_HANDLE ia);
DAT_EVD_HANDLE make_evd(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags);
int self_addr(DAT_IA_HANDLE ia, struct sockaddr_in *out);

struct mem {
	unsigned char *buf;
	size_t len;
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lkey;
	DAT_RMR_CONTEXT rkey;
	DAT_VADDR addr;
};
int mem_reg(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, size_t len, DAT_MEM_PRIV_FLAGS priv, struct mem *m);
DAT_LMR_TRIPLET triplet(const struct mem *m, size_t off, size_t len);

/* Waits for one event; returns the dat_evd_wait result. */
DAT_RETURN wait_ev(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_EVENT *ev);
/* Waits for event `want`; 1 if it came (checked, counted as an error
 * outcome when it is one), else 0 with a failure reported. */
int expect_ev(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_EVENT_NUMBER want, DAT_EVENT *ev, const char *what);
/* No event within us. */
void expect_quiet(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, const char *what);
/* The next DTO completion (status returned, -1 after a reported failure). */
int next_dto(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_DTO_COMPLETION_EVENT_DATA *out, const char *what);
/* The next DTO completion, which must have succeeded: 1 if it did, else 0
 * with a failure reported that names `what` and the status. */
int want_dto(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_DTO_COMPLETION_EVENT_DATA *out, const char *what);

/* Two EPs connected to each other: A connects to B's IA's address, B is
 * accepted from the PSP's CR. Both on one IA (pair_setup), or B on a second
 * IA with its own PZ (pair_setup_apart: nothing B's side does moves A's). */
struct end {
	DAT_EP_HANDLE ep;
	DAT_EVD_HANDLE req, recv, conn;
};
struct pair {
	DAT_IA_HANDLE ia, ib;	/* ib: B's IA (ia itself unless apart) */
	DAT_EVD_HANDLE async, cr;
	DAT_PZ_HANDLE pz, pzb;
	DAT_PSP_HANDLE psp;
	DAT_CONN_QUAL qual;
	struct end a, b;
};
int pair_setup(struct pair *p, DAT_COUNT qlen, const DAT_EP_ATTR *attr);
int pair_setup_apart(struct pair *p, DAT_COUNT qlen, const DAT_EP_ATTR *attr);	/* B on g_ia2 */
int pair_connect(struct pair *p);
int pair_open(struct pair *p);	/* setup + connect */
void pair_close(struct pair *p);	/* abrupt IA close (both, when apart) */
DAT_EP_ATTR small_attr(DAT_COUNT dtos, DAT_COUNT iov);

/* rdma resource show counts of this process ("qp", "cq", "mr", "pd",
 * "cm_id"); -1 when the tool gives nothing. */
int rdma_count(const char *kind, pid_t pid);
uint32_t checksum(const unsigned char *p, size_t n);

#endif
