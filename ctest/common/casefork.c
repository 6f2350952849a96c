/*
 * casefork.c - the fork-per-case runner and the shared checks; see
 * casefork.h.
 */
#include "casefork.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

const char *g_case = "?";
int g_case_index;
int g_fails;
int g_xfail;
char g_errpath[PATH_MAX + 64];

static const struct casefork *g_cf;
static char g_dir[PATH_MAX];

/* ------------------------------------------------------------------ */
/* Reporting                                                          */

void fail(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", g_case);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	g_fails++;
}

void note(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s note: ", g_cf ? g_cf->prog : "ctest");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

void fail_rc(DAT_RETURN want, DAT_RETURN got, const char *fmt, ...)
{
	char what[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	fail("%s: expected %s, got %s", what, describe(want), describe(got));
}

const char *describe(DAT_RETURN r)
{
	/* several per message (expected, got) */
	static char buf[8][200];
	static int next;
	char *b = buf[next++ & 7];
	const char *ma = NULL, *mi = NULL;

	if (r == DAT_SUCCESS) {
		snprintf(b, sizeof(buf[0]), "0x00000000 DAT_SUCCESS");
	} else {
		if (dat_strerror(r, &ma, &mi) != DAT_SUCCESS)
			ma = mi = NULL;
		snprintf(b, sizeof(buf[0]), "0x%08x %s%s%s", (unsigned)r, ma ? ma : "?",
			 DAT_GET_SUBTYPE(r) ? "/" : "", DAT_GET_SUBTYPE(r) ? (mi && *mi ? mi : "?") : "");
	}
	if (g_cf && g_cf->describe_more)
		g_cf->describe_more(r, b, sizeof(buf[0]));
	return b;
}

const char *event_name(DAT_EVENT_NUMBER n)
{
	static char b[4][32];
	static int next;

	switch (n) {
	case DAT_DTO_COMPLETION_EVENT: return "DTO_COMPLETION";
	case DAT_RMR_BIND_COMPLETION_EVENT: return "RMR_BIND_COMPLETION";
	case DAT_CONNECTION_REQUEST_EVENT: return "CONNECTION_REQUEST";
	case DAT_CONNECTION_EVENT_ESTABLISHED: return "CONNECTION_ESTABLISHED";
	case DAT_CONNECTION_EVENT_PEER_REJECTED: return "CONNECTION_PEER_REJECTED";
	case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "CONNECTION_NON_PEER_REJECTED";
	case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "ACCEPT_COMPLETION_ERROR";
	case DAT_CONNECTION_EVENT_DISCONNECTED: return "CONNECTION_DISCONNECTED";
	case DAT_CONNECTION_EVENT_BROKEN: return "CONNECTION_BROKEN";
	case DAT_CONNECTION_EVENT_TIMED_OUT: return "CONNECTION_TIMED_OUT";
	case DAT_CONNECTION_EVENT_UNREACHABLE: return "CONNECTION_UNREACHABLE";
	case DAT_ASYNC_ERROR_EVD_OVERFLOW: return "ASYNC_ERROR_EVD_OVERFLOW";
	case DAT_ASYNC_ERROR_IA_CATASTROPHIC: return "ASYNC_ERROR_IA_CATASTROPHIC";
	case DAT_ASYNC_ERROR_EP_BROKEN: return "ASYNC_ERROR_EP_BROKEN";
	case DAT_ASYNC_ERROR_TIMED_OUT: return "ASYNC_ERROR_TIMED_OUT";
	case DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: return "ASYNC_ERROR_PROVIDER_INTERNAL_ERROR";
	case DAT_SOFTWARE_EVENT: return "SOFTWARE_EVENT";
	default: {
		/* "expected X, got Y" names two */
		char *s = b[next++ & 3];
		snprintf(s, sizeof(b[0]), "event 0x%x", (unsigned)n);
		return s;
	}
	}
}

const char *dto_status_name(DAT_DTO_COMPLETION_STATUS s)
{
	static const char *names[] = {
		"DAT_DTO_SUCCESS", "DAT_DTO_ERR_FLUSHED", "DAT_DTO_ERR_LOCAL_LENGTH", "DAT_DTO_ERR_LOCAL_EP",
		"DAT_DTO_ERR_LOCAL_PROTECTION", "DAT_DTO_ERR_BAD_RESPONSE", "DAT_DTO_ERR_REMOTE_ACCESS",
		"DAT_DTO_ERR_REMOTE_RESPONDER", "DAT_DTO_ERR_TRANSPORT", "DAT_DTO_ERR_RECEIVER_NOT_READY",
		"DAT_DTO_ERR_PARTIAL_PACKET", "DAT_RMR_OPERATION_FAILED", "DAT_DTO_ERR_LOCAL_MM_ERROR",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown DTO status";
}

const char *env_or(const char *var, const char *dflt)
{
	const char *v = getenv(var);

	return v && *v ? v : dflt;
}

int qual_base(const char *var, int preferred, int span)
{
	const char *v = getenv(var);
	int lo = 0, hi = -1;
	FILE *f;

	if (v && *v)
		return atoi(v);
	f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2)
			hi = -1;
		fclose(f);
	}
	if (preferred + span <= lo || preferred > hi)
		return preferred;
	/* Above 1024 (no privilege needed) and below the range, else above it. */
	if (lo - span >= 1024)
		return lo - span;
	if (hi + 1 + span <= 65536)
		return hi + 1;
	return preferred;
}

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void *must_alloc(size_t n)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, n ? n : 1) != 0) {
		fail("posix_memalign(%zu) failed", n);
		exit(1);
	}
	memset(p, 0, n);
	return p;
}

