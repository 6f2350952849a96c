/*
 * registry_test.c - black-box tests of the DAT registry (libdat2.so.2).
 *
 * Every case runs in its own fork()ed child, so each one starts with a fresh
 * registry (dat.conf is read once per process, on the first DAT call) and
 * sets DAT_OVERRIDE to its own dat.conf before that first call.  The
 * provider is the test fixture libdatmock.so.2 (ctest/mockprov), whose
 * counters are read with dlopen(RTLD_NOLOAD) + dlsym.
 *
 * Calls that might crash a broken registry (bad handles) run in a further
 * grandchild each, so a crash is reported per call instead of ending the case.
 *
 * usage: registry_test [case...]        (no argument: all cases)
 * env:   CTEST_MOCK     path of libdatmock.so.2 (default: next to this binary)
 *        CTEST_KEEP     keep the temporary directory of dat.conf files and logs
 *        CTEST_REEXEC   re-exec each case after setting DAT_OVERRIDE, for a
 *                       registry that reads it at load time (the reference)
 *        CTEST_VERBOSE  let the registry's stderr through (default: captured
 *                       per case and shown only under a failing case)
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#ifndef DAT_ERROR
#define DAT_ERROR(type, subtype) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (subtype)))
#endif

/* Exported by both registries, declared by neither's public headers. */
extern DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE, DAT_IA_HANDLE *);

/* Our registry's private minors under DAT_PROVIDER_NOT_FOUND. */
#define DAT_LIBRARY_LOAD_FAILED  0x7000
#define DAT_PROVIDER_INIT_FAILED 0x7001

/* Extension ops of the mock (see mockprov.c). */
#define MOCK_OP_SUM   1
#define MOCK_OP_WHO   2
#define MOCK_OP_MIXED 3

#define SENTINEL_IA  ((DAT_IA_HANDLE)(uintptr_t)0x5a5a5a5a)
#define SENTINEL_EVD ((DAT_EVD_HANDLE)(uintptr_t)0xa5a5a5a5)

/* ------------------------------------------------------------------ */
/* Names of every code in dat_error.h, stringified from the identifiers */

#define MAJORS(X) \
	X(DAT_SUCCESS) X(DAT_ABORT) X(DAT_CONN_QUAL_IN_USE) X(DAT_INSUFFICIENT_RESOURCES) \
	X(DAT_INTERNAL_ERROR) X(DAT_INVALID_HANDLE) X(DAT_INVALID_PARAMETER) X(DAT_INVALID_STATE) \
	X(DAT_LENGTH_ERROR) X(DAT_MODEL_NOT_SUPPORTED) X(DAT_PROVIDER_NOT_FOUND) \
	X(DAT_PRIVILEGES_VIOLATION) X(DAT_PROTECTION_VIOLATION) X(DAT_QUEUE_EMPTY) X(DAT_QUEUE_FULL) \
	X(DAT_TIMEOUT_EXPIRED) X(DAT_PROVIDER_ALREADY_REGISTERED) X(DAT_PROVIDER_IN_USE) \
	X(DAT_INVALID_ADDRESS) X(DAT_INTERRUPTED_CALL) X(DAT_CONN_QUAL_UNAVAILABLE) \
	X(DAT_RESERVED_LMR) X(DAT_PORT_IN_USE) X(DAT_COMM_NOT_SUPPORTED) X(DAT_EXTENSION_BASE) \
	X(DAT_NOT_IMPLEMENTED)

/* Every subtype but DAT_NO_SUBTYPE, in enum order (checked below). */
#define MINORS(X) \
	X(DAT_SUB_INTERRUPTED) X(DAT_RESOURCE_MEMORY) X(DAT_RESOURCE_DEVICE) X(DAT_RESOURCE_TEP) \
	X(DAT_RESOURCE_TEVD) X(DAT_RESOURCE_PROTECTION_DOMAIN) X(DAT_RESOURCE_MEMORY_REGION) \
	X(DAT_RESOURCE_ERROR_HANDLER) X(DAT_RESOURCE_CREDITS) X(DAT_RESOURCE_SRQ) \
	X(DAT_INVALID_HANDLE_IA) X(DAT_INVALID_HANDLE_EP) X(DAT_INVALID_HANDLE_LMR) \
	X(DAT_INVALID_HANDLE_RMR) X(DAT_INVALID_HANDLE_PZ) X(DAT_INVALID_HANDLE_PSP) \
	X(DAT_INVALID_HANDLE_RSP) X(DAT_INVALID_HANDLE_CR) X(DAT_INVALID_HANDLE_CNO) \
	X(DAT_INVALID_HANDLE_EVD_CR) X(DAT_INVALID_HANDLE_EVD_REQUEST) X(DAT_INVALID_HANDLE_EVD_RECV) \
	X(DAT_INVALID_HANDLE_EVD_CONN) X(DAT_INVALID_HANDLE_EVD_ASYNC) X(DAT_INVALID_HANDLE_SRQ) \
	X(DAT_INVALID_HANDLE_CSP) X(DAT_INVALID_HANDLE1) X(DAT_INVALID_HANDLE2) X(DAT_INVALID_HANDLE3) \
	X(DAT_INVALID_HANDLE4) X(DAT_INVALID_HANDLE5) X(DAT_INVALID_HANDLE6) X(DAT_INVALID_HANDLE7) \
	X(DAT_INVALID_HANDLE8) X(DAT_INVALID_HANDLE9) X(DAT_INVALID_HANDLE10) X(DAT_INVALID_ARG1) \
	X(DAT_INVALID_ARG2) X(DAT_INVALID_ARG3) X(DAT_INVALID_ARG4) X(DAT_INVALID_ARG5) \
	X(DAT_INVALID_ARG6) X(DAT_INVALID_ARG7) X(DAT_INVALID_ARG8) X(DAT_INVALID_ARG9) \
	X(DAT_INVALID_ARG10) X(DAT_INVALID_STATE_EP_UNCONNECTED) X(DAT_INVALID_STATE_EP_ACTCONNPENDING) \
	X(DAT_INVALID_STATE_EP_PASSCONNPENDING) X(DAT_INVALID_STATE_EP_TENTCONNPENDING) \
	X(DAT_INVALID_STATE_EP_CONNECTED) X(DAT_INVALID_STATE_EP_DISCONNECTED) \
	X(DAT_INVALID_STATE_EP_RESERVED) X(DAT_INVALID_STATE_EP_COMPLPENDING) \
	X(DAT_INVALID_STATE_EP_DISCPENDING) X(DAT_INVALID_STATE_EP_PROVIDERCONTROL) \
	X(DAT_INVALID_STATE_EP_NOTREADY) X(DAT_INVALID_STATE_EP_RECV_WATERMARK) \
	X(DAT_INVALID_STATE_EP_PZ) X(DAT_INVALID_STATE_EP_EVD_REQUEST) X(DAT_INVALID_STATE_EP_EVD_RECV) \
	X(DAT_INVALID_STATE_EP_EVD_CONNECT) X(DAT_INVALID_STATE_EP_UNCONFIGURED) \
	X(DAT_INVALID_STATE_EP_UNCONFRESERVED) X(DAT_INVALID_STATE_EP_UNCONFPASSIVE) \
	X(DAT_INVALID_STATE_EP_UNCONFTENTATIVE) X(DAT_INVALID_STATE_CNO_IN_USE) \
	X(DAT_INVALID_STATE_CNO_DEAD) X(DAT_INVALID_STATE_EVD_OPEN) X(DAT_INVALID_STATE_EVD_ENABLED) \
	X(DAT_INVALID_STATE_EVD_DISABLED) X(DAT_INVALID_STATE_EVD_WAITABLE) \
	X(DAT_INVALID_STATE_EVD_UNWAITABLE) X(DAT_INVALID_STATE_EVD_IN_USE) \
	X(DAT_INVALID_STATE_EVD_CONFIG_NOTIFY) X(DAT_INVALID_STATE_EVD_CONFIG_SOLICITED) \
	X(DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD) X(DAT_INVALID_STATE_EVD_WAITER) \
	X(DAT_INVALID_STATE_EVD_ASYNC) X(DAT_INVALID_STATE_IA_IN_USE) X(DAT_INVALID_STATE_LMR_IN_USE) \
	X(DAT_INVALID_STATE_LMR_FREE) X(DAT_INVALID_STATE_PZ_IN_USE) X(DAT_INVALID_STATE_PZ_FREE) \
	X(DAT_INVALID_STATE_SRQ_OPERATIONAL) X(DAT_INVALID_STATE_SRQ_ERROR) \
	X(DAT_INVALID_STATE_SRQ_IN_USE) X(DAT_INVALID_STATE_SRQ_SHUTDOWN) X(DAT_PRIVILEGES_READ) \
	X(DAT_PRIVILEGES_WRITE) X(DAT_PRIVILEGES_RDMA_READ) X(DAT_PRIVILEGES_RDMA_WRITE) \
	X(DAT_PROTECTION_READ) X(DAT_PROTECTION_WRITE) X(DAT_PROTECTION_RDMA_READ) \
	X(DAT_PROTECTION_RDMA_WRITE) X(DAT_INVALID_ADDRESS_UNSUPPORTED) \
	X(DAT_INVALID_ADDRESS_UNREACHABLE) X(DAT_INVALID_ADDRESS_MALFORMED) \
	X(DAT_NAME_NOT_REGISTERED) X(DAT_MAJOR_NOT_FOUND) X(DAT_MINOR_NOT_FOUND) \
	X(DAT_THREAD_SAFETY_NOT_FOUND)

#define PRIVATE_MINORS(X) X(DAT_LIBRARY_LOAD_FAILED) X(DAT_PROVIDER_INIT_FAILED)

