/*
 * fastpath.c - the data path allocates nothing.
 *
 * fastpath_allocates_nothing: A on one IA, B on another (each with its own
 * progress), B served by a thread of its own, as two processes would be. A
 * warm-up of rounds, then the same rounds counted. Each round A sends to B
 * and waits for the answer (dat_evd_wait); B polls for the message
 * (dat_evd_dequeue), sends it back and reaps its send; A reaps its send,
 * writes into B's region and reads it back. The bytes are checked at every
 * round. No heap allocation may happen meanwhile on either consumer
 * thread, nor on any other thread of the process (the providers' progress
 * or CM threads serving the same traffic: on the sock provider a post that
 * finds its engine busy rings the thread, which made a list for each
 * doorbell). Counted by libcountalloc.so, which the suite's runners
 * preload (ctest/countalloc/countalloc.c); without it the case fails and
 * says so.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#define MSG 64
#define WARM 200
#define ROUNDS 2000

typedef long (*made_fn)(int every_thread);

/* Not the harness's want_dto: B's thread runs these too, and the harness's
 * coverage table and failure report are not for two threads at once. */

/* The next completion on evd, polling; 1 if it succeeded with `len` bytes (0: any). */
static int poll_dto(DAT_EVD_HANDLE evd, DAT_VLEN len, DAT_DTO_COMPLETION_EVENT_DATA *d)
{
	DAT_EVENT ev;
	double t0 = now_s();
	DAT_RETURN r;

	while ((r = dat_evd_dequeue(evd, &ev)) == DAT_QUEUE_EMPTY)
		if (now_s() - t0 > 30.0)
			return 0;
	if (r != DAT_SUCCESS || ev.event_number != DAT_DTO_COMPLETION_EVENT)
		return 0;
	*d = ev.event_data.dto_completion_event_data;
	return d->status == DAT_DTO_SUCCESS && (len == 0 || d->transfered_length == len);
}

/* As poll_dto, sleeping in dat_evd_wait. */
static int wait_dto(DAT_EVD_HANDLE evd, DAT_VLEN len, DAT_DTO_COMPLETION_EVENT_DATA *d)
{
	DAT_EVENT ev;
	DAT_COUNT more;

	if (dat_evd_wait(evd, 30 * SEC, 1, &ev, &more) != DAT_SUCCESS || ev.event_number != DAT_DTO_COMPLETION_EVENT)
		return 0;
	*d = ev.event_data.dto_completion_event_data;
	return d->status == DAT_DTO_SUCCESS && (len == 0 || d->transfered_length == len);
}

/* B's side: two receives kept posted (slot n % 2 of its buffer); each
 * message goes back as it came. */
struct b_side {
	struct pair *p;
	struct mem *b;
	made_fn made;
	long mine;		/* allocations on this thread in the counted rounds */
	int failed_round;	/* -1: none */
	const char *why;
};

static void *b_serves(void *arg)
{
	struct b_side *s = arg;
	DAT_DTO_COMPLETION_EVENT_DATA d;

	s->failed_round = -1;
	for (int n = 0; n < WARM + ROUNDS; n++) {
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)n };
		DAT_LMR_TRIPLET slot = triplet(s->b, (size_t)(n % 2) * MSG, MSG);
		DAT_LMR_TRIPLET next = triplet(s->b, (size_t)(n % 2) * MSG, MSG);

		if (n == WARM)
			s->mine = s->made(0);
		if (!poll_dto(s->p->b.recv, MSG, &d) || d.user_cookie.as_64 != (uint64_t)n) {
			s->why = "B's receive (polled)";
			goto failed;
		}
		if (dat_ep_post_send(s->p->b.ep, 1, &slot, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
		    !poll_dto(s->p->b.req, 0, &d)) {
			s->why = "B's answer";
			goto failed;
		}
		/* The slot is free again once its send completed. */
		ck.as_64 = (uint64_t)n + 2;
		if (dat_ep_post_recv(s->p->b.ep, 1, &next, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS) {
			s->why = "B's post_recv";
			goto failed;
		}
		continue;
failed:
		s->failed_round = n;
		return NULL;
	}
	s->mine = s->made(0) - s->mine;
	return NULL;
}

