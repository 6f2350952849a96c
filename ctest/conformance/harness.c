/*
 * harness.c - runner and shared helpers of the conformance suite; see
 * harness.h.
 *
 * usage: conformance [-R] [-l] [case...]     (no case: all; -R only the
 *        cases flagged for the reference registry)
 * env:   CONF_IA (default ibv-netdev), CONF_IA2 (ibv-devport), CONF_QUAL
 *        (49000), CONF_VERBOSE=1 (stderr not captured), CONF_TIMEOUT (per
 *        case seconds, default 240), CONF_KEEP=1.
 */
#include "harness.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

const char *g_ia, *g_ia2;
int g_ref, g_qual_base, g_case_index;
const char *g_case = "?";
int g_fails;
struct stats g_stats;
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

	fprintf(stderr, "conformance note: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

const char *describe(DAT_RETURN r)
{
	static char buf[8][200];
	static int next;
	char *b = buf[next++ & 7];
	const char *ma = NULL, *mi = NULL;

	if (r == DAT_SUCCESS) {
		snprintf(b, sizeof(buf[0]), "0x00000000 DAT_SUCCESS");
		return b;
	}
	if ((r & 0xff000000u) == 0x7f000000u) {
		snprintf(b, sizeof(buf[0]), "(crashed with signal %u, %s)", r & 0xff, strsignal((int)(r & 0xff)));
		return b;
	}
	if (dat_strerror(r, &ma, &mi) != DAT_SUCCESS)
		ma = mi = NULL;
	snprintf(b, sizeof(buf[0]), "0x%08x %s%s%s", (unsigned)r, ma ? ma : "?",
		 DAT_GET_SUBTYPE(r) ? "/" : "", DAT_GET_SUBTYPE(r) ? (mi && *mi ? mi : "?") : "");
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

/* The distinct dat_* names this case checked. */
#define MAX_COVER 128
static char g_cover[MAX_COVER][48];
static int g_ncover;

static void cover_one(const char *name, size_t n)
{
	char b[48];

	if (n == 0 || n >= sizeof(b))
		return;
	memcpy(b, name, n);
	b[n] = 0;
	/* dat_ia_open is the macro over dat_ia_openv */
	if (strcmp(b, "dat_ia_open") == 0)
		snprintf(b, sizeof(b), "dat_ia_openv");
	for (int i = 0; i < g_ncover; i++)
		if (strcmp(g_cover[i], b) == 0)
			return;
	if (g_ncover < MAX_COVER)
		snprintf(g_cover[g_ncover++], sizeof(g_cover[0]), "%s", b);
}

void cover_text(const char *text)
{
	const char *p = text;

	while ((p = strstr(p, "dat")) != NULL) {
		const char *s = p;
		if ((s == text || !(s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') || (s[-1] >= '0' && s[-1] <= '9'))) &&
		    (s[3] == '_' || (s[3] == 's' && s[4] == '_'))) {
			const char *e = s;
			while ((*e >= 'a' && *e <= 'z') || *e == '_' || (*e >= '0' && *e <= '9'))
				e++;
			const char *q = e;
			while (*q == ' ')
				q++;
			if (*q == '(')
				cover_one(s, (size_t)(e - s));
			p = e;
		} else {
			p += 3;
		}
	}
}

void cover(const char *names)
{
	const char *p = names;

	while (*p) {
		while (*p == ' ')
			p++;
		const char *e = p;
		while (*e && *e != ' ')
			e++;
		cover_one(p, (size_t)(e - p));
		p = e;
	}
}

int count_error(DAT_RETURN want)
{
	if (want != DAT_SUCCESS)
		g_stats.errors++;
	return 0;
}

DAT_RETURN isolated_fail_rc(void)
{
	return CRASHED(0);
}

DAT_RETURN isolated_rc(pid_t pid, int fd)
{
	DAT_RETURN r = CRASHED(0);
	int status = 0;

	if (pid < 0) {
		close(fd);
		return r;
	}
	if (read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		r = CRASHED(0);
	close(fd);
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		r = CRASHED(WTERMSIG(status));
	return r;
}

/* ------------------------------------------------------------------ */
/* DAT helpers                                                        */

DAT_IA_HANDLE open_ia(const char *name)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_RETURN r = CALL(dat_ia_open((DAT_NAME_PTR)name, 16, &evd, &ia));

	if (r != DAT_SUCCESS) {
		fail("dat_ia_open(\"%s\"): %s", name, describe(r));
		return NULL;
	}
	return ia;
}

void close_ia(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags, const char *what)
{
	DAT_RETURN r;

	if (ia == NULL)
		return;
	r = CALL(dat_ia_close(ia, flags));
	if (g_ref && r == NOT_FOUND(DAT_NAME_NOT_REGISTERED))
		return;	/* the reference's close lookup (see ctest/README.md) */
	CHECK(r == DAT_SUCCESS, "%s: dat_ia_close: %s", what, describe(r));
}

DAT_PZ_HANDLE make_pz(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	DAT_RETURN r = CALL(dat_pz_create(ia, &pz));

	if (r != DAT_SUCCESS) {
		fail("dat_pz_create: %s", describe(r));
		return NULL;
	}
	return pz;
}

DAT_EVD_HANDLE make_evd(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_RETURN r = CALL(dat_evd_create(ia, qlen, DAT_HANDLE_NULL, flags, &evd));

	if (r != DAT_SUCCESS) {
		fail("dat_evd_create(qlen %d, flags 0x%x): %s", qlen, (unsigned)flags, describe(r));
		return NULL;
	}
	return evd;
}

int self_addr(DAT_IA_HANDLE ia, struct sockaddr_in *out)
{
	DAT_IA_ATTR attr;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_RETURN r;

	memset(&attr, 0, sizeof(attr));
	r = CALL(dat_ia_query(ia, &evd, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL));
	if (r != DAT_SUCCESS || attr.ia_address_ptr == NULL || attr.ia_address_ptr->sa_family != AF_INET) {
		fail("dat_ia_query(IA_ADDRESS_PTR): %s", describe(r));
		return 0;
	}
	memcpy(out, attr.ia_address_ptr, sizeof(*out));
	return 1;
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

int mem_reg(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, size_t len, DAT_MEM_PRIV_FLAGS priv, struct mem *m)
{
	DAT_REGION_DESCRIPTION region;
	DAT_VLEN reg_len = 0;
	DAT_RETURN r;

	memset(m, 0, sizeof(*m));
	m->buf = must_alloc(len);
	m->len = len;
	memset(&region, 0, sizeof(region));
	region.for_va = m->buf;
	r = CALL(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, priv, DAT_VA_TYPE_VA, &m->lmr, &m->lkey,
				&m->rkey, &reg_len, &m->addr));
	if (r != DAT_SUCCESS) {
		fail("dat_lmr_create(%zu bytes, priv 0x%x): %s", len, (unsigned)priv, describe(r));
		return 0;
	}
	return 1;
}

DAT_LMR_TRIPLET triplet(const struct mem *m, size_t off, size_t len)
{
	DAT_LMR_TRIPLET t;

	t.virtual_address = m->addr + off;
	t.segment_length = len;
	t.lmr_context = m->lkey;
	return t;
}

DAT_RETURN wait_ev(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_EVENT *ev)
{
	DAT_COUNT nmore = 0;

	memset(ev, 0, sizeof(*ev));
	return CALL(dat_evd_wait(evd, us, 1, ev, &nmore));
}

static int is_error_event(DAT_EVENT_NUMBER n)
{
	return n != DAT_DTO_COMPLETION_EVENT && n != DAT_RMR_BIND_COMPLETION_EVENT && n != DAT_CONNECTION_REQUEST_EVENT &&
	       n != DAT_CONNECTION_EVENT_ESTABLISHED && n != DAT_SOFTWARE_EVENT && n != DAT_CONNECTION_EVENT_DISCONNECTED;
}

int expect_ev(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_EVENT_NUMBER want, DAT_EVENT *ev, const char *what)
{
	DAT_RETURN r = wait_ev(evd, us, ev);

	if (r != DAT_SUCCESS) {
		fail("%s: dat_evd_wait for %s: %s", what, event_name(want), describe(r));
		return 0;
	}
	if (ev->event_number != want) {
		fail("%s: expected %s, got %s", what, event_name(want), event_name(ev->event_number));
		return 0;
	}
	if (ev->evd_handle != evd)
		fail("%s: event evd_handle %p, expected %p", what, (void *)ev->evd_handle, (void *)evd);
	if (is_error_event(want))
		g_stats.errors++;
	return 1;
}

void expect_quiet(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, const char *what)
{
	DAT_EVENT ev;
	DAT_RETURN r = wait_ev(evd, us, &ev);

	if (r == DAT_SUCCESS)
		fail("%s: unexpected %s on the EVD", what, event_name(ev.event_number));
	else
		CHECK(r == DAT_ERROR(DAT_TIMEOUT_EXPIRED, 0), "%s: dat_evd_wait: expected DAT_TIMEOUT_EXPIRED, got %s",
		      what, describe(r));
}

int next_dto(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_DTO_COMPLETION_EVENT_DATA *out, const char *what)
{
	DAT_EVENT ev;

	if (!expect_ev(evd, us, DAT_DTO_COMPLETION_EVENT, &ev, what))
		return -1;
	*out = ev.event_data.dto_completion_event_data;
	if (out->status != DAT_DTO_SUCCESS)
		g_stats.errors++;
	return (int)out->status;
}

DAT_EP_ATTR small_attr(DAT_COUNT dtos, DAT_COUNT iov)
{
	DAT_EP_ATTR a;

	memset(&a, 0, sizeof(a));
	a.service_type = DAT_SERVICE_TYPE_RC;
	a.max_message_size = 1 << 20;
	a.max_rdma_size = 1 << 20;
	a.qos = DAT_QOS_BEST_EFFORT;
	a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.max_recv_dtos = dtos;
	a.max_request_dtos = dtos;
	a.max_recv_iov = iov;
	a.max_request_iov = iov;
	a.max_rdma_read_in = 4;
	a.max_rdma_read_out = 4;
	a.max_rdma_read_iov = 1;
	a.max_rdma_write_iov = iov;
	return a;
}

int pair_setup(struct pair *p, DAT_COUNT qlen, const DAT_EP_ATTR *attr)
{
	DAT_RETURN r;

	memset(p, 0, sizeof(*p));
	p->qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	p->ia = open_ia(g_ia);
	if (!p->ia)
		return 0;
	p->pz = make_pz(p->ia);
	p->cr = make_evd(p->ia, 8, DAT_EVD_CR_FLAG);
	p->a.conn = make_evd(p->ia, 8, DAT_EVD_CONNECTION_FLAG);
	p->b.conn = make_evd(p->ia, 8, DAT_EVD_CONNECTION_FLAG);
	p->a.req = make_evd(p->ia, qlen, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	p->b.req = make_evd(p->ia, qlen, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	p->a.recv = make_evd(p->ia, qlen, DAT_EVD_DTO_FLAG);
	p->b.recv = make_evd(p->ia, qlen, DAT_EVD_DTO_FLAG);
	if (!p->pz || !p->cr || !p->a.conn || !p->b.conn || !p->a.req || !p->b.req || !p->a.recv || !p->b.recv)
		return 0;
	r = CALL(dat_ep_create(p->ia, p->pz, p->a.recv, p->a.req, p->a.conn, attr, &p->a.ep));
	if (r != DAT_SUCCESS) {
		fail("dat_ep_create(A): %s", describe(r));
		return 0;
	}
	r = CALL(dat_ep_create(p->ia, p->pz, p->b.recv, p->b.req, p->b.conn, attr, &p->b.ep));
	if (r != DAT_SUCCESS) {
		fail("dat_ep_create(B): %s", describe(r));
		return 0;
	}
	return 1;
}

int pair_connect(struct pair *p)
{
	struct sockaddr_in self;
	DAT_EVENT ev;
	DAT_RETURN r;

	if (!self_addr(p->ia, &self))
		return 0;
	r = CALL(dat_psp_create(p->ia, p->qual, p->cr, DAT_PSP_CONSUMER_FLAG, &p->psp));
	if (r != DAT_SUCCESS) {
		fail("dat_psp_create(conn_qual %llu): %s", (unsigned long long)p->qual, describe(r));
		return 0;
	}
	r = CALL(dat_ep_connect(p->a.ep, (DAT_IA_ADDRESS_PTR)&self, p->qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT,
				DAT_CONNECT_DEFAULT_FLAG));
	if (r != DAT_SUCCESS) {
		fail("dat_ep_connect(A): %s", describe(r));
		return 0;
	}
	if (!expect_ev(p->cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "connect: CR EVD"))
		return 0;
	r = CALL(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p->b.ep, 0, NULL));
	if (r != DAT_SUCCESS) {
		fail("dat_cr_accept(B): %s", describe(r));
		return 0;
	}
	if (!expect_ev(p->b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "connect: B's connection EVD"))
		return 0;
	if (!expect_ev(p->a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "connect: A's connection EVD"))
		return 0;
	return 1;
}

int pair_open(struct pair *p)
{
	return pair_setup(p, 64, NULL) && pair_connect(p);
}

void pair_close(struct pair *p)
{
	if (p->ia)
		close_ia(p->ia, DAT_CLOSE_ABRUPT_FLAG, "pair teardown (ABRUPT)");
	p->ia = NULL;
}

int rdma_count(const char *kind, pid_t pid)
{
	char cmd[128], line[1024], want[32];
	int n = 0, any = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", kind);
	snprintf(want, sizeof(want), " pid %d ", (int)pid);
	fflush(stdout);
	fflush(stderr);
	f = popen(cmd, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		any = 1;
		if (strstr(line, want))
			n++;
	}
	if (pclose(f) != 0 && !any)
		return -1;
	return n;
}

double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

uint32_t checksum(const unsigned char *p, size_t n)
{
	uint32_t a = 1, b = 0;	/* Adler-32 */

	for (size_t i = 0; i < n; i++) {
		a = (a + p[i]) % 65521;
		b = (b + a) % 65521;
	}
	return (b << 16) | a;
}

/* ------------------------------------------------------------------ */
/* Runner                                                             */

struct area {
	const struct ccase *cases;
	const int *n;
};
static const struct area areas[] = {
	{ errors_cases, &errors_ncases },
	{ protection_cases, &protection_ncases },
	{ faults_cases, &faults_ncases },
	{ load_cases, &load_ncases },
	{ input_cases, &input_ncases },
	{ extensions_cases, &extensions_ncases },
};
#define NAREAS (sizeof(areas) / sizeof(areas[0]))

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

static void write_stats(void)
{
	printf("# stat %s calls", g_case);
	for (int i = 0; i < g_ncover; i++)
		printf(" %s", g_cover[i]);
	printf("\n");
	printf("# stat %s errors %ld\n", g_case, g_stats.errors);
	printf("# stat %s faults %ld\n", g_case, g_stats.faults);
	printf("# stat %s eps %ld\n", g_case, g_stats.eps);
	printf("# stat %s ops %ld\n", g_case, g_stats.ops);
	printf("# stat %s bytes %ld\n", g_case, g_stats.bytes);
	printf("# stat %s lost %ld\n", g_case, g_stats.lost);
	printf("# stat %s dup %ld\n", g_case, g_stats.dup);
}

static int run_case(const struct ccase *c, int index)
{
	char outpath[PATH_MAX + 64], errpath[PATH_MAX + 64];
	int status, verbose = getenv("CONF_VERBOSE") && *getenv("CONF_VERBOSE");
	int limit = getenv("CONF_TIMEOUT") ? atoi(getenv("CONF_TIMEOUT")) : 240;
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
		}
		setvbuf(stdout, NULL, _IOLBF, 0);
		/* own process group: the case's helpers die with it on a timeout */
		setpgid(0, 0);
		g_case = c->name;
		g_case_index = index;
		alarm(limit > 0 ? (unsigned)limit : 240);
		c->fn();
		if (g_fails == 0)
			write_stats();
		fflush(stdout);
		fflush(stderr);
		_exit(g_fails ? 1 : 0);
	}
	waitpid(pid, &status, 0);
	kill(-pid, SIGKILL);	/* any helper process the case left */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok   %s (%.1f s)\n", c->name, now_s() - t0);
		print_indented(outpath, "", 1);
		return 1;
	}
	printf("FAIL %s (%.1f s)\n", c->name, now_s() - t0);
	if (WIFSIGNALED(status))
		printf("  %s: crashed with signal %d (%s)%s\n", c->name, WTERMSIG(status), strsignal(WTERMSIG(status)),
		       WTERMSIG(status) == SIGALRM ? ": timed out" : "");
	else if (WEXITSTATUS(status) != 1)
		printf("  %s: exited with status %d\n", c->name, WEXITSTATUS(status));
	print_indented(outpath, "  ", 0);
	if (!verbose)
		print_indented(errpath, "  | ", 0);
	return 0;
}

int main(int argc, char **argv)
{
	int opt, passed = 0, failed = 0, list = 0, index = 0;

	g_ia = getenv("CONF_IA") && *getenv("CONF_IA") ? getenv("CONF_IA") : "ibv-netdev";
	g_ia2 = getenv("CONF_IA2") && *getenv("CONF_IA2") ? getenv("CONF_IA2") : "ibv-devport";
	g_qual_base = getenv("CONF_QUAL") ? atoi(getenv("CONF_QUAL")) : 49000;
	while ((opt = getopt(argc, argv, "Rl")) != -1) {
		switch (opt) {
		case 'R': g_ref = 1; break;
		case 'l': list = 1; break;
		default:
			fprintf(stderr, "usage: %s [-R] [-l] [case...]\n", argv[0]);
			return 2;
		}
	}
	for (int a = optind; a < argc; a++) {
		int found = 0;
		for (size_t k = 0; k < NAREAS; k++)
			for (int i = 0; i < *areas[k].n; i++)
				found |= strcmp(areas[k].cases[i].name, argv[a]) == 0;
		if (!found) {
			fprintf(stderr, "%s: no case named %s (-l lists them)\n", argv[0], argv[a]);
			return 2;
		}
	}
	if (list) {
		for (size_t k = 0; k < NAREAS; k++)
			for (int i = 0; i < *areas[k].n; i++)
				printf("%s %s%s\n", areas[k].cases[i].area, areas[k].cases[i].name,
				       areas[k].cases[i].ref ? " ref" : "");
		return 0;
	}
	snprintf(g_dir, sizeof(g_dir), "%s/conformance.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(g_dir) == NULL) {
		fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# conformance%s: IA %s (second IA %s), conn_qual %d.., DAT_OVERRIDE=%s\n",
	       g_ref ? " (reference registry)" : "", g_ia, g_ia2, g_qual_base,
	       getenv("DAT_OVERRIDE") ? getenv("DAT_OVERRIDE") : "(unset)");
	for (size_t k = 0; k < NAREAS; k++) {
		for (int i = 0; i < *areas[k].n; i++, index++) {
			const struct ccase *c = &areas[k].cases[i];
			int want = optind >= argc ? (!g_ref || c->ref) : 0;
			for (int a = optind; a < argc; a++)
				want |= strcmp(argv[a], c->name) == 0;
			if (!want)
				continue;
			if (run_case(c, index))
				passed++;
			else
				failed++;
		}
	}
	printf("%s: %d passed, %d failed\n", g_ref ? "ctest-conformance-reference" : "ctest-conformance", passed, failed);
	if (!getenv("CONF_KEEP")) {
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", g_dir);
	} else {
		printf("# kept %s\n", g_dir);
	}
	return failed ? 1 : 0;
}