struct code_name { uint32_t code; const char *name; };
#define ENTRY(n) { (uint32_t)(n), #n },
static const struct code_name majors[] = { MAJORS(ENTRY) };
static const struct code_name minors[] = { MINORS(ENTRY) };
static const struct code_name private_minors[] = { PRIVATE_MINORS(ENTRY) };
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Subtypes are one sequence from 1: listing one fewer or one more fails here. */
_Static_assert(COUNT(minors) == DAT_THREAD_SAFETY_NOT_FOUND, "MINORS() misses a subtype of dat_error.h");
_Static_assert(COUNT(majors) == 26, "MAJORS() must list every DAT_RETURN_TYPE");

static const char *lookup(const struct code_name *t, size_t n, uint32_t code)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].code == code)
			return t[i].name;
	return NULL;
}

/* "0x800a0064 DAT_PROVIDER_NOT_FOUND/DAT_NAME_NOT_REGISTERED", from our own tables. */
static const char *describe(DAT_RETURN r)
{
	static __thread char buf[8][160];
	static __thread int next;
	char *b = buf[next++ & 7];
	uint32_t maj = DAT_GET_TYPE(r), min = DAT_GET_SUBTYPE(r);
	const char *ma = lookup(majors, COUNT(majors), maj);
	const char *mi = min == 0 ? "" : lookup(minors, COUNT(minors), min);

	if (mi == NULL)
		mi = lookup(private_minors, COUNT(private_minors), min);
	snprintf(b, sizeof(buf[0]), "0x%08x %s%s%s", (unsigned)r, ma ? ma : "?type",
		 min ? "/" : "", min ? (mi ? mi : "?subtype") : "");
	return b;
}

/* ------------------------------------------------------------------ */
/* Reporting                                                          */

static const char *g_case = "?";
static int g_fails;
static char g_dir[1024];
static char g_mock[PATH_MAX];
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	printf("FAIL %s: ", g_case);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	g_fails++;
	pthread_mutex_unlock(&report_lock);
}

#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)
#define CHECK_RC(got, want, what) do { \
	DAT_RETURN got_ = (got), want_ = (want); \
	if (got_ != want_) \
		fail("%s: expected %s, got %s", (what), describe(want_), describe(got_)); \
} while (0)
#define CHECK_EQ_INT(got, want, what) do { \
	long long g_ = (long long)(got), w_ = (long long)(want); \
	if (g_ != w_) fail("%s: expected %lld, got %lld", (what), w_, g_); \
} while (0)

#define NOT_FOUND(minor) DAT_ERROR(DAT_PROVIDER_NOT_FOUND, (minor))
#define BAD_HANDLE(minor) DAT_ERROR(DAT_INVALID_HANDLE, (minor))
#define BAD_ARG(minor) DAT_ERROR(DAT_INVALID_PARAMETER, (minor))
#define NOT_IMPL DAT_ERROR(DAT_NOT_IMPLEMENTED, 0)

/* ------------------------------------------------------------------ */
/* Fixture helpers                                                    */

/* Writes dat.conf text (with @MOCK@ replaced by the mock's path) to the
 * temp dir under the given name; returns the full path (static storage). */
static const char *write_conf(const char *file, const char *text)
{
	static char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", g_dir, file);
	f = fopen(path, "w");
	if (f == NULL) {
		fail("cannot write %s: %s", path, strerror(errno));
		return path;
	}
	for (const char *p = text; *p; ) {
		if (strncmp(p, "@MOCK@", 6) == 0) {
			fputs(g_mock, f);
			p += 6;
		} else {
			fputc(*p++, f);
		}
	}
	fclose(f);
	return path;
}

/*
 * Sets (or, with NULL, unsets) DAT_OVERRIDE for this case.  Our registry
 * reads it on the first DAT call, so setting it here is enough.  A registry
 * that reads it when the library loads (the reference does) needs it in the
 * environment at exec time: with CTEST_REEXEC set, the case process re-execs
 * itself here and runs the case again from the start in the new image.
 */
static int g_reexec;
static void set_override(const char *path)
{
	if (path)
		setenv("DAT_OVERRIDE", path, 1);
	else
		unsetenv("DAT_OVERRIDE");
	if (g_reexec && !getenv("CTEST_IN_EXEC")) {
		setenv("CTEST_IN_EXEC", "1", 1);
		setenv("CTEST_DIR", g_dir, 1);
		setenv("CTEST_MOCK", g_mock, 1);
		fflush(stdout);
		fflush(stderr);
		execl("/proc/self/exe", "registry_test", "--exec", g_case, (char *)NULL);
		fail("re-exec for DAT_OVERRIDE failed: %s", strerror(errno));
	}
}

/* This case's dat.conf: writes <case>.conf and points DAT_OVERRIDE at it. */
static const char *use_conf(const char *text)
{
	char file[128];
	const char *path;

	snprintf(file, sizeof(file), "%s.conf", g_case);
	path = write_conf(file, text);
	set_override(path);
	return path;
}

#define MOCK_LINE(name, ver, ts, params) \
	name " " ver " " ts " default @MOCK@ mock.2.0 \"" params "\" \"\"\n"

/* A mock counter, or -1 if the registry has not loaded the mock. */
static long mock_counter(const char *sym)
{
	void *h = dlopen(g_mock, RTLD_NOW | RTLD_NOLOAD);
	long v = -1;

	if (h) {
		int *p = dlsym(h, sym);
		if (p)
			v = __atomic_load_n(p, __ATOMIC_SEQ_CST);
		dlclose(h);
	}
	return v;
}

static void *mock_symbol(const char *sym)
{
	void *h = dlopen(g_mock, RTLD_NOW | RTLD_NOLOAD), *p = NULL;

	if (h) {
		p = dlsym(h, sym);
		dlclose(h);
	}
	return p;
}

static DAT_RETURN open_ia(const char *name, DAT_IA_HANDLE *ia)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	return dat_ia_open((DAT_NAME_PTR)name, 8, &evd, ia);
}

/* Opens `name`, expecting success; returns the handle or NULL. */
static DAT_IA_HANDLE must_open(const char *name)
{
	DAT_IA_HANDLE ia = SENTINEL_IA;
	DAT_RETURN r = open_ia(name, &ia);
	char what[300];

	snprintf(what, sizeof(what), "dat_ia_open(\"%.200s\")", name);
	CHECK_RC(r, DAT_SUCCESS, what);
	return r == DAT_SUCCESS ? ia : NULL;
}

static void must_close(DAT_IA_HANDLE ia)
{
	if (ia)
		CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ia_close");
}

/* Expects dat_ia_open(name) to fail with `want` and leave both outputs alone. */
static void expect_open_fails(const char *name, DAT_RETURN want)
{
	DAT_IA_HANDLE ia = SENTINEL_IA;
	DAT_EVD_HANDLE evd = SENTINEL_EVD;
	char what[300];

	snprintf(what, sizeof(what), "dat_ia_open(\"%.200s\")", name);
	CHECK_RC(dat_ia_open((DAT_NAME_PTR)name, 8, &evd, &ia), want, what);
	CHECK(ia == SENTINEL_IA, "%s: *ia_handle changed to %p on failure", what, ia);
	CHECK(evd == SENTINEL_EVD, "%s: *async_evd changed to %p on failure", what, evd);
}

static DAT_IA_HANDLE provider_ia_of(DAT_IA_HANDLE ia)
{
	DAT_IA_HANDLE p = NULL;

	CHECK_RC(dats_get_ia_handle(ia, &p), DAT_SUCCESS, "dats_get_ia_handle");
	return p;
}

static int is_small(DAT_IA_HANDLE h)
{
	return (uintptr_t)h >= 1 && (uintptr_t)h <= 0xFFFF;
}

static int count_providers(void)
{
	DAT_COUNT n = -1;
	DAT_RETURN r = dat_registry_list_providers(0, &n, NULL);

	CHECK_RC(r, DAT_SUCCESS, "dat_registry_list_providers(0, &n, NULL)");
	return n;
}

/* Runs fn(arg) in a grandchild and returns its DAT_RETURN; a crash is
 * reported as a failure and *crashed set.  The grandchild inherits the
 * registry state of this process. */
struct isolated { DAT_RETURN rc; long forwarded; };
static struct isolated run_isolated(DAT_RETURN (*fn)(void *), void *arg, const char *what, int *crashed)
{
	struct isolated res = { 0, 0 };
	int fds[2], status;
	pid_t pid;

	*crashed = 0;
	fflush(stdout);
	fflush(stderr);
	if (pipe(fds) != 0) {
		fail("%s: pipe: %s", what, strerror(errno));
		return res;
	}
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		alarm(20);
		res.rc = fn(arg);
		res.forwarded = mock_counter("mock_bad_handle_calls") + mock_counter("mock_dead_calls");
		if (write(fds[1], &res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &res, sizeof(res)) != (ssize_t)sizeof(res))
		res.rc = 0xffffffff;
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		*crashed = WTERMSIG(status);
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("%s: isolated call exited with status 0x%x", what, status);
	return res;
}

/* ------------------------------------------------------------------ */
/* Cases: dat.conf and dat_registry_list_providers                    */

static void fill_sentinel(DAT_PROVIDER_INFO *info)
{
	memset(info, 0, sizeof(*info));
	strcpy(info->ia_name, "untouched");
	info->dapl_version_major = 77;
}

static void check_info(const DAT_PROVIDER_INFO *info, const char *name, unsigned maj, unsigned min, int ts, int idx)
{
	CHECK(strcmp(info->ia_name, name) == 0, "entry %d: ia_name expected \"%s\", got \"%.64s\"", idx, name, info->ia_name);
	CHECK(info->dapl_version_major == maj && info->dapl_version_minor == min,
	      "entry %d (%s): version expected %u.%u, got %u.%u", idx, name, maj, min,
	      info->dapl_version_major, info->dapl_version_minor);
	CHECK((info->is_thread_safe != 0) == (ts != 0), "entry %d (%s): is_thread_safe expected %d, got %d",
	      idx, name, ts, (int)info->is_thread_safe);
}

