/*
 * placement.c - what a consumer that polls its own memory sees of an RDMA
 * write while it lands.
 *
 * MPI eager-RDMA channels (MVAPICH2's uDAPL fast path) never wait for a
 * completion at the target: the receiver spins on the last word of a slot,
 * and once that word is non-zero it takes it as the length of a message
 * that ends there and reads the header in front of it. That works only if
 * the last word of a write becomes visible whole (never one byte of it
 * first) and after the bytes before it. Verbs does not promise this; real
 * HCAs do it, and so must every transport we run MPI over: a torn length
 * word makes the receiver read a header from the wrong place, and the MPI
 * job aborts ("Control shouldn't reach here") or waits forever.
 *
 * write_tail_whole: one thread posts RDMA writes of varying length, each
 * ending with a 4-byte length word whose four bytes are all non-zero; a
 * second thread spins on that word as MVAPICH2 does, and checks the word
 * it sees (exactly the length written, never part of it) and the body in
 * front of it (all of this write's pattern). Then it clears the word and
 * asks for the next write. Figures: writes, torn words, stale bodies.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SLOT 4096		/* one receive slot, the length word at its end */
#define ROUNDS 4000

struct poller {
	volatile uint32_t *word;	/* the slot's last word */
	unsigned char *slot;
	atomic_int round;		/* the write the poller waits for; -1: stop */
	atomic_int seen;		/* the last round it took */
	long torn, stale, bytes;	/* bytes: checked in writes seen whole */
	uint32_t first_torn, first_want;
};

/* Four non-zero bytes, different each round: a word seen one byte at a
 * time never equals it. */
static uint32_t word_of(int r)
{
	return 0x01010101u + (uint32_t)(r % 0x7f) * 0x00010203u + ((uint32_t)(r % 13) << 24);
}

static size_t body_of(int r)
{
	/* Lengths that end the body on every alignment, short and long. */
	static const size_t lens[] = { 60, 61, 62, 63, 64, 316, 320, 1020, 1500, 2044, 3976 };
	return lens[r % (int)(sizeof(lens) / sizeof(lens[0]))];
}

static void *poll_slot(void *arg)
{
	struct poller *p = arg;
	for (;;) {
		int r = atomic_load(&p->round);
		if (r < 0)
			return NULL;
		uint32_t w = *p->word;
		if (w == 0 || atomic_load(&p->seen) == r)
			continue;
		uint32_t want = word_of(r);
		if (w != want) {
			/* Read again: a torn word is one caught mid-copy. */
			if (p->torn++ == 0) {
				p->first_torn = w;
				p->first_want = want;
			}
			while (*p->word != want)
				;
		}
		size_t n = body_of(r);
		unsigned char *body = p->slot + SLOT - 4 - n;
		size_t i;
		for (i = 0; i < n; i++) {
			if (body[i] != (unsigned char)(r + 1)) {
				p->stale++;
				break;
			}
		}
		if (i == n && w == want)
			p->bytes += (long)n + 4;
		*p->word = 0;
		atomic_store(&p->seen, r);
	}
}

