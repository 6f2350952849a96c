/*
 * load.c - many connections, many threads, a bounded soak.
 *
 * A server process (forked before any DAT call) accepts CONF_LOAD_EPS (256)
 * connections on one PSP and echoes every message back on the EP it came
 * from, checking each message's checksum and per-EP sequence number.  The
 * client connects as many EPs, then 8 poster threads each own 1/8 of the
 * EPs and keep WIN messages in flight per EP for CONF_SOAK_SECS (60 s,
 * at most 120); one reaper thread per EVD (send completions, receives)
 * checks every completion: echoes compared byte by byte with what was sent,
 * and per EP the sends posted, completed and echoed must match exactly,
 * in order: nothing lost, nothing duplicated.
 */
#include "harness.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define MSG      256
#define WIN      4
#define POSTERS  8
#define BYE_SEQ  0xffffffffu

struct msg {
	uint32_t ep, seq, sum, pad;
	unsigned char payload[MSG - 16];
};

static void fill_msg(struct msg *m, uint32_t ep, uint32_t seq)
{
	uint64_t x = ((uint64_t)ep << 32 | seq) * 0x9e3779b97f4a7c15ull + 1;

	m->ep = ep;
	m->seq = seq;
	m->pad = 0;
	for (size_t i = 0; i < sizeof(m->payload); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		m->payload[i] = (unsigned char)x;
	}
	m->sum = checksum(m->payload, sizeof(m->payload));
}

static int load_eps(void)
{
	int n = getenv("CONF_LOAD_EPS") ? atoi(getenv("CONF_LOAD_EPS")) : 256;

	return n < 8 ? 8 : n > 1024 ? 1024 : n;
}

static int soak_secs(void)
{
	int n = getenv("CONF_SOAK_SECS") ? atoi(getenv("CONF_SOAK_SECS")) : 60;

	return n < 1 ? 1 : n > 120 ? 120 : n;
}

/* ------------------------------------------------------------------ */
/* Server                                                             */

struct srv_report {
	long received, bad_sum, bad_seq, byes, accepted;
};