static const char *MIXED_CONF =
	"# ctest: valid and broken lines mixed\n"
	MOCK_LINE("good1", "u2.0", "nonthreadsafe", "a")
	"\n"
	"this line is broken\n"
	MOCK_LINE("good2", "u2.1", "threadsafe", "b")
	"kern1 k2.0 threadsafe default @MOCK@ mock.2.0 \"\" \"\"\n"
	MOCK_LINE("bad3", "u2.0", "sometimes", "")
	MOCK_LINE("bad4", "x2.0", "threadsafe", "")
	"bad5 u2.0 threadsafe default @MOCK@ mock.2.0 \"unterminated\n"
	"   \t" MOCK_LINE("good3", "u1.2", "threadsafe", "c")
	"bad6 u2.0 threadsafe maybe @MOCK@ mock.2.0 \"\" \"\"\n"
	"bad7 u2.0 threadsafe default @MOCK@ mock \"\" \"\"\n"
	"bad8 uX.Y threadsafe default @MOCK@ mock.2.0 \"\" \"\"\n";

static void case_list_providers(void)
{
	DAT_PROVIDER_INFO infos[8], *ptrs[8];
	DAT_COUNT n;
	int i;

	use_conf(MIXED_CONF);
	for (i = 0; i < 8; i++) {
		fill_sentinel(&infos[i]);
		ptrs[i] = &infos[i];
	}
	n = -1;
	CHECK_RC(dat_registry_list_providers(0, &n, NULL), DAT_SUCCESS, "list(max=0)");
	CHECK_EQ_INT(n, 3, "list(max=0): count of u-entries");

	n = -1;
	CHECK_RC(dat_registry_list_providers(8, &n, ptrs), DAT_SUCCESS, "list(max=8)");
	CHECK_EQ_INT(n, 3, "list(max=8): entries returned");
	check_info(&infos[0], "good1", 2, 0, 0, 0);
	check_info(&infos[1], "good2", 2, 1, 1, 1);
	check_info(&infos[2], "good3", 1, 2, 1, 2);
	CHECK(strcmp(infos[3].ia_name, "untouched") == 0, "list(max=8): slot 3 written (\"%.64s\")", infos[3].ia_name);

	for (i = 0; i < 8; i++)
		fill_sentinel(&infos[i]);
	n = -1;
	CHECK_RC(dat_registry_list_providers(2, &n, ptrs), DAT_SUCCESS, "list(max=2)");
	CHECK_EQ_INT(n, 2, "list(max=2): entries returned");
	check_info(&infos[0], "good1", 2, 0, 0, 0);
	check_info(&infos[1], "good2", 2, 1, 1, 1);
	CHECK(strcmp(infos[2].ia_name, "untouched") == 0, "list(max=2): slot 2 written (\"%.64s\")", infos[2].ia_name);

	CHECK_RC(dat_registry_list_providers(8, NULL, ptrs), BAD_ARG(DAT_INVALID_ARG2), "list(max=8, NULL count)");
	CHECK_RC(dat_registry_list_providers(0, NULL, NULL), BAD_ARG(DAT_INVALID_ARG2), "list(max=0, NULL count)");
}

static void case_list_null_array(void)
{
	DAT_COUNT n = -1;

	use_conf(MIXED_CONF);
	CHECK_RC(dat_registry_list_providers(4, &n, NULL), BAD_ARG(DAT_INVALID_ARG3), "list(max=4, NULL array)");
}

static void case_list_empty_conf(void)
{
	use_conf("# only comments\n\n   \n#ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n");
	CHECK_EQ_INT(count_providers(), 0, "entries in a comments-only dat.conf");
	expect_open_fails("ofa-v2-ib0", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
}

static void case_broken_lines_do_not_block(void)
{
	char log[PATH_MAX], want[PATH_MAX + 16], text[8192];
	const char *conf;
	int fd, saved;
	ssize_t len;

	conf = use_conf(MIXED_CONF);
	/* capture what the registry logs while reading dat.conf */
	snprintf(log, sizeof(log), "%s/%s.stderr", g_dir, g_case);
	fflush(stderr);
	saved = dup(2);
	fd = open(log, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	dup2(fd, 2);
	close(fd);
	DAT_IA_HANDLE a = must_open("good1");
	DAT_IA_HANDLE b = must_open("good2");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	must_close(a);
	must_close(b);

	expect_open_fails("bad3", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails("kern1", NOT_FOUND(DAT_NAME_NOT_REGISTERED));

	fd = open(log, O_RDONLY);
	len = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	text[len > 0 ? len : 0] = 0;
	snprintf(want, sizeof(want), "%s:4:", conf);
	CHECK(strstr(text, "dat-registry WARN") != NULL, "no \"dat-registry WARN\" line on stderr for broken lines; got: %.300s", text);
	CHECK(strstr(text, want) != NULL, "stderr does not name the broken line \"%s\"; got: %.300s", want, text);
}

/* good3 above is u1.2: asking for 2.0 must say MAJOR_NOT_FOUND. Kept apart
 * so the case above checks only that good entries open. */
static void case_broken_lines_open_each_good(void)
{
	use_conf(MIXED_CONF);
	must_close(must_open("good1"));
	must_close(must_open("good2"));
	expect_open_fails("good3", NOT_FOUND(DAT_MAJOR_NOT_FOUND));
	DAT_IA_HANDLE ia = SENTINEL_IA;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	CHECK_RC(dat_ia_openv("good3", 8, &evd, &ia, 1, 2, DAT_TRUE), DAT_SUCCESS, "dat_ia_openv(good3, 1.2, threadsafe)");
	if (ia != SENTINEL_IA)
		must_close(ia);
}

/* ------------------------------------------------------------------ */
/* Cases: dat_ia_open failures                                        */

static void case_open_unknown_name(void)
{
	use_conf(MOCK_LINE("good1", "u2.0", "nonthreadsafe", ""));
	expect_open_fails("nosuch", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails("good", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails("good12", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails("GOOD1", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails("", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	CHECK_RC(NOT_FOUND(DAT_NAME_NOT_REGISTERED), 0x800a0064, "DAT_ERROR(PROVIDER_NOT_FOUND, NAME_NOT_REGISTERED) value");
	CHECK_EQ_INT(mock_counter("mock_init_calls"), -1, "mock loaded although no open matched (init calls, -1 = not loaded)");
}

static void case_open_null_args(void)
{
	DAT_IA_HANDLE ia = SENTINEL_IA;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	use_conf(MOCK_LINE("good1", "u2.0", "nonthreadsafe", ""));
	CHECK_RC(dat_ia_open(NULL, 8, &evd, &ia), BAD_ARG(DAT_INVALID_ARG1), "dat_ia_open(NULL name)");
	CHECK_RC(dat_ia_open("good1", 8, NULL, &ia), BAD_ARG(DAT_INVALID_ARG3), "dat_ia_open(NULL async_evd)");
	CHECK_RC(dat_ia_open("good1", 8, &evd, NULL), BAD_ARG(DAT_INVALID_ARG4), "dat_ia_open(NULL ia)");
	CHECK(ia == SENTINEL_IA, "*ia changed by a refused open");
	CHECK_EQ_INT(mock_counter("mock_open_ias"), -1, "mock loaded by refused opens (-1 = not loaded)");
}

static void case_missing_library(void)
{
	use_conf("nolib u2.0 nonthreadsafe default /nonexistent/dir/libdatnope.so.2 mock.2.0 \"\" \"\"\n"
		 "nolib2 u2.0 nonthreadsafe default libdat-ctest-no-such-provider.so.2 mock.2.0 \"\" \"\"\n"
		 MOCK_LINE("good1", "u2.0", "nonthreadsafe", ""));
	expect_open_fails("nolib", NOT_FOUND(DAT_LIBRARY_LOAD_FAILED));
	expect_open_fails("nolib", NOT_FOUND(DAT_LIBRARY_LOAD_FAILED));
	expect_open_fails("nolib2", NOT_FOUND(DAT_LIBRARY_LOAD_FAILED));
	must_close(must_open("good1"));
}

static void case_not_a_provider(void)
{
	use_conf("libc u2.0 nonthreadsafe default libc.so.6 mock.2.0 \"\" \"\"\n"
		 "notalib u2.0 nonthreadsafe default /etc/hostname mock.2.0 \"\" \"\"\n");
	expect_open_fails("libc", NOT_FOUND(DAT_LIBRARY_LOAD_FAILED));
	expect_open_fails("libc", NOT_FOUND(DAT_LIBRARY_LOAD_FAILED));
	expect_open_fails("notalib", NOT_FOUND(DAT_LIBRARY_LOAD_FAILED));
}

static void case_init_does_not_register(void)
{
	use_conf(MOCK_LINE("noreg", "u2.0", "nonthreadsafe", "noregister")
		 MOCK_LINE("good1", "u2.0", "nonthreadsafe", ""));
	expect_open_fails("noreg", NOT_FOUND(DAT_PROVIDER_INIT_FAILED));
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 1, "init calls after one failed open");
	expect_open_fails("noreg", NOT_FOUND(DAT_PROVIDER_INIT_FAILED));
	CHECK_EQ_INT(mock_counter("mock_open_ias"), 0, "mock IAs open");
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 0, "fini calls for an entry whose init failed");
	must_close(must_open("good1"));
}

static void case_provider_open_fails(void)
{
	use_conf(MOCK_LINE("failopen", "u2.0", "nonthreadsafe", "failopen"));
	expect_open_fails("failopen", DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY));
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 1, "init calls");
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 1, "fini calls after the only open failed");
	CHECK_EQ_INT(mock_counter("mock_registered"), 0, "registrations left");
	expect_open_fails("failopen", DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY));
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 2, "init calls after a second failed open");
}

static DAT_RETURN openv(const char *name, unsigned maj, unsigned min, DAT_BOOLEAN ts, DAT_IA_HANDLE *ia)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	*ia = SENTINEL_IA;
	return dat_ia_openv((DAT_NAME_PTR)name, 8, &evd, ia, maj, min, ts);
}

