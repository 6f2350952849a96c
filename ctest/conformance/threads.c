/*
 * threads.c - what the provider promises to threads (docs/threads.md),
 * each promise tested.
 *
 * threads_own_eps: 8 threads, each posting on its own connected EP; all 8
 *   EPs share one request EVD, and every thread dequeues from that shared
 *   EVD at the same time (so it also reaps the other threads' completions).
 * threads_one_ep: 8 threads posting on one EP, reaping its request EVD
 *   concurrently.
 *
 * Each thread posts K sends, K RDMA writes and K RDMA reads (CONF_THREAD_OPS,
 * default 256), every one from its own buffer slot with a pattern of its own
 * (thread, op, index), at most WIN outstanding per thread, so no queue is
 * ever over-filled and no post may be refused.  Both ends of every
 * connection are in this process (one IA, connected to itself): the far
 * side's memory is checked byte by byte after the last completion (sends
 * by their self-describing header, since on one EP the receives are
 * consumed in arrival order, not per thread; writes at their slot), reads
 * at the near side.  Every cookie must complete exactly once: lost 0, dup 0.
 */
#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define NT      8
#define WIN     8
#define MSG_S   512
#define MSG_W   2048
#define MSG_R   2048
#define MAGIC   0x7468726561647321ull	/* "threads!" */

enum { OP_SEND, OP_WRITE, OP_READ, NOPS };

static int thread_ops(void)
{
	int n = getenv("CONF_THREAD_OPS") ? atoi(getenv("CONF_THREAD_OPS")) : 256;

	return n < 8 ? 8 : n > 1024 ? 1024 : n;
}

static unsigned char pat(int t, int op, int k, size_t i)
{
	uint32_t x = (uint32_t)(t * 7919 + op * 104729 + k * 31 + (int)i) * 2654435761u;

	return (unsigned char)(x >> 24);
}

struct tx {
	int nt, k;		/* threads, ops of each kind per thread */
	int one_ep;
	DAT_EP_HANDLE near[NT], far[NT];	/* far[i] accepted from near[i]'s connect */
	DAT_EVD_HANDLE req, recv;	/* near's shared request EVD, far's receive EVD */
	struct mem nm, fm;		/* near memory, far memory */
	size_t s_off, w_off, r_off;	/* region offsets (same layout on both sides) */
	atomic_int outstanding[NT];
	atomic_uchar *seen;		/* per cookie index: completions seen */
	atomic_long completed, bad, ops, bytes, dup, unknown;
	char first_error[256];
	pthread_mutex_t err_lock;
	int index[NT];
	double deadline;
};
static struct tx X;