static void server_main(DAT_CONN_QUAL qual, int neps, int ready, int report)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr, conn, req, recv;
	DAT_PZ_HANDLE pz;
	DAT_PSP_HANDLE psp;
	DAT_EP_HANDLE *eps = calloc((size_t)neps, sizeof(*eps));
	uint32_t *next = calloc((size_t)neps, sizeof(*next));
	uint32_t *peer = malloc((size_t)neps * sizeof(*peer));	/* client EP index behind each server EP */
	DAT_EVENT ev;
	DAT_COUNT nm;
	struct mem rm, sm;
	DAT_EP_ATTR attr = small_attr(WIN * 2, 1);
	struct srv_report rep = { 0, 0, 0, 0, 0 };
	int established = 0;

	memset(peer, 0xff, (size_t)neps * sizeof(*peer));

	if (dat_ia_open((DAT_NAME_PTR)g_ia, 8, &async, &ia) || dat_pz_create(ia, &pz) ||
	    dat_evd_create(ia, neps + 8, NULL, DAT_EVD_CR_FLAG, &cr) ||
	    dat_evd_create(ia, neps * 2 + 8, NULL, DAT_EVD_CONNECTION_FLAG, &conn) ||
	    dat_evd_create(ia, neps * WIN * 2 + 64, NULL, DAT_EVD_DTO_FLAG, &req) ||
	    dat_evd_create(ia, neps * WIN * 2 + 64, NULL, DAT_EVD_DTO_FLAG, &recv) ||
	    !mem_reg(ia, pz, (size_t)neps * WIN * MSG, DAT_MEM_PRIV_ALL_FLAG, &rm) ||
	    !mem_reg(ia, pz, (size_t)neps * WIN * MSG, DAT_MEM_PRIV_ALL_FLAG, &sm) ||
	    dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp)) {
		fprintf(stderr, "load server: setup failed\n");
		_exit(3);
	}
	if (write(ready, "R", 1) != 1)
		_exit(3);
	/* accept every connection */
	while (rep.accepted < neps) {
		if (dat_evd_wait(cr, 120 * SEC, 1, &ev, &nm) != DAT_SUCCESS) {
			fprintf(stderr, "load server: no request for 120 s after %ld\n", rep.accepted);
			_exit(3);
		}
		int i = (int)rep.accepted;
		DAT_CONTEXT c = { .as_64 = (uint64_t)i };
		if (dat_ep_create(ia, pz, recv, req, conn, &attr, &eps[i]) || dat_set_consumer_context(eps[i], c)) {
			fprintf(stderr, "load server: dat_ep_create %d failed\n", i);
			_exit(3);
		}
		for (int w = 0; w < WIN; w++) {
			DAT_LMR_TRIPLET t = triplet(&rm, ((size_t)i * WIN + w) * MSG, MSG);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i * WIN + w };
			if (dat_ep_post_recv(eps[i], 1, &t, ck, 0)) {
				fprintf(stderr, "load server: post_recv failed\n");
				_exit(3);
			}
		}
		if (dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, eps[i], 0, NULL)) {
			fprintf(stderr, "load server: dat_cr_accept %d failed\n", i);
			_exit(3);
		}
		rep.accepted++;
		while (dat_evd_dequeue(conn, &ev) == DAT_SUCCESS)
			established += ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED;
	}
	/* echo until every EP said goodbye */
	while (rep.byes < neps) {
		while (dat_evd_dequeue(req, &ev) == DAT_SUCCESS)
			;
		if (dat_evd_wait(recv, 60 * SEC, 1, &ev, &nm) != DAT_SUCCESS) {
			fprintf(stderr, "load server: no message for 60 s (%ld received, %ld byes)\n", rep.received, rep.byes);
			break;
		}
		DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
		if (d->status != DAT_DTO_SUCCESS) {
			fprintf(stderr, "load server: receive status %d\n", (int)d->status);
			break;
		}
		uint64_t slot = d->user_cookie.as_64;
		int i = (int)(slot / WIN);
		struct msg *m = (struct msg *)(rm.buf + slot * MSG);
		rep.received++;
		if (m->seq == BYE_SEQ) {
			rep.byes++;
			continue;
		}
		if (peer[i] == 0xffffffffu)
			peer[i] = m->ep;
		if (m->sum != checksum(m->payload, sizeof(m->payload)) || m->ep != peer[i])
			rep.bad_sum++;
		if (m->seq != next[i]++)
			rep.bad_seq++;
		memcpy(sm.buf + slot * MSG, m, MSG);
		DAT_LMR_TRIPLET t = triplet(&sm, slot * MSG, MSG);
		if (dat_ep_post_send(eps[i], 1, &t, d->user_cookie, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
			rep.bad_seq++;
		t = triplet(&rm, slot * MSG, MSG);
		if (dat_ep_post_recv(eps[i], 1, &t, d->user_cookie, 0) != DAT_SUCCESS)
			rep.bad_seq++;
	}
	if (write(report, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		_exit(3);
	dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* Client                                                             */

struct ep_state {
	DAT_EP_HANDLE ep;
	atomic_int credits;		/* sends allowed now (echoes outstanding < WIN) */
	uint32_t posted;		/* by its poster thread only */
	atomic_uint send_done;		/* send completions, checked in order */
	atomic_uint echoed;		/* echoes, checked in order */
	atomic_uint recv_posted, recv_done;	/* every receive completes once: echo or flush */
	int bye;
};

struct load {
	int neps;
	struct ep_state *eps;
	struct mem rm, sm;
	DAT_EVD_HANDLE req, recv;
	atomic_int stop_posting, stop_reaping, closing, byes_left;
	atomic_long bad, dup, lost, bytes, ops, errors;
	char first_error[256];
	pthread_mutex_t err_lock;
	int poster_index[POSTERS];
};
static struct load L;

static void load_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void load_error(const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(&L.bad, 1);
	pthread_mutex_lock(&L.err_lock);
	if (!L.first_error[0]) {
		va_start(ap, fmt);
		vsnprintf(L.first_error, sizeof(L.first_error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&L.err_lock);
}

static void *poster(void *arg)
{
	int t = *(int *)arg;
	int lo = L.neps * t / POSTERS, hi = L.neps * (t + 1) / POSTERS;

	while (!atomic_load(&L.stop_posting)) {
		int any = 0;
		for (int i = lo; i < hi; i++) {
			struct ep_state *e = &L.eps[i];
			if (atomic_load(&e->credits) <= 0)
				continue;
			/* An echo can come back before its send's completion is
			 * reaped: the send queue (WIN * 2) holds both, and a post
			 * past it is the consumer's error (DAT_INSUFFICIENT_RESOURCES). */
			if (e->posted - atomic_load(&e->send_done) >= WIN * 2)
				continue;
			atomic_fetch_sub(&e->credits, 1);
			uint32_t seq = e->posted;
			size_t slot = (size_t)i * WIN + seq % WIN;
			fill_msg((struct msg *)(L.sm.buf + slot * MSG), (uint32_t)i, seq);
			DAT_LMR_TRIPLET tr = triplet(&L.sm, slot * MSG, MSG);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i << 32 | seq };
			DAT_RETURN r = dat_ep_post_send(e->ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG);
			if (r != DAT_SUCCESS) {
				load_error("dat_ep_post_send(EP %d, seq %u): %s", i, seq, describe(r));
				atomic_fetch_add(&e->credits, 1);
				continue;
			}
			e->posted++;
			any = 1;
		}
		if (!any)
			usleep(200);
	}
	/* wait for the echoes, then say goodbye on every EP */
	double end = now_s() + 60;
	for (int i = lo; i < hi; i++) {
		struct ep_state *e = &L.eps[i];
		while ((atomic_load(&e->echoed) < e->posted || atomic_load(&e->send_done) < e->posted) && now_s() < end)
			usleep(1000);
		/* the bye goes from its own slot: the last WIN message slots may still be in use */
		size_t off = (size_t)L.neps * WIN * MSG + (size_t)i * MSG;
		struct msg *m = (struct msg *)(L.sm.buf + off);
		fill_msg(m, (uint32_t)i, BYE_SEQ);
		/* the server closes once it has every bye: flushes are expected from the last one on */
		if (atomic_fetch_sub(&L.byes_left, 1) == 1)
			atomic_store(&L.closing, 1);
		DAT_LMR_TRIPLET tr = triplet(&L.sm, off, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i << 32 | BYE_SEQ };
		DAT_RETURN r = dat_ep_post_send(e->ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG);
		if (r != DAT_SUCCESS)
			load_error("bye on EP %d: %s", i, describe(r));
		else
			e->bye = 1;
	}
	return NULL;
}

static void *send_reaper(void *arg)
{
	DAT_EVENT ev;
	DAT_COUNT nm;

	(void)arg;
	while (!atomic_load(&L.stop_reaping)) {
		if (dat_evd_wait(L.req, 200000, 1, &ev, &nm) != DAT_SUCCESS)
			continue;
		DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
		int i = (int)(d->user_cookie.as_64 >> 32);
		uint32_t seq = (uint32_t)d->user_cookie.as_64;
		if (ev.event_number != DAT_DTO_COMPLETION_EVENT || i < 0 || i >= L.neps) {
			load_error("request EVD: %s cookie 0x%llx", event_name(ev.event_number),
				   (unsigned long long)d->user_cookie.as_64);
			continue;
		}
		if (d->status != DAT_DTO_SUCCESS) {
			load_error("send completion EP %d seq %u: %s", i, seq, dto_status_name(d->status));
			continue;
		}
		atomic_fetch_add(&L.ops, 1);
		if (seq == BYE_SEQ)
			continue;
		struct ep_state *e = &L.eps[i];
		uint32_t want = atomic_load(&e->send_done);
		if (seq < want)
			atomic_fetch_add(&L.dup, 1);
		else if (seq > want)
			atomic_fetch_add(&L.lost, seq - want);
		atomic_store(&e->send_done, seq + 1);
	}
	return NULL;
}

static void *recv_reaper(void *arg)
{
	DAT_EVENT ev;
	DAT_COUNT nm;
	struct msg want;

	(void)arg;
	while (!atomic_load(&L.stop_reaping)) {
		if (dat_evd_wait(L.recv, 200000, 1, &ev, &nm) != DAT_SUCCESS)
			continue;
		DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
		uint64_t slot = d->user_cookie.as_64;
		if (ev.event_number != DAT_DTO_COMPLETION_EVENT || slot >= (uint64_t)L.neps * WIN) {
			load_error("receive EVD: %s cookie 0x%llx", event_name(ev.event_number), (unsigned long long)slot);
			continue;
		}
		int i = (int)(slot / WIN);
		struct ep_state *e = &L.eps[i];
		atomic_fetch_add(&e->recv_done, 1);
		if (d->status == DAT_DTO_ERR_FLUSHED && atomic_load(&L.closing)) {
			atomic_fetch_add(&L.ops, 1);	/* the server closed after the last echo */
			continue;
		}
		if (d->status != DAT_DTO_SUCCESS) {
			load_error("receive completion EP %d: %s", i, dto_status_name(d->status));
			continue;
		}
		struct msg *m = (struct msg *)(L.rm.buf + slot * MSG);
		uint32_t seq = atomic_load(&e->echoed);
		atomic_fetch_add(&L.ops, 1);
		if (d->transfered_length != MSG)
			load_error("echo on EP %d: %u bytes", i, (unsigned)d->transfered_length);
		if (m->seq < seq)
			atomic_fetch_add(&L.dup, 1);
		else if (m->seq > seq)
			atomic_fetch_add(&L.lost, m->seq - seq);
		fill_msg(&want, (uint32_t)i, m->seq);
		if (memcmp(m, &want, MSG) != 0)
			load_error("echo on EP %d seq %u differs from what was sent", i, m->seq);
		else
			atomic_fetch_add(&L.bytes, MSG);
		atomic_store(&e->echoed, m->seq + 1);
		DAT_LMR_TRIPLET tr = triplet(&L.rm, slot * MSG, MSG);
		DAT_RETURN r = dat_ep_post_recv(e->ep, 1, &tr, d->user_cookie, 0);
		if (r != DAT_SUCCESS)
			load_error("repost receive on EP %d: %s", i, describe(r));
		else
			atomic_fetch_add(&e->recv_posted, 1);
		atomic_fetch_add(&e->credits, 1);
	}
	return NULL;
}

static void case_load_256(void)
{
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	int rp[2], wp[2], st;
	pid_t pid;
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE conn;
	DAT_EP_ATTR attr = small_attr(WIN * 2, 1);
	struct sockaddr_in self;
	struct pollfd pf;
	struct srv_report rep;
	pthread_t th[POSTERS + 2];
	char c;
	double t0;

	memset(&L, 0, sizeof(L));
	pthread_mutex_init(&L.err_lock, NULL);
	L.neps = load_eps();
	atomic_store(&L.byes_left, L.neps);
	if (pipe(rp) || pipe(wp)) {
		fail("pipe");
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		close(rp[0]);
		close(wp[0]);
		server_main(qual, L.neps, rp[1], wp[1]);
	}
	close(rp[1]);
	close(wp[1]);
	pf.fd = rp[0];
	pf.events = POLLIN;
	if (poll(&pf, 1, 60000) != 1 || read(rp[0], &c, 1) != 1) {
		fail("the load server did not start");
		goto out;
	}
	ia = open_ia(g_ia);
	if (!ia)
		goto out;
	pz = make_pz(ia);
	conn = make_evd(ia, L.neps * 2 + 8, DAT_EVD_CONNECTION_FLAG);
	L.req = make_evd(ia, L.neps * WIN * 2 + 64, DAT_EVD_DTO_FLAG);
	L.recv = make_evd(ia, L.neps * WIN * 2 + 64, DAT_EVD_DTO_FLAG);
	L.eps = calloc((size_t)L.neps, sizeof(*L.eps));
	if (!pz || !conn || !L.req || !L.recv || !self_addr(ia, &self) ||
	    !mem_reg(ia, pz, (size_t)L.neps * WIN * MSG, DAT_MEM_PRIV_ALL_FLAG, &L.rm) ||
	    !mem_reg(ia, pz, (size_t)L.neps * (WIN + 1) * MSG, DAT_MEM_PRIV_ALL_FLAG, &L.sm))
		goto out;
	/* connect them all, 32 at a time */
	t0 = now_s();
	for (int i = 0; i < L.neps; i++) {
		DAT_RETURN r = CALL(dat_ep_create(ia, pz, L.recv, L.req, conn, &attr, &L.eps[i].ep));
		if (r != DAT_SUCCESS) {
			fail("dat_ep_create %d: %s", i, describe(r));
			goto out;
		}
		for (int w = 0; w < WIN; w++) {
			DAT_LMR_TRIPLET tr = triplet(&L.rm, ((size_t)i * WIN + w) * MSG, MSG);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i * WIN + w };
			CHECK_RC(dat_ep_post_recv(L.eps[i].ep, 1, &tr, ck, 0), DAT_SUCCESS, "post_recv EP %d", i);
			atomic_fetch_add(&L.eps[i].recv_posted, 1);
		}
		atomic_store(&L.eps[i].credits, WIN);
	}
	for (int b = 0; b < L.neps; b += 32) {
		int n = L.neps - b < 32 ? L.neps - b : 32;
		for (int i = b; i < b + n; i++) {
			DAT_RETURN r = CALL(dat_ep_connect(L.eps[i].ep, (DAT_IA_ADDRESS_PTR)&self, qual, 60 * SEC, 0, NULL,
							   DAT_QOS_BEST_EFFORT, 0));
			if (r != DAT_SUCCESS) {
				fail("dat_ep_connect %d: %s", i, describe(r));
				goto out;
			}
		}
		for (int i = 0; i < n; i++) {
			DAT_EVENT ev;
			if (!expect_ev(conn, 120 * SEC, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "load connect"))
				goto out;
		}
	}
	note("%d EPs connected in %.1f s", L.neps, now_s() - t0);
	printf("# %d EPs connected in %.1f s\n", L.neps, now_s() - t0);
	g_stats.eps = L.neps;

	/* the soak */
	t0 = now_s();
	pthread_create(&th[POSTERS], NULL, send_reaper, NULL);
	pthread_create(&th[POSTERS + 1], NULL, recv_reaper, NULL);
	for (int t = 0; t < POSTERS; t++) {
		L.poster_index[t] = t;
		pthread_create(&th[t], NULL, poster, &L.poster_index[t]);
	}
	while (now_s() - t0 < soak_secs() && atomic_load(&L.bad) == 0)
		usleep(100000);
	atomic_store(&L.stop_posting, 1);
	for (int t = 0; t < POSTERS; t++)
		pthread_join(th[t], NULL);
	atomic_store(&L.closing, 1);
	/* the server reports once every EP said goodbye */
	pf.fd = wp[0];
	if (poll(&pf, 1, 120000) != 1 || read(wp[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) {
		fail("no report from the load server");
		memset(&rep, 0, sizeof(rep));
	}
	/* the server has closed: every receive still posted flushes, exactly once */
	for (int k = 0; k < 600; k++) {
		int settled = 1;
		for (int i = 0; i < L.neps; i++)
			settled &= atomic_load(&L.eps[i].send_done) == L.eps[i].posted &&
				   atomic_load(&L.eps[i].echoed) == L.eps[i].posted &&
				   atomic_load(&L.eps[i].recv_done) == atomic_load(&L.eps[i].recv_posted);
		if (settled)
			break;
		usleep(100000);
	}
	atomic_store(&L.stop_reaping, 1);
	pthread_join(th[POSTERS], NULL);
	pthread_join(th[POSTERS + 1], NULL);
	double secs = now_s() - t0;

	long posted = 0, lost_ep = 0, byes = 0;
	for (int i = 0; i < L.neps; i++) {
		struct ep_state *e = &L.eps[i];
		posted += e->posted;
		byes += e->bye;
		if (atomic_load(&e->send_done) != e->posted || atomic_load(&e->echoed) != e->posted ||
		    atomic_load(&e->recv_done) != atomic_load(&e->recv_posted)) {
			if (lost_ep++ < 3)
				fail("EP %d: %u sends posted, %u completed, %u echoed; %u receives posted, %u completed", i,
				     e->posted, atomic_load(&e->send_done), atomic_load(&e->echoed),
				     atomic_load(&e->recv_posted), atomic_load(&e->recv_done));
			g_stats.lost += (long)e->posted - (long)atomic_load(&e->echoed) +
					(long)atomic_load(&e->recv_posted) - (long)atomic_load(&e->recv_done);
		}
	}
	printf("# load: %d EPs, %d posting threads, %.0f s: %ld messages echoed (%.0f/s), %ld completions, "
	       "server received %ld\n", L.neps, POSTERS, secs, posted, posted / (secs > 0 ? secs : 1),
	       atomic_load(&L.ops), rep.received);
	if (L.first_error[0])
		fail("%ld load errors; first: %s", atomic_load(&L.bad), L.first_error);
	CHECK(lost_ep == 0, "%ld EPs lost messages", lost_ep);
	CHECK(atomic_load(&L.lost) == 0, "%ld completions lost (sequence gaps)", atomic_load(&L.lost));
	CHECK(atomic_load(&L.dup) == 0, "%ld completions duplicated", atomic_load(&L.dup));
	CHECK(rep.accepted == L.neps, "server accepted %ld of %d", rep.accepted, L.neps);
	CHECK(rep.received == posted + byes, "server received %ld messages, client posted %ld (+%ld byes)", rep.received,
	      posted, byes);
	CHECK(rep.bad_sum == 0, "server: %ld messages with a bad checksum", rep.bad_sum);
	CHECK(rep.bad_seq == 0, "server: %ld messages out of sequence or not echoed", rep.bad_seq);
	CHECK(posted >= L.neps, "only %ld messages in the soak", posted);
	g_stats.lost += atomic_load(&L.lost);
	g_stats.dup += atomic_load(&L.dup);
	g_stats.ops = atomic_load(&L.ops) + rep.received;
	g_stats.bytes = atomic_load(&L.bytes) + (rep.received - rep.bad_sum) * MSG;
	cover("dat_ep_post_send dat_ep_post_recv dat_evd_wait dat_evd_dequeue dat_cr_accept dat_set_consumer_context");
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(ABRUPT) with 256 EPs connected");
out:
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

const struct tcase load_cases[] = {
	CASE("load", load_256, 0),
};
const int load_ncases = sizeof(load_cases) / sizeof(load_cases[0]);