static const char *VERSION_CONF =
	MOCK_LINE("v20n", "u2.0", "nonthreadsafe", "")
	MOCK_LINE("v21t", "u2.1", "threadsafe", "")
	MOCK_LINE("both", "u2.0", "nonthreadsafe", "")
	MOCK_LINE("both", "u2.0", "threadsafe", "");

static void expect_openv(const char *name, unsigned maj, unsigned min, DAT_BOOLEAN ts, DAT_RETURN want)
{
	DAT_IA_HANDLE ia;
	char what[128];
	DAT_RETURN r = openv(name, maj, min, ts, &ia);

	snprintf(what, sizeof(what), "dat_ia_openv(\"%s\", %u.%u, %s)", name, maj, min, ts ? "threadsafe" : "nonthreadsafe");
	CHECK_RC(r, want, what);
	if (r == DAT_SUCCESS)
		must_close(ia);
	else
		CHECK(ia == SENTINEL_IA, "%s: *ia changed on failure", what);
}

static void case_version_mismatch(void)
{
	use_conf(VERSION_CONF);
	expect_openv("v20n", 2, 0, DAT_TRUE, NOT_FOUND(DAT_THREAD_SAFETY_NOT_FOUND));
	expect_openv("v20n", 1, 0, DAT_FALSE, NOT_FOUND(DAT_MAJOR_NOT_FOUND));
	expect_openv("v20n", 3, 0, DAT_FALSE, NOT_FOUND(DAT_MAJOR_NOT_FOUND));
	expect_openv("v20n", 2, 1, DAT_FALSE, NOT_FOUND(DAT_MINOR_NOT_FOUND));
	expect_openv("v21t", 2, 2, DAT_TRUE, NOT_FOUND(DAT_MINOR_NOT_FOUND));
	expect_openv("v21t", 1, 1, DAT_TRUE, NOT_FOUND(DAT_MAJOR_NOT_FOUND));
	/* exact matches */
	expect_openv("v20n", 2, 0, DAT_FALSE, DAT_SUCCESS);
	expect_openv("v21t", 2, 1, DAT_TRUE, DAT_SUCCESS);
	expect_openv("both", 2, 0, DAT_FALSE, DAT_SUCCESS);
	expect_openv("both", 2, 0, DAT_TRUE, DAT_SUCCESS);
}

/* Our registry's documented leniency: a newer minor, or a thread-safe
 * library, serves an older / non-thread-safe consumer. */
static void case_version_compatible(void)
{
	use_conf(VERSION_CONF);
	expect_openv("v21t", 2, 0, DAT_FALSE, DAT_SUCCESS);
	expect_openv("v21t", 2, 1, DAT_FALSE, DAT_SUCCESS);
	expect_openv("v21t", 2, 0, DAT_TRUE, DAT_SUCCESS);
	DAT_IA_HANDLE ia = must_open("v21t"); /* dat_ia_open: 2.0 nonthreadsafe */
	must_close(ia);
}

/* ------------------------------------------------------------------ */
/* Cases: DAT_OVERRIDE                                                */

static void case_override_honoured(void)
{
	DAT_PROVIDER_INFO info, *p = &info;
	DAT_COUNT n = -1;

	use_conf(MOCK_LINE("ctest-only-in-override", "u2.0", "nonthreadsafe", ""));
	fill_sentinel(&info);
	CHECK_RC(dat_registry_list_providers(1, &n, &p), DAT_SUCCESS, "list(max=1)");
	CHECK_EQ_INT(n, 1, "entries in the override file");
	check_info(&info, "ctest-only-in-override", 2, 0, 0, 0);
	must_close(must_open("ctest-only-in-override"));
	expect_open_fails("ofa-v2-ib0", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
}

/* The u-entry count the registry sees with DAT_OVERRIDE=/etc/dat.conf,
 * measured in a fresh process (this one must not have read dat.conf yet). */
static int etc_conf_count(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* a fresh image, so a registry reading DAT_OVERRIDE at load sees it too */
		setenv("DAT_OVERRIDE", "/etc/dat.conf", 1);
		execl("/proc/self/exe", "registry_test", "--list-count", (char *)NULL);
		_exit(255);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status) >= 250 ? -(WEXITSTATUS(status) - 248) : WEXITSTATUS(status);
}