/* ------------------------------------------------------------------ */
/* Runner                                                             */

/* <ENV>_<suffix>, e.g. PT_VERBOSE */
static const char *prog_env(const char *suffix)
{
	char var[64];

	snprintf(var, sizeof(var), "%s_%s", g_cf->env, suffix);
	return getenv(var);
}

/* The `# stat ` lines (stats) or the others of a captured file. */
static void print_indented(const char *path, const char *prefix, int stats)
{
	char line[4096];
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		int is_stat = strncmp(line, "# stat ", 7) == 0;
		if (is_stat != stats)
			continue;
		printf("%s%s%s", prefix, line, strchr(line, '\n') ? "" : "\n");
	}
	fclose(f);
}

static void print_time(double t0)
{
	if (g_cf->timed)
		printf(" (%.1f s)", now_s() - t0);
}

/* Runs one case in a child: 1 if it passed, 2 if only as g_xfail, else 0. */
static int run_case(const struct tcase *c, int index)
{
	char outpath[PATH_MAX + 64], errpath[PATH_MAX + 64];
	const char *v = prog_env("VERBOSE");
	int status, verbose = v && *v;
	double t0 = now_s();
	pid_t pid;

	snprintf(outpath, sizeof(outpath), "%s/%s.out", g_dir, c->name);
	snprintf(errpath, sizeof(errpath), "%s/%s.stderr", g_dir, c->name);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		printf("FAIL %s\n  fork: %s\n", c->name, strerror(errno));
		return 0;
	}
	if (pid == 0) {
		int fd = open(outpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		if (fd < 0)
			_exit(3);
		dup2(fd, 1);
		close(fd);
		if (!verbose) {
			fd = open(errpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
			if (fd < 0)
				_exit(3);
			dup2(fd, 2);
			close(fd);
			snprintf(g_errpath, PATH_MAX + 64, "%s", errpath);
		}
		setvbuf(stdout, NULL, _IOLBF, 0);
		if (g_cf->own_group)
			setpgid(0, 0);
		g_case = c->name;
		g_case_index = index;
		alarm(g_cf->timeout_s);
		c->fn();
		if (g_fails == 0 && g_cf->passed)
			g_cf->passed();
		fflush(stdout);
		fflush(stderr);
		_exit(g_fails ? 1 : g_xfail ? 4 : 0);
	}
	waitpid(pid, &status, 0);
	if (g_cf->own_group)
		kill(-pid, SIGKILL);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok   %s", c->name);
		print_time(t0);
		printf("\n");
		print_indented(outpath, "", 1);
		return 1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 4 && g_cf->xfail_ok) {
		printf("ok   %s", c->name);
		print_time(t0);
		printf(" # %s\n", g_cf->xfail_ok);
		print_indented(outpath, "  ", 0);
		return 2;
	}
	printf("FAIL %s", c->name);
	print_time(t0);
	printf("\n");
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		printf("  %s: crashed with signal %d (%s)", c->name, sig, strsignal(sig));
		if (sig == SIGALRM)
			printf(g_cf->timeout_says_secs ? ": timed out after %u s" : ": timed out", g_cf->timeout_s);
		printf("\n");
	} else if (WEXITSTATUS(status) != 1) {
		printf("  %s: exited with status %d\n", c->name, WEXITSTATUS(status));
	}
	print_indented(outpath, "  ", 0);
	if (!verbose)
		print_indented(errpath, "  | ", 0);
	return 0;
}

int casefork_unknown(const struct tcase *cases, int n, int argc, char **argv, int first)
{
	for (int a = first; a < argc; a++) {
		int i;
		for (i = 0; i < n && strcmp(cases[i].name, argv[a]) != 0; i++)
			;
		if (i == n) {
			fprintf(stderr, "%s: no case named %s (-l lists them)\n", argv[0], argv[a]);
			return 1;
		}
	}
	return 0;
}

int casefork_main(const struct casefork *cf, const struct tcase *cases, int n, int argc, char **argv, int first)
{
	int passed = 0, failed = 0, limited = 0;

	g_cf = cf;
	if (casefork_unknown(cases, n, argc, argv, first))
		return 2;
	snprintf(g_dir, sizeof(g_dir), "%s/%s.XXXXXX", env_or("TMPDIR", "/tmp"), cf->prog);
	if (mkdtemp(g_dir) == NULL) {
		fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	cf->header();
	for (int i = 0; i < n; i++) {
		int want = first >= argc ? (!cf->ref || cases[i].ref) : 0;
		for (int a = first; a < argc; a++)
			want |= strcmp(argv[a], cases[i].name) == 0;
		if (!want)
			continue;
		int r = run_case(&cases[i], i);
		passed += r != 0;
		failed += r == 0;
		limited += r == 2;
	}
	if (limited)
		printf("# %d case(s) %s\n", limited, cf->xfail_total);
	printf("%s%s: %d passed, %d failed\n", cf->label, cf->ref ? "-reference" : "", passed, failed);
	if (!prog_env("KEEP")) {
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", g_dir);
	} else {
		printf("# kept %s\n", g_dir);
	}
	return failed ? 1 : 0;
}
