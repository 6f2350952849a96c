/*
 * harness.c - runner and shared helpers of the conformance suite; see
 * harness.h.
 *
 * usage: conformance [-R] [-l] [case...]     (no case: all; -R only the
 *        cases flagged for the reference registry)
 * env:   CONF_IA (default ibv-netdev), CONF_IA2 (ibv-devport), CONF_QUAL
 *        (49000, or the ports just below the ephemeral range if it holds
 *        them), CONF_VERBOSE=1 (stderr not captured), CONF_TIMEOUT (per
 *        case seconds, default 240), CONF_KEEP=1.
 */
#include "harness.h"

#include <sys/wait.h>

const char *g_ia, *g_ia2;
int g_ref, g_qual_base;
struct stats g_stats;

/* ------------------------------------------------------------------ */
/* Reporting                                                          */

/* An isolated call that crashed (CRASHED) is no DAT code. */
static void describe_crashed(DAT_RETURN r, char *text, size_t size)
{
	if ((r & 0xff000000u) == 0x7f000000u)
		snprintf(text, size, "(crashed with signal %u, %s)", r & 0xff, strsignal((int)(r & 0xff)));
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

int want_dto(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_DTO_COMPLETION_EVENT_DATA *out, const char *what)
{
	int st = next_dto(evd, us, out, what);

	/* below 0: no completion, reported already; DAT_DTO_SUCCESS is 0 */
	if (st > 0)
		fail("%s: completed with %s", what, dto_status_name(st));
	return st == DAT_DTO_SUCCESS;
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

/* B's side on `ib_name`'s IA, or on A's when it is NULL. */
static int setup(struct pair *p, DAT_COUNT qlen, const DAT_EP_ATTR *attr, const char *ib_name)
{
	DAT_RETURN r;

	memset(p, 0, sizeof(*p));
	p->qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	p->ia = open_ia(g_ia);
	if (!p->ia)
		return 0;
	p->ib = ib_name ? open_ia(ib_name) : p->ia;
	if (!p->ib)
		return 0;
	p->pz = make_pz(p->ia);
	p->pzb = ib_name ? make_pz(p->ib) : p->pz;
	p->cr = make_evd(p->ib, 8, DAT_EVD_CR_FLAG);
	p->a.conn = make_evd(p->ia, 8, DAT_EVD_CONNECTION_FLAG);
	p->b.conn = make_evd(p->ib, 8, DAT_EVD_CONNECTION_FLAG);
	p->a.req = make_evd(p->ia, qlen, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	p->b.req = make_evd(p->ib, qlen, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG);
	p->a.recv = make_evd(p->ia, qlen, DAT_EVD_DTO_FLAG);
	p->b.recv = make_evd(p->ib, qlen, DAT_EVD_DTO_FLAG);
	if (!p->pz || !p->pzb || !p->cr || !p->a.conn || !p->b.conn || !p->a.req || !p->b.req || !p->a.recv || !p->b.recv)
		return 0;
	r = CALL(dat_ep_create(p->ia, p->pz, p->a.recv, p->a.req, p->a.conn, attr, &p->a.ep));
	if (r != DAT_SUCCESS) {
		fail("dat_ep_create(A): %s", describe(r));
		return 0;
	}
	r = CALL(dat_ep_create(p->ib, p->pzb, p->b.recv, p->b.req, p->b.conn, attr, &p->b.ep));
	if (r != DAT_SUCCESS) {
		fail("dat_ep_create(B): %s", describe(r));
		return 0;
	}
	return 1;
}

int pair_setup(struct pair *p, DAT_COUNT qlen, const DAT_EP_ATTR *attr)
{
	return setup(p, qlen, attr, NULL);
}

int pair_setup_apart(struct pair *p, DAT_COUNT qlen, const DAT_EP_ATTR *attr)
{
	return setup(p, qlen, attr, g_ia2);
}

int pair_connect(struct pair *p)
{
	struct sockaddr_in self;
	DAT_EVENT ev;
	DAT_RETURN r;

	if (!self_addr(p->ib, &self))
		return 0;
	r = CALL(dat_psp_create(p->ib, p->qual, p->cr, DAT_PSP_CONSUMER_FLAG, &p->psp));
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
	if (p->ib && p->ib != p->ia)
		close_ia(p->ib, DAT_CLOSE_ABRUPT_FLAG, "pair teardown, B's IA (ABRUPT)");
	if (p->ia)
		close_ia(p->ia, DAT_CLOSE_ABRUPT_FLAG, "pair teardown (ABRUPT)");
	p->ia = p->ib = NULL;
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
	const struct tcase *cases;
	const int *n;
};
static const struct area areas[] = {
	{ errors_cases, &errors_ncases },
	{ protection_cases, &protection_ncases },
	{ faults_cases, &faults_ncases },
	{ load_cases, &load_ncases },
	{ input_cases, &input_ncases },
	{ extensions_cases, &extensions_ncases },
	{ counters_cases, &counters_ncases },
	{ threads_cases, &threads_ncases },
	{ kills_cases, &kills_ncases },
	{ placement_cases, &placement_ncases },
	{ progress_cases, &progress_ncases },
	{ fastpath_cases, &fastpath_ncases },
};
#define NAREAS (sizeof(areas) / sizeof(areas[0]))

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
	printf("# stat %s threads %ld\n", g_case, g_stats.threads);
	printf("# stat %s kills %ld\n", g_case, g_stats.kills);
}

static void header(void)
{
	printf("# conformance%s: IA %s (second IA %s), conn_qual %d.., DAT_OVERRIDE=%s\n",
	       g_ref ? " (reference registry)" : "", g_ia, g_ia2, g_qual_base,
	       getenv("DAT_OVERRIDE") ? getenv("DAT_OVERRIDE") : "(unset)");
}

int main(int argc, char **argv)
{
	int opt, list = 0, n = 0, ntotal = 0;
	int limit = getenv("CONF_TIMEOUT") ? atoi(getenv("CONF_TIMEOUT")) : 240;
	struct tcase *all;

	g_ia = getenv("CONF_IA") && *getenv("CONF_IA") ? getenv("CONF_IA") : "ibv-netdev";
	g_ia2 = getenv("CONF_IA2") && *getenv("CONF_IA2") ? getenv("CONF_IA2") : "ibv-devport";
	while ((opt = getopt(argc, argv, "Rl")) != -1) {
		switch (opt) {
		case 'R': g_ref = 1; break;
		case 'l': list = 1; break;
		default:
			fprintf(stderr, "usage: %s [-R] [-l] [case...]\n", argv[0]);
			return 2;
		}
	}
	for (size_t k = 0; k < NAREAS; k++)
		ntotal += *areas[k].n;
	all = calloc((size_t)ntotal, sizeof(all[0]));
	if (all == NULL)
		return 2;
	for (size_t k = 0; k < NAREAS; k++) {
		memcpy(&all[n], areas[k].cases, (size_t)*areas[k].n * sizeof(all[0]));
		n += *areas[k].n;
	}
	/* Each case listens on up to 8 qualifiers from base + 8 * its index. */
	g_qual_base = qual_base("CONF_QUAL", 49000, 8 * ntotal);
	if (list) {
		if (casefork_unknown(all, n, argc, argv, optind))
			return 2;
		for (int i = 0; i < n; i++)
			printf("%s %s%s\n", all[i].area, all[i].name, all[i].ref ? " ref" : "");
		return 0;
	}
	/* Own process group: the helpers a case forks (load, faults) die with
	 * it on a timeout. */
	struct casefork cf = {
		.prog = "conformance", .env = "CONF", .label = "ctest-conformance", .ref = g_ref,
		.timeout_s = limit > 0 ? (unsigned)limit : 240, .timed = 1, .own_group = 1,
		.header = header, .passed = write_stats, .describe_more = describe_crashed,
	};
	return casefork_main(&cf, all, n, argc, argv, optind);
}