static void case_override_unset(void)
{
	int etc = etc_conf_count();
	struct stat st;

	write_conf("override_unset-A.conf", MOCK_LINE("ctest-only-in-override", "u2.0", "nonthreadsafe", ""));
	set_override(NULL);
	if (stat("/etc/dat.conf", &st) != 0)
		CHECK_EQ_INT(etc, 0, "entries with DAT_OVERRIDE=/etc/dat.conf when it is absent");
	CHECK(etc >= 0, "could not count /etc/dat.conf entries (%d)", etc);
	CHECK_EQ_INT(count_providers(), etc, "entries with DAT_OVERRIDE unset vs DAT_OVERRIDE=/etc/dat.conf");
	expect_open_fails("ctest-only-in-override", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
}

static void case_override_missing_file(void)
{
	DAT_PROVIDER_INFO info, *p = &info;
	DAT_COUNT n = -1;
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/does-not-exist.conf", g_dir);
	set_override(path);
	CHECK_EQ_INT(count_providers(), 0, "entries from a missing dat.conf");
	fill_sentinel(&info);
	CHECK_RC(dat_registry_list_providers(1, &n, &p), DAT_SUCCESS, "list(max=1) on a missing dat.conf");
	CHECK_EQ_INT(n, 0, "list(max=1) count on a missing dat.conf");
	expect_open_fails("good1", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails("ofa-v2-ib0", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
}

static void case_override_is_directory(void)
{
	set_override(g_dir);
	CHECK_EQ_INT(count_providers(), 0, "entries when DAT_OVERRIDE names a directory");
	expect_open_fails("good1", NOT_FOUND(DAT_NAME_NOT_REGISTERED));
}

/* ------------------------------------------------------------------ */
/* Cases: dat_strerror                                                */

static void case_strerror(void)
{
	const char *ma, *mi;
	DAT_RETURN r;
	size_t i;

	set_override("/dev/null");
	for (i = 0; i < COUNT(majors); i++) {
		char what[128];
		DAT_RETURN code = majors[i].code ? DAT_ERROR(majors[i].code, 0) : DAT_SUCCESS;

		ma = mi = "not set";
		snprintf(what, sizeof(what), "dat_strerror(%s = 0x%08x)", majors[i].name, (unsigned)code);
		r = dat_strerror(code, &ma, &mi);
		CHECK_RC(r, DAT_SUCCESS, what);
		if (r == DAT_SUCCESS) {
			CHECK(ma && strcmp(ma, majors[i].name) == 0, "%s: major expected \"%s\", got \"%s\"", what, majors[i].name, ma ? ma : "(null)");
			CHECK(mi && strcmp(mi, "") == 0, "%s: minor expected \"\", got \"%s\"", what, mi ? mi : "(null)");
		}
	}
	for (i = 0; i < COUNT(minors) + COUNT(private_minors); i++) {
		const struct code_name *m = i < COUNT(minors) ? &minors[i] : &private_minors[i - COUNT(minors)];
		uint32_t major = i < COUNT(minors) ? DAT_INVALID_PARAMETER : DAT_PROVIDER_NOT_FOUND;
		DAT_RETURN code = DAT_ERROR(major, m->code);
		char what[128];

		ma = mi = "not set";
		snprintf(what, sizeof(what), "dat_strerror(%s = 0x%08x)", m->name, (unsigned)code);
		r = dat_strerror(code, &ma, &mi);
		CHECK_RC(r, DAT_SUCCESS, what);
		if (r == DAT_SUCCESS) {
			const char *wm = lookup(majors, COUNT(majors), major);
			CHECK(ma && strcmp(ma, wm) == 0, "%s: major expected \"%s\", got \"%s\"", what, wm, ma ? ma : "(null)");
			CHECK(mi && strcmp(mi, m->name) == 0, "%s: minor expected \"%s\", got \"%s\"", what, m->name, mi ? mi : "(null)");
		}
	}
	CHECK_RC(dat_strerror(DAT_ERROR(0x00180000, 0), &ma, &mi), BAD_ARG(DAT_INVALID_ARG1), "dat_strerror(unknown type 0x0018)");
	CHECK_RC(dat_strerror(DAT_ERROR(0x0fff0000, DAT_INVALID_ARG1), &ma, &mi), BAD_ARG(DAT_INVALID_ARG1), "dat_strerror(unknown type 0x0fff)");
	CHECK_RC(dat_strerror(DAT_ERROR(DAT_INVALID_HANDLE, DAT_THREAD_SAFETY_NOT_FOUND + 1), &ma, &mi),
		 BAD_ARG(DAT_INVALID_ARG1), "dat_strerror(subtype one past the last)");
	CHECK_RC(dat_strerror(DAT_ERROR(DAT_INVALID_HANDLE, 0x6fff), &ma, &mi), BAD_ARG(DAT_INVALID_ARG1), "dat_strerror(unknown subtype 0x6fff)");
	CHECK_RC(dat_strerror(DAT_ERROR(DAT_INVALID_HANDLE, 0xffff), &ma, &mi), BAD_ARG(DAT_INVALID_ARG1), "dat_strerror(unknown subtype 0xffff)");
}

/* ------------------------------------------------------------------ */
/* Cases: IA handles and forwarding                                   */

static const char *ONE_CONF = MOCK_LINE("m0", "u2.0", "nonthreadsafe", "") MOCK_LINE("m1", "u2.0", "nonthreadsafe", "");

static void case_ia_handle_small_int(void)
{
	DAT_IA_HANDLE a, b, pa, pb, q = NULL;
	void *table;

	use_conf(ONE_CONF);
	a = must_open("m0");
	b = must_open("m0");
	if (!a || !b)
		return;
	CHECK(is_small(a), "IA handle %p is not a small integer (1..0xFFFF)", a);
	CHECK(is_small(b), "IA handle %p is not a small integer (1..0xFFFF)", b);
	CHECK(a != b, "two live IAs got the same handle %p", a);
	table = mock_symbol("mock_provider_table");
	pa = provider_ia_of(a);
	pb = provider_ia_of(b);
	CHECK(pa && pa != a && !is_small(pa), "dats_get_ia_handle(%p) gave %p, not a provider pointer", a, pa);
	CHECK(pa != pb, "two IAs map to the same provider IA %p", pa);
	if (pa && !is_small(pa))
		CHECK(*(void **)pa == table, "provider IA %p does not start with the mock's table", pa);
	CHECK_RC(dats_get_ia_handle(pa, &q), DAT_SUCCESS, "dats_get_ia_handle(provider handle)");
	CHECK(q == pa, "dats_get_ia_handle(provider %p) gave %p", pa, q);
	CHECK_RC(dats_get_ia_handle((DAT_IA_HANDLE)(uintptr_t)0x4242, &q), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dats_get_ia_handle(never-opened 0x4242)");
	CHECK_RC(dats_get_ia_handle(NULL, &q), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dats_get_ia_handle(NULL)");
	CHECK_RC(dats_get_ia_handle(a, NULL), BAD_ARG(DAT_INVALID_ARG2), "dats_get_ia_handle(ia, NULL)");
	must_close(a);
	CHECK_RC(dats_get_ia_handle(a, &q), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dats_get_ia_handle(closed handle)");
	/* a reopened IA is not given the handle just closed */
	DAT_IA_HANDLE c = must_open("m1");
	CHECK(c != a, "handle %p of a just-closed IA given out again at once", a);
	CHECK(is_small(c), "IA handle %p is not a small integer", c);
	must_close(b);
	must_close(c);
}

static void case_ia_query_translation(void)
{
	DAT_IA_HANDLE ia, pia;
	DAT_IA_ATTR ia_attr;
	DAT_PROVIDER_ATTR pattr;
	DAT_EVD_HANDLE evd = SENTINEL_EVD;

	use_conf(ONE_CONF);
	ia = must_open("m1");
	if (!ia)
		return;
	pia = provider_ia_of(ia);
	memset(&ia_attr, 0, sizeof(ia_attr));
	memset(&pattr, 0, sizeof(pattr));
	CHECK_RC(dat_ia_query(ia, &evd, DAT_IA_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &pattr), DAT_SUCCESS,
		 "dat_ia_query(consumer handle)");
	CHECK(mock_symbol("mock_last_query_handle") &&
	      *(void *volatile *)mock_symbol("mock_last_query_handle") == pia,
	      "mock's ia_query saw %p, expected the provider handle %p",
	      mock_symbol("mock_last_query_handle") ? *(void **)mock_symbol("mock_last_query_handle") : NULL, pia);
	CHECK(strcmp(pattr.provider_name, "m1") == 0, "provider_name \"%.64s\", expected the IA name \"m1\"", pattr.provider_name);
	CHECK(strcmp(ia_attr.adapter_name, "m1") == 0, "adapter_name \"%.64s\", expected the IA name \"m1\"", ia_attr.adapter_name);
	CHECK(evd == DAT_HANDLE_NULL, "async evd %p, expected NULL from the mock", evd);
	CHECK_RC(dat_ia_query(pia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pattr), DAT_SUCCESS, "dat_ia_query(provider handle)");
	CHECK_EQ_INT(mock_counter("mock_bad_handle_calls"), 0, "calls the mock saw with a handle not its own");
	must_close(ia);
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_query(closed handle)");
	CHECK_EQ_INT(mock_counter("mock_dead_calls"), 0, "calls forwarded to a closed mock object");
}

static void case_pz_lifecycle(void)
{
	DAT_IA_HANDLE ia, pia;
	DAT_PZ_HANDLE pz = NULL;
	DAT_PZ_PARAM param;
	DAT_HANDLE_TYPE type;
	DAT_CONTEXT ctx, got;

	use_conf(ONE_CONF);
	ia = must_open("m0");
	if (!ia)
		return;
	pia = provider_ia_of(ia);
	CHECK_RC(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create(consumer IA)");
	if (pz == NULL)
		return;
	CHECK_EQ_INT(mock_counter("mock_open_pzs"), 1, "mock PZs open");
	type = (DAT_HANDLE_TYPE)-1;
	CHECK_RC(dat_get_handle_type(pz, &type), DAT_SUCCESS, "dat_get_handle_type(pz)");
	CHECK_EQ_INT(type, DAT_HANDLE_TYPE_PZ, "handle type of the PZ");
	type = (DAT_HANDLE_TYPE)-1;
	CHECK_RC(dat_get_handle_type(ia, &type), DAT_SUCCESS, "dat_get_handle_type(consumer IA)");
	CHECK_EQ_INT(type, DAT_HANDLE_TYPE_IA, "handle type of the IA");
	memset(&param, 0, sizeof(param));
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS, "dat_pz_query");
	CHECK(param.ia_handle == pia, "pz_query ia_handle %p, expected the mock's IA %p", param.ia_handle, pia);

	ctx.as_64 = 0x1122334455667788ull;
	got.as_64 = 0;
	CHECK_RC(dat_set_consumer_context(pz, ctx), DAT_SUCCESS, "dat_set_consumer_context(pz)");
	CHECK_RC(dat_get_consumer_context(pz, &got), DAT_SUCCESS, "dat_get_consumer_context(pz)");
	CHECK(got.as_64 == ctx.as_64, "pz context 0x%llx, expected 0x%llx", (unsigned long long)got.as_64, (unsigned long long)ctx.as_64);
	ctx.as_64 = 42;
	got.as_64 = 0;
	CHECK_RC(dat_set_consumer_context(ia, ctx), DAT_SUCCESS, "dat_set_consumer_context(consumer IA)");
	CHECK_RC(dat_get_consumer_context(ia, &got), DAT_SUCCESS, "dat_get_consumer_context(consumer IA)");
	CHECK(got.as_64 == 42, "IA context %llu, expected 42", (unsigned long long)got.as_64);

	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	CHECK_EQ_INT(mock_counter("mock_open_pzs"), 0, "mock PZs open after free");
	/* the mock clears a freed object's first word: the registry must refuse it */
	CHECK_RC(dat_pz_free(pz), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(freed pz)");
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_query(freed pz)");
	CHECK_EQ_INT(mock_counter("mock_dead_calls"), 0, "calls forwarded to a freed mock object");
	must_close(ia);
}

static void case_close_semantics(void)
{
	DAT_IA_HANDLE ia;

	use_conf(ONE_CONF);
	ia = must_open("m0");
	if (!ia)
		return;
	CHECK_RC(dat_ia_close(ia, (DAT_CLOSE_FLAGS)7), BAD_ARG(DAT_INVALID_ARG2), "dat_ia_close(flags 7)");
	CHECK_RC(dat_ia_close(ia, (DAT_CLOSE_FLAGS)-1), BAD_ARG(DAT_INVALID_ARG2), "dat_ia_close(flags -1)");
	CHECK_EQ_INT(mock_counter("mock_open_ias"), 1, "mock IAs open after refused closes");
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), DAT_SUCCESS, "dat_ia_query after refused closes");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ia_close(graceful)");
	CHECK_EQ_INT(mock_counter("mock_open_ias"), 0, "mock IAs open after close");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "second dat_ia_close");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "third dat_ia_close");
	CHECK_RC(dat_ia_close((DAT_IA_HANDLE)(uintptr_t)0x3333, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_close(never opened 0x3333)");
	CHECK_RC(dat_ia_close(NULL, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_close(NULL)");
	CHECK_EQ_INT(mock_counter("mock_dead_calls"), 0, "calls forwarded to a closed mock IA");
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 1, "fini calls");
}

static void case_close_by_provider_handle(void)
{
	DAT_IA_HANDLE ia, pia;

	use_conf(ONE_CONF);
	ia = must_open("m0");
	if (!ia)
		return;
	pia = provider_ia_of(ia);
	CHECK_RC(dat_ia_close(pia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ia_close(provider's IA handle)");
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_query(consumer handle of that IA)");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_close(consumer handle of that IA)");
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 1, "fini calls");
	CHECK_EQ_INT(mock_counter("mock_dead_calls"), 0, "calls forwarded to a closed mock IA");
}

static void case_not_implemented(void)
{
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz = NULL;
	DAT_SRQ_HANDLE srq = (DAT_SRQ_HANDLE)(uintptr_t)0x77;
	DAT_EVD_HANDLE evd = (DAT_EVD_HANDLE)(uintptr_t)0x77;
	DAT_SRQ_ATTR attr;

	use_conf(ONE_CONF);
	ia = must_open("m0");
	if (!ia)
		return;
	CHECK_RC(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create");
	memset(&attr, 0, sizeof(attr));
	CHECK_RC(dat_srq_create(ia, pz, &attr, &srq), NOT_IMPL, "dat_srq_create (NULL slot)");
	CHECK(srq == (DAT_SRQ_HANDLE)(uintptr_t)0x77, "srq out-handle written (%p) by an unimplemented call", srq);
	CHECK_RC(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd), NOT_IMPL, "dat_evd_create (NULL slot)");
	CHECK_RC(dat_cno_free(pz), NOT_IMPL, "dat_cno_free(pz) (NULL slot)");
	CHECK_RC(dat_lmr_free(pz), NOT_IMPL, "dat_lmr_free(pz) (NULL slot)");
	CHECK_RC(dat_ep_free(pz), NOT_IMPL, "dat_ep_free(pz) (NULL slot)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	must_close(ia);
}

static void case_extension_op(void)
{
	DAT_IA_HANDLE ia, pia;
	DAT_PZ_HANDLE pz = NULL;
	DAT_HANDLE who = NULL;
	char buf[64] = "";
	int sum = -1;

	use_conf(ONE_CONF);
	ia = must_open("m0");
	if (!ia)
		return;
	pia = provider_ia_of(ia);
	CHECK_RC(dat_extension_op(ia, MOCK_OP_SUM, 5, 1, 2, 3, 4, 5, &sum), DAT_SUCCESS, "dat_extension_op(ia, SUM, 5 ints)");
	CHECK_EQ_INT(sum, 15, "sum of 1..5 via varargs");
	sum = -1;
	CHECK_RC(dat_extension_op(ia, MOCK_OP_SUM, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, &sum), DAT_SUCCESS,
		 "dat_extension_op(ia, SUM, 12 ints)");
	CHECK_EQ_INT(sum, 78, "sum of 1..12 via varargs (stack-passed)");
	sum = -1;
	CHECK_RC(dat_extension_op(ia, MOCK_OP_SUM, 0, &sum), DAT_SUCCESS, "dat_extension_op(ia, SUM, 0 ints)");
	CHECK_EQ_INT(sum, 0, "empty sum");
	CHECK_RC(dat_extension_op(ia, MOCK_OP_MIXED, 2.5, 1234567890123LL, "hi", buf, (int)sizeof(buf)), DAT_SUCCESS,
		 "dat_extension_op(ia, MIXED)");
	CHECK(strcmp(buf, "2.500/1234567890123/hi") == 0, "mixed varargs gave \"%s\", expected \"2.500/1234567890123/hi\"", buf);
	CHECK_RC(dat_extension_op(ia, MOCK_OP_WHO, &who), DAT_SUCCESS, "dat_extension_op(ia, WHO)");
	CHECK(who == pia, "extension op on consumer IA %p reached the mock as %p, expected provider IA %p", ia, who, pia);
	CHECK_RC(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create");
	who = NULL;
	CHECK_RC(dat_extension_op(pz, MOCK_OP_WHO, &who), DAT_SUCCESS, "dat_extension_op(pz, WHO)");
	CHECK(who == pz, "extension op on pz %p reached the mock as %p", pz, who);
	CHECK_RC(dat_extension_op(ia, 99), BAD_ARG(DAT_INVALID_ARG2), "dat_extension_op(ia, unknown op 99): mock's answer");
	CHECK_RC(dat_extension_op(NULL, MOCK_OP_SUM, 0, &sum), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_extension_op(NULL)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	must_close(ia);
	CHECK_RC(dat_extension_op(ia, MOCK_OP_SUM, 0, &sum), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_extension_op(closed IA)");
}

static void case_init_fini_counts(void)
{
	DAT_IA_HANDLE a, b, c, d;
	DAT_PZ_HANDLE pz = NULL;
	DAT_PZ_PARAM param;

	use_conf(ONE_CONF);
	a = must_open("m0");
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 1, "init calls after first open of m0");
	b = must_open("m0");
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 1, "init calls after second open of m0");
	c = must_open("m1");
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 2, "init calls after opening m1 too");
	CHECK_EQ_INT(mock_counter("mock_registered"), 2, "registrations held");
	if (a)
		CHECK_RC(dat_pz_create(a, &pz), DAT_SUCCESS, "dat_pz_create");
	must_close(a);
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 0, "fini calls with m0 still open once");
	must_close(b);
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 1, "fini calls after last m0 close");
	CHECK_EQ_INT(mock_counter("mock_registered"), 1, "registrations held after m0's fini");
	must_close(c);
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 2, "fini calls after last m1 close");
	CHECK_EQ_INT(mock_counter("mock_registered"), 0, "registrations held after all closed");
	/* a PZ left behind by an IA whose provider was finalised: its table is
	 * no longer registered, so the registry must refuse it */
	if (pz)
		CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
			 "dat_pz_query(pz of a finalised provider)");
	d = must_open("m0");
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 3, "init calls after reopening m0");
	must_close(d);
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 3, "fini calls after closing the reopened m0");
	CHECK_EQ_INT(mock_counter("mock_open_ias"), 0, "mock IAs open at the end");
	CHECK_EQ_INT(mock_counter("mock_add_failures"), 0, "dat_registry_add_provider failures seen by the mock");
}

/* ------------------------------------------------------------------ */
/* Cases: bad handles                                                 */

struct bad_call {
	const char *name;
	uint32_t minor;
	int takes_ia; /* the registry translates consumer IA handles for it */
	DAT_RETURN (*fn)(DAT_HANDLE);
};

static DAT_RETURN c_ia_query(DAT_HANDLE h) { DAT_PROVIDER_ATTR a; return dat_ia_query(h, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &a); }
static DAT_RETURN c_ia_close(DAT_HANDLE h) { return dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG); }
static DAT_RETURN c_dats_get(DAT_HANDLE h) { DAT_IA_HANDLE o; return dats_get_ia_handle(h, &o); }
static DAT_RETURN c_pz_create(DAT_HANDLE h) { DAT_PZ_HANDLE pz; return dat_pz_create(h, &pz); }
static DAT_RETURN c_evd_create(DAT_HANDLE h) { DAT_EVD_HANDLE e; return dat_evd_create(h, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &e); }
static DAT_RETURN c_cno_create(DAT_HANDLE h) { DAT_CNO_HANDLE c; return dat_cno_create(h, DAT_OS_WAIT_PROXY_AGENT_NULL, &c); }
static DAT_RETURN c_ep_create(DAT_HANDLE h) { DAT_EP_HANDLE e; return dat_ep_create(h, NULL, NULL, NULL, NULL, NULL, &e); }
static DAT_RETURN c_lmr_sync(DAT_HANDLE h) { DAT_LMR_TRIPLET t; memset(&t, 0, sizeof(t)); return dat_lmr_sync_rdma_read(h, &t, 1); }
static DAT_RETURN c_psp_create(DAT_HANDLE h) { DAT_PSP_HANDLE p; return dat_psp_create(h, 1, NULL, DAT_PSP_CONSUMER_FLAG, &p); }
static DAT_RETURN c_srq_create(DAT_HANDLE h) { DAT_SRQ_ATTR a; DAT_SRQ_HANDLE s; memset(&a, 0, sizeof(a)); return dat_srq_create(h, NULL, &a, &s); }
static DAT_RETURN c_pz_query(DAT_HANDLE h) { DAT_PZ_PARAM p; return dat_pz_query(h, DAT_PZ_FIELD_ALL, &p); }
static DAT_RETURN c_pz_free(DAT_HANDLE h) { return dat_pz_free(h); }
static DAT_RETURN c_rmr_create(DAT_HANDLE h) { DAT_RMR_HANDLE r; return dat_rmr_create(h, &r); }
static DAT_RETURN c_ep_query(DAT_HANDLE h) { DAT_EP_PARAM p; return dat_ep_query(h, 0, &p); }
static DAT_RETURN c_ep_free(DAT_HANDLE h) { return dat_ep_free(h); }
static DAT_RETURN c_ep_post_send(DAT_HANDLE h) { DAT_DTO_COOKIE k; k.as_64 = 0; return dat_ep_post_send(h, 0, NULL, k, 0); }
static DAT_RETURN c_evd_free(DAT_HANDLE h) { return dat_evd_free(h); }
static DAT_RETURN c_evd_dequeue(DAT_HANDLE h) { DAT_EVENT e; return dat_evd_dequeue(h, &e); }
static DAT_RETURN c_lmr_free(DAT_HANDLE h) { return dat_lmr_free(h); }
static DAT_RETURN c_rmr_free(DAT_HANDLE h) { return dat_rmr_free(h); }
static DAT_RETURN c_psp_free(DAT_HANDLE h) { return dat_psp_free(h); }
static DAT_RETURN c_rsp_free(DAT_HANDLE h) { return dat_rsp_free(h); }
static DAT_RETURN c_cr_reject(DAT_HANDLE h) { return dat_cr_reject(h, 0, NULL); }
static DAT_RETURN c_cno_free(DAT_HANDLE h) { return dat_cno_free(h); }
static DAT_RETURN c_srq_free(DAT_HANDLE h) { return dat_srq_free(h); }
static DAT_RETURN c_set_ctx(DAT_HANDLE h) { DAT_CONTEXT c; c.as_64 = 1; return dat_set_consumer_context(h, c); }
static DAT_RETURN c_get_ctx(DAT_HANDLE h) { DAT_CONTEXT c; return dat_get_consumer_context(h, &c); }
static DAT_RETURN c_get_type(DAT_HANDLE h) { DAT_HANDLE_TYPE t; return dat_get_handle_type(h, &t); }
static DAT_RETURN c_ext_op(DAT_HANDLE h) { DAT_HANDLE w; return dat_extension_op(h, MOCK_OP_WHO, &w); }

static const struct bad_call bad_calls[] = {
	{ "dat_ia_query", DAT_INVALID_HANDLE_IA, 1, c_ia_query },
	{ "dat_ia_close", DAT_INVALID_HANDLE_IA, 1, c_ia_close },
	{ "dats_get_ia_handle", DAT_INVALID_HANDLE_IA, 1, c_dats_get },
	{ "dat_pz_create", DAT_INVALID_HANDLE_IA, 1, c_pz_create },
	{ "dat_evd_create", DAT_INVALID_HANDLE_IA, 1, c_evd_create },
	{ "dat_cno_create", DAT_INVALID_HANDLE_IA, 1, c_cno_create },
	{ "dat_ep_create", DAT_INVALID_HANDLE_IA, 1, c_ep_create },
	{ "dat_lmr_sync_rdma_read", DAT_INVALID_HANDLE_IA, 1, c_lmr_sync },
	{ "dat_psp_create", DAT_INVALID_HANDLE_IA, 1, c_psp_create },
	{ "dat_srq_create", DAT_INVALID_HANDLE_IA, 1, c_srq_create },
	{ "dat_pz_query", DAT_INVALID_HANDLE_PZ, 0, c_pz_query },
	{ "dat_pz_free", DAT_INVALID_HANDLE_PZ, 0, c_pz_free },
	{ "dat_rmr_create", DAT_INVALID_HANDLE_PZ, 0, c_rmr_create },
	{ "dat_ep_query", DAT_INVALID_HANDLE_EP, 0, c_ep_query },
	{ "dat_ep_free", DAT_INVALID_HANDLE_EP, 0, c_ep_free },
	{ "dat_ep_post_send", DAT_INVALID_HANDLE_EP, 0, c_ep_post_send },
	{ "dat_evd_free", DAT_INVALID_HANDLE_EVD_REQUEST, 0, c_evd_free },
	{ "dat_evd_dequeue", DAT_INVALID_HANDLE_EVD_REQUEST, 0, c_evd_dequeue },
	{ "dat_lmr_free", DAT_INVALID_HANDLE_LMR, 0, c_lmr_free },
	{ "dat_rmr_free", DAT_INVALID_HANDLE_RMR, 0, c_rmr_free },
	{ "dat_psp_free", DAT_INVALID_HANDLE_PSP, 0, c_psp_free },
	{ "dat_rsp_free", DAT_INVALID_HANDLE_RSP, 0, c_rsp_free },
	{ "dat_cr_reject", DAT_INVALID_HANDLE_CR, 0, c_cr_reject },
	{ "dat_cno_free", DAT_INVALID_HANDLE_CNO, 0, c_cno_free },
	{ "dat_srq_free", DAT_INVALID_HANDLE_SRQ, 0, c_srq_free },
	{ "dat_set_consumer_context", DAT_INVALID_HANDLE1, 1, c_set_ctx },
	{ "dat_get_consumer_context", DAT_INVALID_HANDLE1, 1, c_get_ctx },
	{ "dat_get_handle_type", DAT_INVALID_HANDLE1, 1, c_get_type },
	{ "dat_extension_op", DAT_INVALID_HANDLE1, 1, c_ext_op },
};

struct bad_arg { const struct bad_call *call; DAT_HANDLE h; };
static DAT_RETURN call_bad(void *p)
{
	const struct bad_arg *a = p;
	return a->call->fn(a->h);
}

/* Runs every call with `h` (each in its own grandchild) and expects the
 * call's DAT_INVALID_HANDLE minor; `ia_only` limits it to calls that take IAs. */
static void bad_handle_matrix(const char *label, DAT_HANDLE h, int ia_only)
{
	for (size_t i = 0; i < COUNT(bad_calls); i++) {
		struct bad_arg a = { &bad_calls[i], h };
		struct isolated res;
		char what[200];
		int crashed;

		if (ia_only && !bad_calls[i].takes_ia)
			continue;
		snprintf(what, sizeof(what), "%s(%s %p)", bad_calls[i].name, label, h);
		res = run_isolated(call_bad, &a, what, &crashed);
		if (crashed) {
			fail("%s: crashed with signal %d (%s), expected %s", what, crashed, strsignal(crashed),
			     describe(BAD_HANDLE(bad_calls[i].minor)));
			continue;
		}
		CHECK_RC(res.rc, BAD_HANDLE(bad_calls[i].minor), what);
		CHECK(res.forwarded == 0, "%s: the mock was called with a bad handle (%ld times)", what, res.forwarded);
	}
}

static const char *BAD_CONF = MOCK_LINE("m0", "u2.0", "nonthreadsafe", "");

static void case_bad_handles(void)
{
	static uint64_t garbage[4] __attribute__((aligned(16))) = { 0xdeadbeefcafef00dull, 0, 0, 0 };
	static uint64_t misaligned_buf[4] __attribute__((aligned(16)));
	static DAT_PROVIDER lookalike_table;
	static struct { void *table; uint64_t rest[3]; } lookalike;
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz = NULL;
	void *table;

	use_conf(BAD_CONF);
	ia = must_open("m0"); /* a live provider, so the registry has a table registered */
	if (!ia)
		return;
	CHECK_RC(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create");
	table = mock_symbol("mock_provider_table");
	if (table)
		memcpy(&lookalike_table, table, sizeof(lookalike_table));
	lookalike.table = &lookalike_table;
	/* misaligned, but its first (unaligned) word is the real table */
	memcpy((char *)misaligned_buf + 4, &table, sizeof(table));

	bad_handle_matrix("NULL", NULL, 0);
	bad_handle_matrix("garbage-first-word", garbage, 0);
	bad_handle_matrix("copy-of-table", &lookalike, 0);
	bad_handle_matrix("misaligned", (char *)misaligned_buf + 4, 0);
	bad_handle_matrix("never-opened-small-int", (DAT_HANDLE)(uintptr_t)0x4321, 1);
	bad_handle_matrix("never-opened-small-int", (DAT_HANDLE)(uintptr_t)0xFFFF, 1);
	if (pz)
		CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	must_close(ia);
	bad_handle_matrix("closed-IA", ia, 1);
}

/* Small-integer values are consumer IA handles, never objects; a call
 * that takes an object handle must refuse them without dereferencing. */
static void small_int_row(const char *label, DAT_HANDLE h)
{
	char crashed_calls[1024] = "";
	int n_crashed = 0, sig = 0;

	for (size_t j = 0; j < COUNT(bad_calls); j++) {
		struct bad_arg a = { &bad_calls[j], h };
		struct isolated res;
		char what[200];
		int crashed;

		if (bad_calls[j].takes_ia)
			continue;
		snprintf(what, sizeof(what), "%s(%s %p)", bad_calls[j].name, label, h);
		res = run_isolated(call_bad, &a, what, &crashed);
		if (crashed) {
			size_t len = strlen(crashed_calls);
			snprintf(crashed_calls + len, sizeof(crashed_calls) - len, "%s%s", n_crashed ? ", " : "", bad_calls[j].name);
			n_crashed++;
			sig = crashed;
			continue;
		}
		CHECK_RC(res.rc, BAD_HANDLE(bad_calls[j].minor), what);
	}
	if (n_crashed)
		fail("%d object calls crashed (signal %d, %s) on %s %p instead of returning "
		     "DAT_INVALID_HANDLE/<their minor>: %s", n_crashed, sig, strsignal(sig), label, h, crashed_calls);
}

static void case_small_int_object_handles(void)
{
	DAT_IA_HANDLE ia;
	uintptr_t values[] = { 0x8, 0x10, 0x1000, 0xFFF8 };

	use_conf(BAD_CONF);
	DAT_IA_HANDLE first = ia = must_open("m0");
	if (!ia)
		return;
	for (size_t i = 0; i < COUNT(values); i++)
		small_int_row("small int", (DAT_HANDLE)values[i]);
	/* a live consumer IA handle passed where an object is expected: open
	 * more IAs until one has an 8-byte-aligned value (handles are 1, 2, ...) */
	DAT_IA_HANDLE extra[16];
	int n_extra = 0;
	small_int_row("live consumer IA handle", ia);
	while (((uintptr_t)ia & 7) != 0 && n_extra < 16) {
		ia = extra[n_extra++] = must_open("m0");
		if (!ia)
			break;
	}
	if (ia && ((uintptr_t)ia & 7) == 0)
		small_int_row("live aligned consumer IA handle", ia);
	while (n_extra > 0)
		must_close(extra[--n_extra]);
	must_close(first);
}

/* ------------------------------------------------------------------ */
/* Cases: concurrency, long names                                     */

#define THREADS 8
#define ROUNDS 200

static unsigned char live[0x10000];
static int thread_errors;

static void *churn(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		DAT_IA_HANDLE ia = SENTINEL_IA, pia = NULL;
		DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
		DAT_PROVIDER_ATTR pattr;
		DAT_RETURN r = dat_ia_open("mt", 8, &evd, &ia);

		if (r != DAT_SUCCESS) {
			fail("thread open #%d: expected %s, got %s", i, describe(DAT_SUCCESS), describe(r));
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (!is_small(ia)) {
			fail("thread open #%d: handle %p not in 1..0xFFFF", i, ia);
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_SEQ_CST);
		} else if (__atomic_exchange_n(&live[(uintptr_t)ia], 1, __ATOMIC_SEQ_CST) != 0) {
			fail("thread open #%d: handle %p given to two live IAs", i, ia);
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_SEQ_CST);
		}
		memset(&pattr, 0, sizeof(pattr));
		r = dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pattr);
		if (r != DAT_SUCCESS || strcmp(pattr.provider_name, "mt") != 0) {
			fail("thread query #%d on %p: expected %s, got %s (provider \"%.32s\")", i, ia,
			     describe(DAT_SUCCESS), describe(r), pattr.provider_name);
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_SEQ_CST);
		}
		r = dats_get_ia_handle(ia, &pia);
		if (r != DAT_SUCCESS || pia == NULL || *(void **)pia != mock_symbol("mock_provider_table")) {
			fail("thread dats_get_ia_handle #%d on %p: %s, provider IA %p", i, ia, describe(r), pia);
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_SEQ_CST);
		}
		if (is_small(ia))
			__atomic_store_n(&live[(uintptr_t)ia], 0, __ATOMIC_SEQ_CST);
		r = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
		if (r != DAT_SUCCESS) {
			fail("thread close #%d of %p: expected %s, got %s", i, ia, describe(DAT_SUCCESS), describe(r));
			__atomic_add_fetch(&thread_errors, 1, __ATOMIC_SEQ_CST);
		}
		if (thread_errors > 20)
			break;
	}
	return NULL;
}

