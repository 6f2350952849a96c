/*
 * progress.c - what a consumer posts goes out without its help.
 *
 * On a device, a posted send is the adapter's business: the consumer may
 * post and then compute, or block on something that is not DAT, and the
 * message still arrives. A software transport that keeps posts back to
 * write a burst of them at once (the sock provider over TCP) must still
 * send them when the consumer makes no further call.
 *
 * burst_left_alone: EP A on one IA, EP B on another (each IA has its own
 * progress), so nothing B's side does can move A's posts. A polls its
 * empty queue for a few milliseconds, as a consumer in a loop does, then
 * posts a burst of short sends and makes no DAT call at all until B has
 * taken every message (each within a few seconds, checked byte for byte
 * and in order). Only then does A reap its send completions.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <string.h>

#define BURST 12		/* fewer than the sock provider keeps back at most */
#define MSG 64
#define WARM 4
#define TAKE_US (5 * SEC)	/* per message: far beyond any flush interval */

static void case_burst_left_alone(void)
{
	struct pair p;
	DAT_EP_ATTR attr = small_attr(BURST + WARM + 4, 1);
	struct mem sm, rm, wm_a, wm_b;
	DAT_EVENT ev;
	DAT_DTO_COMPLETION_EVENT_DATA d;
	int taken = 0;

	if (!pair_setup_apart(&p, BURST * 2, &attr) || !mem_reg(p.ia, p.pz, BURST * MSG, DAT_MEM_PRIV_ALL_FLAG, &sm) ||
	    !mem_reg(p.ib, p.pzb, BURST * MSG, DAT_MEM_PRIV_ALL_FLAG, &rm) ||
	    !mem_reg(p.ia, p.pz, WARM * MSG, DAT_MEM_PRIV_ALL_FLAG, &wm_a) ||
	    !mem_reg(p.ib, p.pzb, WARM * MSG, DAT_MEM_PRIV_ALL_FLAG, &wm_b))
		goto out;
	for (int i = 0; i < BURST; i++) {
		DAT_LMR_TRIPLET tr = triplet(&rm, (size_t)i * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
		CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "post_recv %d", i);
	}
	if (!pair_connect(&p))
		goto out;

	for (int i = 0; i < BURST; i++)
		memset(sm.buf + (size_t)i * MSG, 'a' + i, MSG);
	/* A consumer in a polling loop, with traffic coming in (B's messages
	 * wake A's progress, which then sees A polling), and then none. */
	for (int i = 0; i < WARM; i++) {
		DAT_LMR_TRIPLET tr = triplet(&wm_a, (size_t)i * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = 200 + (uint64_t)i };
		CHECK_RC(dat_ep_post_recv(p.a.ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "A: post_recv %d", i);
	}
	for (int i = 0; i < WARM; i++) {
		DAT_LMR_TRIPLET tr = triplet(&wm_b, (size_t)i * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = 300 + (uint64_t)i };
		CHECK_RC(dat_ep_post_send(p.b.ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "B: post_send %d", i);
	}
	for (int got = 0; got < WARM;) {
		double t0 = now_s();
		DAT_RETURN r;
		while ((r = dat_evd_dequeue(p.a.recv, &ev)) == DAT_QUEUE_EMPTY && now_s() - t0 < 5.0)
			;
		if (r != DAT_SUCCESS || ev.event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
			fail("A's receive %d of B's warm-up: %s", got, describe(r));
			goto out;
		}
		got++;
	}
	for (double t0 = now_s(); now_s() - t0 < 0.005;) {
		DAT_RETURN r = dat_evd_dequeue(p.a.req, &ev);
		if (r != DAT_QUEUE_EMPTY) {
			fail("dequeue on A's idle queue: %s", describe(r));
			goto out;
		}
	}
	for (int i = 0; i < BURST; i++) {
		DAT_LMR_TRIPLET tr = triplet(&sm, (size_t)i * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = 100 + (uint64_t)i };
		CHECK_RC(dat_ep_post_send(p.a.ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "post_send %d", i);
	}
	/* From here on, no call on A's IA until B has it all. */
	for (; taken < BURST; taken++) {
		if (next_dto(p.b.recv, TAKE_US, &d, "B's receive") != DAT_DTO_SUCCESS)
			break;
		CHECK(d.user_cookie.as_64 == (uint64_t)taken, "receive %d: cookie %llu (out of order)", taken,
		      (unsigned long long)d.user_cookie.as_64);
		CHECK(d.transfered_length == MSG, "receive %d: %llu bytes", taken, (unsigned long long)d.transfered_length);
		unsigned char want[MSG];
		memset(want, 'a' + taken, MSG);
		CHECK(memcmp(rm.buf + (size_t)taken * MSG, want, MSG) == 0, "receive %d: the bytes sent", taken);
	}
	CHECK(taken == BURST, "B took %d of the %d messages A posted and then left alone", taken, BURST);
	for (int i = 0; i < BURST; i++) {
		if (next_dto(p.a.req, WAIT_US, &d, "A's send completion") != DAT_DTO_SUCCESS)
			break;
		CHECK(d.user_cookie.as_64 == 100 + (uint64_t)i, "send completion %d: cookie %llu", i,
		      (unsigned long long)d.user_cookie.as_64);
	}
	g_stats.ops += 2 * BURST;
	g_stats.bytes += (long)taken * MSG;
	cover("dat_ep_post_send dat_ep_post_recv dat_evd_dequeue dat_evd_wait");
out:
	pair_close(&p);
}

const struct tcase progress_cases[] = {
	CASE("progress", burst_left_alone, 1),
};
const int progress_ncases = sizeof(progress_cases) / sizeof(progress_cases[0]);