/* A's round; 0 with *why set on the first thing that went wrong. */
static int a_round(struct pair *p, struct mem *a, struct mem *rb, int n, const char **why)
{
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)n };
	DAT_LMR_TRIPLET out = triplet(a, 0, MSG), in = triplet(a, MSG, MSG), back = triplet(a, 2 * MSG, MSG);
	DAT_RMR_TRIPLET rt = { .rmr_context = rb->rkey, .virtual_address = rb->addr, .segment_length = MSG };

	memset(a->buf, 'a' + n % 26, MSG);
	memset(a->buf + MSG, 0, 2 * MSG);
	if (dat_ep_post_recv(p->a.ep, 1, &in, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
		return *why = "A's post_recv", 0;
	if (dat_ep_post_send(p->a.ep, 1, &out, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
		return *why = "A's post_send", 0;
	if (!wait_dto(p->a.recv, MSG, &d) || memcmp(a->buf + MSG, a->buf, MSG) != 0)
		return *why = "B's answer at A (waited)", 0;
	if (!poll_dto(p->a.req, 0, &d) || d.user_cookie.as_64 != (uint64_t)n)
		return *why = "A's send completion", 0;
	if (dat_ep_post_rdma_write(p->a.ep, 1, &out, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
	    !wait_dto(p->a.req, 0, &d))
		return *why = "A's RDMA write", 0;
	if (dat_ep_post_rdma_read(p->a.ep, 1, &back, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
	    !poll_dto(p->a.req, 0, &d) || memcmp(a->buf + 2 * MSG, a->buf, MSG) != 0 || memcmp(rb->buf, a->buf, MSG) != 0)
		return *why = "A's RDMA read of what it wrote", 0;
	return 1;
}

static void case_fastpath_allocates_nothing(void)
{
	made_fn made = (made_fn)dlsym(RTLD_DEFAULT, "countalloc_made");
	struct pair p;
	DAT_EP_ATTR attr = small_attr(8, 1);
	struct mem a, b, rb;
	struct b_side bs;
	pthread_t t;
	int started = 0, n;
	const char *why = "";
	long mine = 0, all = 0;

	if (made == NULL) {
		fail("no allocation count: run under LD_PRELOAD=ctest/build/libcountalloc.so (as the suite's runners do)");
		return;
	}
	if (!pair_setup_apart(&p, 16, &attr) || !mem_reg(p.ia, p.pz, 3 * MSG, DAT_MEM_PRIV_ALL_FLAG, &a) ||
	    !mem_reg(p.ib, p.pzb, 2 * MSG, DAT_MEM_PRIV_ALL_FLAG, &b) ||
	    !mem_reg(p.ib, p.pzb, MSG, DAT_MEM_PRIV_ALL_FLAG, &rb))
		goto out;
	for (n = 0; n < 2; n++) {
		DAT_LMR_TRIPLET slot = triplet(&b, (size_t)n * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)n };
		CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &slot, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "B's post_recv %d", n);
	}
	if (!pair_connect(&p))
		goto out;
	bs = (struct b_side){ .p = &p, .b = &b, .made = made };
	if (pthread_create(&t, NULL, b_serves, &bs) != 0) {
		fail("pthread_create");
		goto out;
	}
	started = 1;
	for (n = 0; n < WARM + ROUNDS; n++) {
		if (n == WARM) {
			mine = made(0);
			all = made(1);
		}
		if (!a_round(&p, &a, &rb, n, &why)) {
			fail("round %d: %s", n, why);
			break;
		}
	}
	mine = made(0) - mine;
	pthread_join(t, NULL);
	started = 0;
	all = made(1) - all;
	if (n < WARM + ROUNDS)
		goto out;
	if (bs.failed_round >= 0) {
		fail("round %d: %s", bs.failed_round, bs.why);
		goto out;
	}
	CHECK(mine == 0, "%ld heap allocations on A's thread in %d rounds (posts, dequeues, waits)", mine, ROUNDS);
	CHECK(bs.mine == 0, "%ld heap allocations on B's thread in %d rounds (posts, dequeues)", bs.mine, ROUNDS);
	CHECK(all == mine + bs.mine, "%ld heap allocations on the process's other threads in %d rounds",
	      all - mine - bs.mine, ROUNDS);
	g_stats.ops += (long)ROUNDS * 5;
	g_stats.bytes += (long)ROUNDS * 5 * MSG;
	cover("dat_ep_post_send dat_ep_post_recv dat_ep_post_rdma_write dat_ep_post_rdma_read dat_evd_dequeue "
	      "dat_evd_wait");
out:
	if (started)
		pthread_join(t, NULL);
	pair_close(&p);
}

const struct tcase fastpath_cases[] = {
	CASE("fastpath", fastpath_allocates_nothing, 1),
};
const int fastpath_ncases = sizeof(fastpath_cases) / sizeof(fastpath_cases[0]);