static void run_threads(void)
{
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, churn, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
}

static const char *MT_CONF = MOCK_LINE("mt", "u2.0", "nonthreadsafe", "");

static void case_threads_open_close(void)
{
	long init, fini;

	use_conf(MT_CONF);
	/* load the mock first so counters and the table symbol resolve in threads */
	must_close(must_open("mt"));
	run_threads();
	CHECK_EQ_INT(thread_errors, 0, "errors in the threads");
	CHECK_EQ_INT(mock_counter("mock_open_ias"), 0, "mock IAs open after all threads closed theirs");
	init = mock_counter("mock_init_calls");
	fini = mock_counter("mock_fini_calls");
	CHECK(init >= 2 && init == fini, "init/fini calls %ld/%ld: expected equal (every init finalised), at least 2", init, fini);
	CHECK_EQ_INT(mock_counter("mock_registered"), 0, "registrations held at the end");
	CHECK_EQ_INT(mock_counter("mock_dead_calls"), 0, "calls forwarded to closed mock objects");
	CHECK_EQ_INT(mock_counter("mock_bad_handle_calls"), 0, "calls the mock saw with foreign handles");
	CHECK_EQ_INT(mock_counter("mock_add_failures"), 0, "dat_registry_add_provider failures");
}

static void case_threads_with_pinned_ia(void)
{
	DAT_IA_HANDLE pin;

	use_conf(MT_CONF);
	pin = must_open("mt");
	run_threads();
	CHECK_EQ_INT(thread_errors, 0, "errors in the threads");
	CHECK_EQ_INT(mock_counter("mock_open_ias"), 1, "mock IAs open (the pinned one)");
	CHECK_EQ_INT(mock_counter("mock_init_calls"), 1, "init calls while one IA stayed open");
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 0, "fini calls while one IA stayed open");
	must_close(pin);
	CHECK_EQ_INT(mock_counter("mock_fini_calls"), 1, "fini calls after the pinned IA closed");
	CHECK_EQ_INT(mock_counter("mock_dead_calls"), 0, "calls forwarded to closed mock objects");
}