static void tx_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tx_error(const char *fmt, ...)
{
	va_list ap;

	atomic_fetch_add(&X.bad, 1);
	pthread_mutex_lock(&X.err_lock);
	if (!X.first_error[0]) {
		va_start(ap, fmt);
		vsnprintf(X.first_error, sizeof(X.first_error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&X.err_lock);
}

static size_t slot_off(int op, int t, int k)
{
	size_t i = (size_t)t * X.k + k;

	return op == OP_SEND ? X.s_off + i * MSG_S : op == OP_WRITE ? X.w_off + i * MSG_W : X.r_off + i * MSG_R;
}

static uint64_t cookie_of(int t, int op, int k)
{
	return (uint64_t)(t * NOPS + op) * X.k + k + 1;	/* 0 is never posted */
}

/* One completion from the shared EVD, whichever thread posted it. */
static void handle(const DAT_EVENT *ev)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
	uint64_t c = d->user_cookie.as_64;
	uint64_t total = (uint64_t)X.nt * NOPS * X.k;

	if (ev->event_number != DAT_DTO_COMPLETION_EVENT || c == 0 || c > total) {
		atomic_fetch_add(&X.unknown, 1);
		tx_error("request EVD: %s cookie %llu", event_name(ev->event_number), (unsigned long long)c);
		return;
	}
	int idx = (int)(c - 1), t = idx / (NOPS * X.k), op = idx / X.k % NOPS, k = idx % X.k;
	if (atomic_fetch_add(&X.seen[idx], 1) != 0) {
		atomic_fetch_add(&X.dup, 1);
		return;
	}
	if (d->status != DAT_DTO_SUCCESS)
		tx_error("thread %d op %d #%d: %s", t, op, k, dto_status_name(d->status));
	if (op == OP_READ && d->status == DAT_DTO_SUCCESS) {
		/* the read landed in near memory: compare with the far source */
		const unsigned char *p = X.nm.buf + slot_off(OP_READ, t, k);
		for (size_t i = 0; i < MSG_R; i++)
			if (p[i] != pat(t, OP_READ, k, i)) {
				tx_error("RDMA read thread %d #%d: byte %zu differs", t, k, i);
				break;
			}
		atomic_fetch_add(&X.bytes, MSG_R);
	}
	atomic_fetch_add(&X.ops, 1);
	atomic_fetch_sub(&X.outstanding[t], 1);
	atomic_fetch_add(&X.completed, 1);
}

static void *worker(void *arg)
{
	int t = *(int *)arg;
	DAT_EP_HANDLE ep = X.near[X.one_ep ? 0 : t];
	long total = (long)X.nt * NOPS * X.k;
	int next = 0;	/* ops posted: interleaved send, write, read */
	DAT_EVENT ev;

	while (atomic_load(&X.completed) < total && now_s() < X.deadline && atomic_load(&X.bad) == 0) {
		if (next < NOPS * X.k && atomic_load(&X.outstanding[t]) < WIN) {
			int op = next % NOPS, k = next / NOPS;
			size_t off = slot_off(op, t, k);
			DAT_DTO_COOKIE ck = { .as_64 = cookie_of(t, op, k) };
			DAT_RETURN r;
			atomic_fetch_add(&X.outstanding[t], 1);
			if (op == OP_SEND) {
				DAT_LMR_TRIPLET l = triplet(&X.nm, off, MSG_S);
				r = dat_ep_post_send(ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG);
			} else if (op == OP_WRITE) {
				DAT_LMR_TRIPLET l = triplet(&X.nm, off, MSG_W);
				DAT_RMR_TRIPLET rt = { X.fm.addr + off, MSG_W, X.fm.rkey };
				r = dat_ep_post_rdma_write(ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG);
			} else {
				DAT_LMR_TRIPLET l = triplet(&X.nm, off, MSG_R);
				DAT_RMR_TRIPLET rt = { X.fm.addr + off, MSG_R, X.fm.rkey };
				r = dat_ep_post_rdma_read(ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG);
			}
			if (r != DAT_SUCCESS) {
				/* never more than WIN per thread in a queue sized for all: no refusal is allowed */
				tx_error("thread %d: post op %d #%d: %s", t, op, k, describe(r));
				atomic_fetch_sub(&X.outstanding[t], 1);
				break;
			}
			next++;
			continue;
		}
		/* every thread dequeues from the shared EVD at once */
		if (dat_evd_dequeue(X.req, &ev) == DAT_SUCCESS)
			handle(&ev);
		else
			sched_yield();
	}
	return NULL;
}

/* Connects near[i] to far[i] for every EP this case uses, one at a time. */
static int connect_all(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, int neps, DAT_COUNT dtos, DAT_COUNT recvs)
{
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	DAT_EVD_HANDLE cr = make_evd(ia, 8, DAT_EVD_CR_FLAG), conn = make_evd(ia, 4 * NT, DAT_EVD_CONNECTION_FLAG);
	DAT_EVD_HANDLE freq = make_evd(ia, 64, DAT_EVD_DTO_FLAG), nrecv = make_evd(ia, 64, DAT_EVD_DTO_FLAG);
	DAT_EP_ATTR na = small_attr(dtos, 1), fa = small_attr(recvs, 1);
	DAT_PSP_HANDLE psp;
	struct sockaddr_in self;
	DAT_EVENT ev;

	if (!cr || !conn || !freq || !nrecv || !self_addr(ia, &self))
		return 0;
	fa.max_request_dtos = 8;
	if (CALL(dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS) {
		fail("dat_psp_create");
		return 0;
	}
	for (int i = 0; i < neps; i++) {
		DAT_RETURN r = CALL(dat_ep_create(ia, pz, X.recv, freq, conn, &fa, &X.far[i]));
		if (r == DAT_SUCCESS)
			r = CALL(dat_ep_create(ia, pz, nrecv, X.req, conn, &na, &X.near[i]));
		if (r != DAT_SUCCESS) {
			fail("dat_ep_create %d: %s", i, describe(r));
			return 0;
		}
		/* the far side's receives: one slot per send any thread makes to it */
		for (int t = 0; t < X.nt; t++) {
			if (!X.one_ep && t != i)
				continue;
			for (int k = 0; k < X.k; k++) {
				DAT_LMR_TRIPLET l = triplet(&X.fm, slot_off(OP_SEND, t, k), MSG_S);
				DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)t * X.k + k };
				r = CALL(dat_ep_post_recv(X.far[i], 1, &l, ck, 0));
				if (r != DAT_SUCCESS) {
					fail("far dat_ep_post_recv %d/%d: %s", t, k, describe(r));
					return 0;
				}
			}
		}
		r = CALL(dat_ep_connect(X.near[i], (DAT_IA_ADDRESS_PTR)&self, qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT,
					DAT_CONNECT_DEFAULT_FLAG));
		if (r != DAT_SUCCESS) {
			fail("dat_ep_connect %d: %s", i, describe(r));
			return 0;
		}
		if (!expect_ev(cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "CR"))
			return 0;
		if (CALL(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, X.far[i], 0, NULL)) != DAT_SUCCESS) {
			fail("dat_cr_accept %d", i);
			return 0;
		}
		/* two ESTABLISHED on the shared connection EVD: near's and far's */
		for (int j = 0; j < 2; j++)
			if (!expect_ev(conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "ESTABLISHED"))
				return 0;
	}
	return 1;
}