static void case_write_tail_whole(void)
{
	struct pair p;
	struct mem src, dst;
	struct poller pl;
	pthread_t t;
	DAT_DTO_COMPLETION_EVENT_DATA dd;
	int rounds = getenv("CONF_PLACEMENT_ROUNDS") ? atoi(getenv("CONF_PLACEMENT_ROUNDS")) : ROUNDS, r, done = 0;

	if (!pair_open(&p) || !mem_reg(p.ia, p.pz, SLOT, DAT_MEM_PRIV_ALL_FLAG, &src) ||
	    !mem_reg(p.ia, p.pz, SLOT, DAT_MEM_PRIV_ALL_FLAG, &dst))
		goto out;
	memset(dst.buf, 0, SLOT);
	memset(&pl, 0, sizeof(pl));
	pl.word = (volatile uint32_t *)(dst.buf + SLOT - 4);
	pl.slot = dst.buf;
	atomic_store(&pl.seen, -1);
	atomic_store(&pl.round, 0);
	if (pthread_create(&t, NULL, poll_slot, &pl) != 0) {
		fail("pthread_create");
		goto out;
	}
	for (r = 0; r < rounds; r++) {
		size_t n = body_of(r);
		uint32_t w = word_of(r);
		unsigned char *start = src.buf + SLOT - 4 - n;
		memset(start, r + 1, n);
		memcpy(src.buf + SLOT - 4, &w, 4);
		DAT_LMR_TRIPLET iov = triplet(&src, SLOT - 4 - n, n + 4);
		DAT_RMR_TRIPLET rt = { .rmr_context = dst.rkey, .virtual_address = dst.addr + SLOT - 4 - n,
				       .segment_length = n + 4 };
		DAT_DTO_COOKIE ck = { .as_64 = (DAT_UINT64)r };
		atomic_store(&pl.round, r);
		if (CALL(dat_ep_post_rdma_write(p.a.ep, 1, &iov, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS) {
			fail("dat_ep_post_rdma_write round %d", r);
			break;
		}
		if (!want_dto(p.a.req, WAIT_US, &dd, "write"))
			break;
		/* The poller takes this write before the next one is posted
		 * (the source slot is rewritten then). */
		while (atomic_load(&pl.seen) != r)
			;
		done++;
	}
	atomic_store(&pl.round, -1);
	pthread_join(t, NULL);
	CHECK(pl.torn == 0, "%ld of %d writes: the polled length word was seen torn (first: 0x%08x, written 0x%08x)",
	      pl.torn, done, pl.first_torn, pl.first_want);
	CHECK(pl.stale == 0, "%ld of %d writes: the length word was seen before the body in front of it", pl.stale,
	      done);
	CHECK_EQ(done, rounds, "writes taken by the poller");
	g_stats.ops += done;
	g_stats.bytes += pl.bytes;
	printf("# stat write_tail_whole writes %d torn %ld stale %ld\n", done, pl.torn, pl.stale);
out:
	pair_close(&p);
}

/* sends_land_whole: sends of sizes about the on-node provider's switches
 * (through the ring below 16 KiB and by reference from there, alone or in
 * a stream; with cross-memory attach off, or a host where lone sends keep
 * to the ring, through the ring: published whole below 32 KiB, in 16 KiB
 * pieces below 128 KiB and in 64 KiB pieces above; hence one at a time and
 * four at a time), each from
 * two segments into a receive of three lying apart in reverse order of
 * address, arrive whole, in order and with their length; then a send
 * longer than its receive fails at both ends and leaves the memory past
 * the receive untouched. */
#define BIG (1 << 20)
#define INFLIGHT 4

static void case_sends_land_whole(void)
{
	static const size_t sizes[] = { 1, 4095, 16383, 16384, 16385, 32767, 32768, 49153, 65535, 65536, 98305,
					131071, 131072, 196609, 262143, 262144, 262145, 300001, BIG - 5 };
	static const size_t inflights[] = { 1, INFLIGHT };
	DAT_EP_ATTR attr = small_attr(2 * INFLIGHT, 4);
	struct pair p;
	struct mem src, dst;
	DAT_DTO_COMPLETION_EVENT_DATA dd;
	size_t i, j, k, m, in;
	char what[64];
	int st;

	if (!pair_setup(&p, 64, &attr) || !pair_connect(&p) ||
	    !mem_reg(p.ia, p.pz, INFLIGHT * BIG, DAT_MEM_PRIV_ALL_FLAG, &src) ||
	    !mem_reg(p.ib, p.pzb, 2 * INFLIGHT * BIG, DAT_MEM_PRIV_ALL_FLAG, &dst))
		goto out;
	for (j = 0; j < 2 * sizeof(sizes) / sizeof(sizes[0]); j++) {
		i = j / 2;
		in = inflights[j % 2];
		size_t n = sizes[i], half = n / 3;
		DAT_LMR_TRIPLET r[INFLIGHT][3];
		memset(dst.buf, 0, 2 * INFLIGHT * BIG);
		for (m = 0; m < in; m++) {
			unsigned char *from = src.buf + m * BIG;
			size_t base = m * 2 * BIG;
			for (k = 0; k < n; k++)
				from[k] = (unsigned char)(k * 7 + i * 5 + m + 1);
			r[m][0] = triplet(&dst, base + BIG + 64, half + 1);
			r[m][1] = triplet(&dst, base + 4096, 17);
			r[m][2] = triplet(&dst, base + 8192, BIG - 8192);
			DAT_DTO_COOKIE ck = { .as_64 = (DAT_UINT64)m };
			if (CALL(dat_ep_post_recv(p.b.ep, 3, r[m], ck, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS) {
				fail("posting receive %zu", m);
				goto out;
			}
		}
		for (m = 0; m < in; m++) {
			DAT_LMR_TRIPLET s[2] = { triplet(&src, m * BIG, half), triplet(&src, m * BIG + half, n - half) };
			DAT_DTO_COOKIE ck = { .as_64 = (DAT_UINT64)m };
			if (CALL(dat_ep_post_send(p.a.ep, 2, s, ck, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS) {
				fail("posting %zu-byte send %zu", n, m);
				goto out;
			}
		}
		for (m = 0; m < in; m++) {
			snprintf(what, sizeof(what), "%zu-byte send %zu of %zu", n, m, in);
			if (!want_dto(p.a.req, WAIT_US, &dd, what))
				goto out;
			CHECK_EQ(dd.user_cookie.as_64, m, "send completions in order");
		}
		for (m = 0; m < in; m++) {
			unsigned char *from = src.buf + m * BIG;
			size_t at = 0, bad = n;
			snprintf(what, sizeof(what), "%zu-byte send %zu of %zu, its receive", n, m, in);
			if (!want_dto(p.b.recv, WAIT_US, &dd, what))
				goto out;
			CHECK_EQ(dd.user_cookie.as_64, m, "receive completions in order");
			CHECK_EQ(dd.transfered_length, n, "received length");
			for (k = 0; k < 3 && at < n; k++) {
				size_t take = r[m][k].segment_length < n - at ? r[m][k].segment_length : n - at;
				unsigned char *d = dst.buf + (r[m][k].virtual_address - dst.addr);
				size_t j;
				for (j = 0; j < take; j++)
					if (d[j] != from[at + j] && bad == n)
						bad = at + j;
				at += take;
			}
			CHECK(bad == n, "%zu-byte send %zu: byte %zu differs in the receive", n, m, bad);
			CHECK(dst.buf[m * 2 * BIG + BIG + 64 + half + 1] == 0, "%zu-byte send %zu: written past the first segment",
			      n, m);
			g_stats.ops++;
			g_stats.bytes += n;
		}
	}
	/* 300001 bytes into a receive of 65536: an error at both ends. */
	{
		DAT_LMR_TRIPLET r = triplet(&dst, 0, 65536), s = triplet(&src, 0, 300001);
		DAT_DTO_COOKIE ck = { .as_64 = 99 };
		memset(dst.buf, 0, 2 * INFLIGHT * BIG);
		if (CALL(dat_ep_post_recv(p.b.ep, 1, &r, ck, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS ||
		    CALL(dat_ep_post_send(p.a.ep, 1, &s, ck, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS) {
			fail("posting the long send");
			goto out;
		}
		st = next_dto(p.b.recv, WAIT_US, &dd, "the short receive");
		/* Soft-RoCE reports it as a local QP operation error (LOCAL_EP). */
		CHECK(st == DAT_DTO_ERR_LOCAL_LENGTH || st == DAT_DTO_ERR_LOCAL_EP,
		      "a receive too short: %s, expected DAT_DTO_ERR_LOCAL_LENGTH (or _LOCAL_EP)",
		      st >= 0 ? dto_status_name(st) : "none");
		st = next_dto(p.a.req, WAIT_US, &dd, "the long send");
		CHECK(st > 0, "a send longer than its receive: %s, expected an error", st >= 0 ? dto_status_name(st) : "none");
		for (k = 65536; k < 2 * INFLIGHT * BIG && dst.buf[k] == 0; k++)
			;
		CHECK(k == 2 * INFLIGHT * BIG, "a refused send wrote byte %zu, past its receive", k);
		g_stats.errors++;
	}
out:
	pair_close(&p);
}

const struct tcase placement_cases[] = {
	CASE("placement", write_tail_whole, 1),
	CASE("placement", sends_land_whole, 0),
};
const int placement_ncases = sizeof(placement_cases) / sizeof(placement_cases[0]);
