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
		if (!want_dto(p.b.recv, TAKE_US, &d, "B's receive"))
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
		if (!want_dto(p.a.req, WAIT_US, &d, "A's send completion"))
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

/*
 * responses_in_order: A posts rounds of sends, RDMA writes and RDMA reads
 * (short ones, and long ones that a transport may move by reference) in a
 * mix that changes every round, all signaled, and reaps them. Every
 * completion comes in posting order with its cookie and success, and a
 * read's bytes are in place when its completion is seen. A transport that
 * acknowledges writes and sends apart from the responses that carry read
 * data (the sock provider's on-node counter) must still give each
 * acknowledgement to the request it belongs to: one given to a read
 * completes the read before its data, or its response to a send.
 */
enum { R_SEND, R_WRITE, R_READ, R_READ_LONG };
#define R_OPS 8			/* per round; at most 3 reads (max_rdma_read_out 4) */
#define R_ROUNDS 300
#define R_SHORT 256
#define R_LONG (16 * 1024)	/* beyond the sock provider's CMA_MIN */

static int round_op(int r, int k)
{
	static const int mix[] = { R_SEND, R_READ, R_WRITE, R_SEND, R_READ_LONG, R_SEND };
	return mix[(r * 5 + k) % 6];
}

static void case_responses_in_order(void)
{
	struct pair p;
	DAT_EP_ATTR attr = small_attr(2 * R_OPS, 1);
	struct mem src, dst, remote, sink;
	DAT_DTO_COMPLETION_EVENT_DATA d;
	size_t slot = R_LONG;
	int r, k, done = 0;

	if (!pair_setup(&p, 4 * R_OPS, &attr) ||
	    !mem_reg(p.ia, p.pz, R_OPS * slot, DAT_MEM_PRIV_ALL_FLAG, &src) ||
	    !mem_reg(p.ia, p.pz, R_OPS * slot, DAT_MEM_PRIV_ALL_FLAG, &dst) ||
	    !mem_reg(p.ib, p.pzb, R_OPS * slot, DAT_MEM_PRIV_ALL_FLAG, &remote) ||
	    !mem_reg(p.ib, p.pzb, R_OPS * R_SHORT, DAT_MEM_PRIV_ALL_FLAG, &sink) || !pair_connect(&p))
		goto out;
	for (size_t i = 0; i < R_OPS * slot; i++)
		remote.buf[i] = (unsigned char)(i * 7 + i / 251);
	for (r = 0; r < R_ROUNDS; r++) {
		int sends = 0;
		for (k = 0; k < R_OPS; k++) {
			if (round_op(r, k) != R_SEND)
				continue;
			DAT_LMR_TRIPLET tr = triplet(&sink, (size_t)k * R_SHORT, R_SHORT);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)k };
			CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS,
				 "round %d: B's post_recv", r);
			sends++;
		}
		memset(dst.buf, 0, R_OPS * slot);
		for (k = 0; k < R_OPS; k++) {
			int op = round_op(r, k);
			size_t len = op == R_READ_LONG ? R_LONG : R_SHORT;
			size_t off = (size_t)k * slot;
			DAT_DTO_COOKIE ck = { .as_64 = ((uint64_t)r << 8) | (uint64_t)k };
			DAT_RMR_TRIPLET rt = { .rmr_context = remote.rkey, .virtual_address = remote.addr + off,
					       .segment_length = len };
			DAT_LMR_TRIPLET tr;
			DAT_RETURN rc;
			if (op == R_SEND || op == R_WRITE) {
				memset(src.buf + off, r + k + 1, len);
				tr = triplet(&src, off, len);
				/* A write lands in B's region past the part the reads read. */
				rt.virtual_address = remote.addr + off + slot - len;
				rc = op == R_SEND ? CALL(dat_ep_post_send(p.a.ep, 1, &tr, ck, DAT_COMPLETION_DEFAULT_FLAG))
						  : CALL(dat_ep_post_rdma_write(p.a.ep, 1, &tr, ck, &rt,
										DAT_COMPLETION_DEFAULT_FLAG));
			} else {
				tr = triplet(&dst, off, len);
				rc = CALL(dat_ep_post_rdma_read(p.a.ep, 1, &tr, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG));
			}
			if (rc != DAT_SUCCESS) {
				fail("round %d op %d: post: %s", r, k, describe(rc));
				goto out;
			}
		}
		for (k = 0; k < R_OPS; k++) {
			int op = round_op(r, k);
			char what[64];
			snprintf(what, sizeof(what), "round %d: completion %d (op %d)", r, k, op);
			if (!want_dto(p.a.req, WAIT_US, &d, what))
				goto out;
			uint64_t want = ((uint64_t)r << 8) | (uint64_t)k;
			if (d.user_cookie.as_64 != want) {
				fail("round %d: completion %d has cookie %#llx, want %#llx (op %d, out of order)", r, k,
				     (unsigned long long)d.user_cookie.as_64, (unsigned long long)want, op);
				goto out;
			}
			if (op == R_READ || op == R_READ_LONG) {
				size_t len = op == R_READ_LONG ? R_LONG : R_SHORT, off = (size_t)k * slot;
				if (memcmp(dst.buf + off, remote.buf + off, len) != 0) {
					fail("round %d: read %d completed before its bytes were in place", r, k);
					goto out;
				}
				g_stats.bytes += (long)len;
			}
			done++;
		}
		for (k = 0; k < sends; k++)
			if (!want_dto(p.b.recv, WAIT_US, &d, "B's receive"))
				goto out;
	}
	CHECK_EQ(done, R_ROUNDS * R_OPS, "completions in order");
	g_stats.ops += done;
	cover("dat_ep_post_send dat_ep_post_rdma_write dat_ep_post_rdma_read dat_evd_dequeue");
out:
	pair_close(&p);
}

const struct tcase progress_cases[] = {
	CASE("progress", burst_left_alone, 1),
	CASE("progress", responses_in_order, 1),
};
const int progress_ncases = sizeof(progress_cases) / sizeof(progress_cases[0]);