static void run_threads(int one_ep)
{
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	pthread_t th[NT];
	int neps;
	size_t per;
	long total;
	double t0;

	memset(&X, 0, sizeof(X));
	pthread_mutex_init(&X.err_lock, NULL);
	X.nt = NT;
	X.k = thread_ops();
	X.one_ep = one_ep;
	neps = one_ep ? 1 : NT;
	total = (long)X.nt * NOPS * X.k;
	X.seen = calloc((size_t)total, sizeof(*X.seen));
	per = (size_t)X.nt * X.k;
	X.s_off = 0;
	X.w_off = per * MSG_S;
	X.r_off = X.w_off + per * MSG_W;
	ia = open_ia(g_ia);
	if (!ia)
		return;
	pz = make_pz(ia);
	X.req = make_evd(ia, NT * WIN * 2 + 64, DAT_EVD_DTO_FLAG);
	X.recv = make_evd(ia, (DAT_COUNT)per + 64, DAT_EVD_DTO_FLAG);
	if (!pz || !X.req || !X.recv || !mem_reg(ia, pz, X.r_off + per * MSG_R, DAT_MEM_PRIV_ALL_FLAG, &X.nm) ||
	    !mem_reg(ia, pz, X.r_off + per * MSG_R, DAT_MEM_PRIV_ALL_FLAG, &X.fm))
		goto out;
	/* near: send and write sources; far: read sources; everything else poisoned */
	memset(X.nm.buf, 0xee, X.nm.len);
	memset(X.fm.buf, 0xdd, X.fm.len);
	for (int t = 0; t < X.nt; t++)
		for (int k = 0; k < X.k; k++) {
			unsigned char *s = X.nm.buf + slot_off(OP_SEND, t, k);
			for (size_t i = 0; i < MSG_S; i++)
				s[i] = pat(t, OP_SEND, k, i);
			uint64_t hdr[2] = { MAGIC, (uint64_t)t << 32 | (uint32_t)k };
			memcpy(s, hdr, sizeof(hdr));	/* says whose it is, wherever it lands */
			for (size_t i = 0; i < MSG_W; i++)
				X.nm.buf[slot_off(OP_WRITE, t, k) + i] = pat(t, OP_WRITE, k, i);
			for (size_t i = 0; i < MSG_R; i++)
				X.fm.buf[slot_off(OP_READ, t, k) + i] = pat(t, OP_READ, k, i);
		}
	/* one EP's queue holds every thread's window: a post is never refused */
	if (!connect_all(ia, pz, neps, one_ep ? NT * WIN : WIN, (DAT_COUNT)(one_ep ? per : (size_t)X.k)))
		goto out;

	t0 = now_s();
	X.deadline = t0 + 120;
	for (int t = 0; t < X.nt; t++) {
		X.index[t] = t;
		pthread_create(&th[t], NULL, worker, &X.index[t]);
	}
	for (int t = 0; t < X.nt; t++)
		pthread_join(th[t], NULL);
	double secs = now_s() - t0;
	cover("dat_ep_post_send dat_ep_post_rdma_write dat_ep_post_rdma_read dat_evd_dequeue");
	if (X.first_error[0])
		fail("%ld errors; first: %s", atomic_load(&X.bad), X.first_error);
	/* nothing more may come: a late duplicate would show here */
	DAT_EVENT ev;
	while (wait_ev(X.req, 300000, &ev) == DAT_SUCCESS)
		handle(&ev);
	long lost = 0;
	for (long i = 0; i < total; i++)
		lost += atomic_load(&X.seen[i]) == 0;

	/* the far side: every send arrived once, intact; every write is in place */
	long recvd = 0, far_bad = 0, far_dup = 0;
	unsigned char *got = calloc(per, 1);
	while (wait_ev(X.recv, recvd < (long)per ? 5 * SEC : 300000, &ev) == DAT_SUCCESS) {
		const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
		if (ev.event_number != DAT_DTO_COMPLETION_EVENT || d->status != DAT_DTO_SUCCESS ||
		    d->transfered_length != MSG_S || d->user_cookie.as_64 >= per) {
			if (far_bad++ == 0)
				fail("far receive: %s status %s length %u", event_name(ev.event_number),
				     dto_status_name(d->status), (unsigned)d->transfered_length);
			continue;
		}
		recvd++;
		const unsigned char *p = X.fm.buf + slot_off(OP_SEND, 0, 0) + d->user_cookie.as_64 * MSG_S;
		uint64_t hdr[2];
		memcpy(hdr, p, sizeof(hdr));
		int t = (int)(hdr[1] >> 32), k = (int)(uint32_t)hdr[1];
		if (hdr[0] != MAGIC || t < 0 || t >= X.nt || k < 0 || k >= X.k) {
			if (far_bad++ == 0)
				fail("far receive %llu: no valid header", (unsigned long long)d->user_cookie.as_64);
			continue;
		}
		if (got[(size_t)t * X.k + k]++) {
			far_dup++;
			continue;
		}
		for (size_t i = 16; i < MSG_S; i++)
			if (p[i] != pat(t, OP_SEND, k, i)) {
				if (far_bad++ == 0)
					fail("send thread %d #%d: byte %zu differs at the far side", t, k, i);
				break;
			}
		atomic_fetch_add(&X.bytes, MSG_S);
	}
	long never = 0;
	for (size_t i = 0; i < per; i++)
		never += got[i] == 0;
	free(got);
	for (int t = 0; t < X.nt; t++)
		for (int k = 0; k < X.k; k++) {
			const unsigned char *p = X.fm.buf + slot_off(OP_WRITE, t, k);
			size_t i;
			for (i = 0; i < MSG_W && p[i] == pat(t, OP_WRITE, k, i); i++)
				;
			if (i < MSG_W) {
				if (far_bad++ == 0)
					fail("RDMA write thread %d #%d: byte %zu differs at the far side", t, k, i);
			} else {
				atomic_fetch_add(&X.bytes, MSG_W);
			}
		}
	printf("# %s: %d threads, %ld ops in %.2f s, %ld bytes verified, lost %ld, dup %ld, far sends missing %ld\n",
	       one_ep ? "threads_one_ep" : "threads_own_eps", X.nt, atomic_load(&X.ops), secs, atomic_load(&X.bytes),
	       lost, atomic_load(&X.dup), never);
	CHECK(lost == 0, "%ld of %ld DTOs never completed", lost, total);
	CHECK(atomic_load(&X.dup) == 0, "%ld completions duplicated", atomic_load(&X.dup));
	CHECK(atomic_load(&X.unknown) == 0, "%ld completions with a cookie never posted", atomic_load(&X.unknown));
	CHECK(never == 0 && far_dup == 0, "far side: %ld sends never arrived, %ld arrived twice", never, far_dup);
	CHECK(far_bad == 0, "far side: %ld bad receives or writes", far_bad);
	cover("dat_ep_post_recv dat_evd_wait dat_cr_accept dat_ep_connect dat_psp_create");
	g_stats.threads = X.nt;
	g_stats.eps = neps;
	g_stats.ops = atomic_load(&X.ops) + recvd;
	g_stats.bytes = atomic_load(&X.bytes);
	g_stats.lost = lost + never;
	g_stats.dup = atomic_load(&X.dup) + far_dup;
out:
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(ABRUPT)");
	free(X.seen);
}

static void case_threads_own_eps(void)
{
	run_threads(0);
}

static void case_threads_one_ep(void)
{
	run_threads(1);
}

const struct tcase threads_cases[] = {
	CASE("threads", threads_own_eps, 0),
	CASE("threads", threads_one_ep, 0),
};
const int threads_ncases = sizeof(threads_cases) / sizeof(threads_cases[0]);
