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
		if (next_dto(p.a.req, WAIT_US, &dd, "write") != DAT_DTO_SUCCESS)
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

const struct tcase placement_cases[] = {
	CASE("placement", write_tail_whole, 1),
};
const int placement_ncases = sizeof(placement_cases) / sizeof(placement_cases[0]);