static void case_long_names(void)
{
	char n255[256], n256[257], n300[301], conf[2048];
	DAT_PROVIDER_INFO info, *p = &info;
	DAT_COUNT n = -1;

	memset(n255, 'a', 255); n255[255] = 0;
	memset(n256, 'b', 256); n256[256] = 0;
	memset(n300, 'c', 300); n300[300] = 0;
	snprintf(conf, sizeof(conf),
		 "%s u2.0 nonthreadsafe default @MOCK@ mock.2.0 \"\" \"\"\n"
		 "%s u2.0 nonthreadsafe default @MOCK@ mock.2.0 \"\" \"\"\n"
		 "%s u2.0 nonthreadsafe default @MOCK@ mock.2.0 \"\" \"\"\n", n255, n256, n300);
	use_conf(conf);
	expect_open_fails(n300, NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	expect_open_fails(n256, NOT_FOUND(DAT_NAME_NOT_REGISTERED));
	CHECK_EQ_INT(count_providers(), 1, "entries: only the 255-byte name fits DAT_PROVIDER_INFO.ia_name");
	fill_sentinel(&info);
	CHECK_RC(dat_registry_list_providers(1, &n, &p), DAT_SUCCESS, "list(max=1)");
	CHECK(strcmp(info.ia_name, n255) == 0, "255-byte name listed as %zu bytes", strnlen(info.ia_name, sizeof(info.ia_name)));
	must_close(must_open(n255));
}

/* ------------------------------------------------------------------ */
/* Runner                                                             */

struct test_case { const char *name; void (*fn)(void); };
static const struct test_case cases[] = {
	{ "list_providers", case_list_providers },
	{ "list_null_array", case_list_null_array },
	{ "list_empty_conf", case_list_empty_conf },
	{ "broken_lines_logged", case_broken_lines_do_not_block },
	{ "broken_lines_open_each_good", case_broken_lines_open_each_good },
	{ "open_unknown_name", case_open_unknown_name },
	{ "open_null_args", case_open_null_args },
	{ "missing_library", case_missing_library },
	{ "not_a_provider", case_not_a_provider },
	{ "init_does_not_register", case_init_does_not_register },
	{ "provider_open_fails", case_provider_open_fails },
	{ "version_mismatch", case_version_mismatch },
	{ "version_compatible", case_version_compatible },
	{ "override_honoured", case_override_honoured },
	{ "override_unset", case_override_unset },
	{ "override_missing_file", case_override_missing_file },
	{ "override_is_directory", case_override_is_directory },
	{ "strerror", case_strerror },
	{ "ia_handle_small_int", case_ia_handle_small_int },
	{ "ia_query_translation", case_ia_query_translation },
	{ "pz_lifecycle", case_pz_lifecycle },
	{ "close_semantics", case_close_semantics },
	{ "close_by_provider_handle", case_close_by_provider_handle },
	{ "not_implemented", case_not_implemented },
	{ "extension_op", case_extension_op },
	{ "init_fini_counts", case_init_fini_counts },
	{ "bad_handles", case_bad_handles },
	{ "small_int_object_handles", case_small_int_object_handles },
	{ "threads_open_close", case_threads_open_close },
	{ "threads_with_pinned_ia", case_threads_with_pinned_ia },
	{ "long_names", case_long_names },
};

static int selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

static void remove_tree(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "registry_test: could not remove %s\n", dir);
}

static const char *case_log(const char *name)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s.log", g_dir, name);
	return path;
}

/* The first lines a failed case wrote to stderr, indented under its FAIL. */
static void show_log(const char *name)
{
	FILE *f = fopen(case_log(name), "r");
	char line[512];
	int n = 0;

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (++n > 40) {
			printf("  | ...\n");
			break;
		}
		printf("  | %s%s", line, strchr(line, '\n') ? "" : "\n");
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;
	int verbose = getenv("CTEST_VERBOSE") != NULL;
	const char *env = getenv("CTEST_MOCK");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (env && *env) {
		if (realpath(env, g_mock) == NULL) {
			fprintf(stderr, "registry_test: CTEST_MOCK=%s: %s\n", env, strerror(errno));
			return 2;
		}
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		char *slash;

		if (n <= 0)
			return 2;
		exe[n] = 0;
		slash = strrchr(exe, '/');
		*slash = 0;
		snprintf(g_mock, sizeof(g_mock), "%.*s/libdatmock.so.2", (int)(sizeof(g_mock) - 20), exe);
	}
	if (access(g_mock, R_OK) != 0) {
		fprintf(stderr, "registry_test: mock provider %s: %s\n", g_mock, strerror(errno));
		return 2;
	}
	g_reexec = getenv("CTEST_REEXEC") != NULL;
	if (argc == 2 && strcmp(argv[1], "--list-count") == 0) {
		/* helper of override_unset: exit status = u-entry count (250+ = error) */
		DAT_COUNT n = -1;
		if (dat_registry_list_providers(0, &n, NULL) != DAT_SUCCESS)
			return 250;
		return n < 0 ? 251 : n > 249 ? 249 : n;
	}
	if (argc == 3 && strcmp(argv[1], "--exec") == 0 && getenv("CTEST_DIR")) {
		/* a case re-executed by set_override(): same stdout/stderr, same dir */
		snprintf(g_dir, sizeof(g_dir), "%s", getenv("CTEST_DIR"));
		for (size_t i = 0; i < COUNT(cases); i++)
			if (strcmp(cases[i].name, argv[2]) == 0) {
				g_case = cases[i].name;
				alarm(120);
				cases[i].fn();
				fflush(stdout);
				_exit(g_fails ? 1 : 0);
			}
		return 2;
	}
	snprintf(g_dir, sizeof(g_dir), "%s/ctest-registry.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(g_dir) == NULL) {
		fprintf(stderr, "registry_test: mkdtemp: %s\n", strerror(errno));
		return 2;
	}

	for (size_t i = 0; i < COUNT(cases); i++) {
		int status;
		pid_t pid;

		if (!selected(cases[i].name, argc, argv))
			continue;
		fflush(stdout);
		fflush(stderr);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			g_case = cases[i].name;
			if (!verbose) {
				/* keep the registry's log lines out of the report;
				 * shown below if the case fails */
				int fd = open(case_log(cases[i].name), O_CREAT | O_TRUNC | O_WRONLY, 0600);
				if (fd >= 0) {
					dup2(fd, 2);
					close(fd);
				}
			}
			alarm(120);
			cases[i].fn();
			fflush(stdout);
			_exit(g_fails ? 1 : 0);
		}
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %s\n", cases[i].name);
			passed++;
		} else {
			if (WIFSIGNALED(status))
				printf("FAIL %s: child killed by signal %d (%s)%s\n", cases[i].name, WTERMSIG(status),
				       strsignal(WTERMSIG(status)), WTERMSIG(status) == SIGALRM ? " - timed out" : "");
			failed++;
			if (!verbose)
				show_log(cases[i].name);
		}
	}
	if (getenv("CTEST_KEEP"))
		fprintf(stderr, "registry_test: dat.conf files kept in %s\n", g_dir);
	else
		remove_tree(g_dir);
	printf("ctest-registry: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
