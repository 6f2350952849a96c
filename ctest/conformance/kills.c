/*
 * kills.c - peer_killed_rounds: a peer process SIGKILLed at a random moment,
 * round after round, and what the survivor must see each time.
 *
 * CONF_KILL_ROUNDS rounds (default 50) with one survivor IA.  Each round a
 * fresh peer (listening, memory registered, receives posted) is SIGKILLed
 * after a random delay, in one of three moments picked by the seed
 * (CONF_KILL_SEED, default 20261201, printed): during the connect, in the
 * middle of a stream of sends and RDMA writes, or while a big RDMA read
 * (CONF_KILL_BIG bytes, default 4 MiB) from its memory is in flight.  The
 * survivor must then see, within a bounded time:
 *   - a DISCONNECTED or BROKEN connection event (or, killed before the
 *     connection was made, a connect failure event),
 *   - every DTO it posted complete exactly once (success or error: none
 *     lost, none twice; a read that succeeded carries the peer's bytes),
 *   - no dat_evd_wait return later than its timeout,
 *   - the round's EP and EVDs free at once, and after the last round the IA
 *     close gracefully (DAT_CLOSE_GRACEFUL_FLAG), nothing left behind.
 *
 * Peers are forked by a spawner process forked before this process makes
 * any DAT call, so no peer shares this process's registered pages.
 */
#include "harness.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#define SMSG     4096
#define WMSG     65536
#define WIN      16
#define RECVS    8
#define MAXP     2048
#define EV_US    (60 * SEC)	/* a connection event must come within this */

enum { K_CONNECT, K_STREAM, K_READ, NKINDS };
static const char *kind_name[] = { "connect", "mid-stream", "RDMA read" };

struct peer_info {
	DAT_VADDR addr;
	DAT_RMR_CONTEXT rkey;
	int ok;
};

static size_t big_len(void)
{
	long n = getenv("CONF_KILL_BIG") ? atol(getenv("CONF_KILL_BIG")) : 4L << 20;

	return (size_t)(n < 65536 ? 65536 : n > (64L << 20) ? (64L << 20) : n);
}

static unsigned char big_pat(size_t i)
{
	return (unsigned char)((i * 2654435761u) >> 13);
}

/* ------------------------------------------------------------------ */
/* The peer                                                           */

static void peer_main(DAT_CONN_QUAL qual, int info_fd)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr, conn, req, recv;
	DAT_PZ_HANDLE pz;
	DAT_PSP_HANDLE psp;
	DAT_EP_HANDLE ep;
	DAT_EP_ATTR attr = small_attr(64, 1);
	DAT_EVENT ev;
	DAT_COUNT nm;
	struct mem big, rm;
	struct peer_info pi = { 0, 0, 0 };
	size_t len = big_len();

	if (dat_ia_open((DAT_NAME_PTR)g_ia, 8, &async, &ia) || dat_pz_create(ia, &pz) ||
	    dat_evd_create(ia, 8, NULL, DAT_EVD_CR_FLAG, &cr) || dat_evd_create(ia, 8, NULL, DAT_EVD_CONNECTION_FLAG, &conn) ||
	    dat_evd_create(ia, 128, NULL, DAT_EVD_DTO_FLAG, &req) || dat_evd_create(ia, 128, NULL, DAT_EVD_DTO_FLAG, &recv) ||
	    !mem_reg(ia, pz, len, DAT_MEM_PRIV_ALL_FLAG, &big) || !mem_reg(ia, pz, 64 * SMSG, DAT_MEM_PRIV_ALL_FLAG, &rm) ||
	    dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp) ||
	    dat_ep_create(ia, pz, recv, req, conn, &attr, &ep)) {
		if (write(info_fd, &pi, sizeof(pi)) < 0)
			_exit(3);
		_exit(3);
	}
	for (size_t i = 0; i < len; i++)
		big.buf[i] = big_pat(i);
	for (int i = 0; i < 64; i++) {
		DAT_LMR_TRIPLET t = triplet(&rm, (size_t)i * SMSG, SMSG);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
		dat_ep_post_recv(ep, 1, &t, ck, 0);
	}
	pi.addr = big.addr;
	pi.rkey = big.rkey;
	pi.ok = 1;
	if (write(info_fd, &pi, sizeof(pi)) != (ssize_t)sizeof(pi))
		_exit(3);
	if (dat_evd_wait(cr, 120 * SEC, 1, &ev, &nm) != DAT_SUCCESS)
		_exit(0);
	if (dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL) != DAT_SUCCESS)
		_exit(3);
	/* a sink: every message taken, its receive posted again, until killed */
	for (;;) {
		if (dat_evd_wait(recv, 200000, 1, &ev, &nm) != DAT_SUCCESS)
			continue;
		DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
		if (d->status != DAT_DTO_SUCCESS)
			_exit(0);
		DAT_LMR_TRIPLET t = triplet(&rm, (size_t)d->user_cookie.as_64 * SMSG, SMSG);
		dat_ep_post_recv(ep, 1, &t, d->user_cookie, 0);
	}
}

/* The spawner: forked before any DAT call; forks one peer per request
 * (a connection qualifier) and answers with its pid. */
static void spawner_main(int cmd, int pids, int info_fd)
{
	DAT_CONN_QUAL qual;

	signal(SIGCHLD, SIG_IGN);	/* killed peers are reaped by the kernel */
	while (read(cmd, &qual, sizeof(qual)) == (ssize_t)sizeof(qual)) {
		pid_t p = fork();
		if (p == 0) {
			close(cmd);
			close(pids);
			peer_main(qual, info_fd);
			_exit(0);
		}
		if (write(pids, &p, sizeof(p)) != (ssize_t)sizeof(p))
			break;
	}
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* The survivor                                                       */

struct round {
	unsigned char seen[MAXP + 1];
	int posted, done, dup, unknown, ok, flushed, errors;
	int reads_ok, reads_failed, hangs;
};

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* dat_evd_wait, checked for returning late: a call must not hang past its timeout. */
static DAT_RETURN timed_wait(struct round *R, DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_EVENT *ev)
{
	double t0 = now_s();
	DAT_RETURN r = wait_ev(evd, us, ev);
	double late = now_s() - t0 - us / 1e6;

	if (late > 2.0) {
		R->hangs++;
		fail("dat_evd_wait(%.1f s) returned %.1f s late", us / 1e6, late);
	}
	return r;
}

static struct mem S_src, S_big;	/* survivor memory: send/write sources, read target */
static size_t S_big_len;

static void tally(struct round *R, const DAT_EVENT *ev)
{
	const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
	uint64_t k = d->user_cookie.as_64;

	if (ev->event_number != DAT_DTO_COMPLETION_EVENT || k == 0 || k > (uint64_t)R->posted) {
		R->unknown++;
		return;
	}
	if (R->seen[k]++) {
		R->dup++;
		return;
	}
	R->done++;
	if (d->status == DAT_DTO_SUCCESS)
		R->ok++;
	else if (d->status == DAT_DTO_ERR_FLUSHED)
		R->flushed++;
	else
		R->errors++;
	if (d->operation == DAT_DTO_RDMA_READ) {
		if (d->status == DAT_DTO_SUCCESS) {
			size_t i;
			for (i = 0; i < S_big_len && S_big.buf[i] == big_pat(i); i++)
				;
			CHECK(i == S_big_len, "an RDMA read that succeeded differs from the peer's memory at byte %zu", i);
			R->reads_ok++;
		} else {
			R->reads_failed++;
		}
	}
}

static int post_one(struct round *R, DAT_EP_HANDLE ep, int what, const struct peer_info *pi)
{
	DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)(R->posted + 1) };
	DAT_RETURN r;

	if (R->posted >= MAXP)
		return 0;
	if (what == 0) {
		DAT_LMR_TRIPLET l = triplet(&S_src, 0, SMSG);
		r = dat_ep_post_send(ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG);
	} else if (what == 1) {
		DAT_LMR_TRIPLET l = triplet(&S_src, 0, WMSG);
		DAT_RMR_TRIPLET rt = { pi->addr, WMSG, pi->rkey };
		r = dat_ep_post_rdma_write(ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG);
	} else {
		DAT_LMR_TRIPLET l = triplet(&S_big, 0, S_big_len);
		DAT_RMR_TRIPLET rt = { pi->addr, (DAT_SEG_LENGTH)S_big_len, pi->rkey };
		memset(S_big.buf, 0, S_big_len);
		r = dat_ep_post_rdma_read(ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG);
	}
	if (r == DAT_SUCCESS) {
		R->posted++;
		return 1;
	}
	/* once the connection is gone, a post may be refused, as not connected */
	CHECK(DAT_GET_TYPE(r) == DAT_INVALID_STATE, "post refused with %s", describe(r));
	return 0;
}

static void case_peer_killed_rounds(void)
{
	int rounds = getenv("CONF_KILL_ROUNDS") ? atoi(getenv("CONF_KILL_ROUNDS")) : 50;
	unsigned long seed = getenv("CONF_KILL_SEED") ? strtoul(getenv("CONF_KILL_SEED"), NULL, 0) : 20261201ul;
	DAT_CONN_QUAL qual0 = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	int cmd[2], pidp[2], info[2];
	pid_t spawner, peer = 0;
	DAT_IA_HANDLE ia = NULL;
	DAT_PZ_HANDLE pz = NULL;
	struct sockaddr_in self;
	static struct round R;
	int by_kind[NKINDS] = { 0 }, survived = 0, failed_connects = 0, reads_ok = 0, reads_failed = 0;
	long posted_total = 0, ok_total = 0, flushed_total = 0, err_total = 0;
	double t_start = now_s();

	rounds = rounds < 1 ? 1 : rounds > 500 ? 500 : rounds;
	rng = seed * 0x9e3779b97f4a7c15ull | 1;
	printf("# peer_killed_rounds: seed %lu (CONF_KILL_SEED), %d rounds, RDMA read %zu bytes\n", seed, rounds, big_len());
	if (pipe(cmd) || pipe(pidp) || pipe(info)) {
		fail("pipe");
		return;
	}
	fflush(stdout);
	fflush(stderr);
	spawner = fork();
	if (spawner == 0) {
		close(cmd[1]);
		close(pidp[0]);
		close(info[0]);
		spawner_main(cmd[0], pidp[1], info[1]);
	}
	close(cmd[0]);
	close(pidp[1]);
	close(info[1]);

	ia = open_ia(g_ia);
	if (!ia)
		goto out;
	pz = make_pz(ia);
	S_big_len = big_len();
	if (!pz || !self_addr(ia, &self) || !mem_reg(ia, pz, WMSG + RECVS * SMSG, DAT_MEM_PRIV_ALL_FLAG, &S_src) ||
	    !mem_reg(ia, pz, S_big_len, DAT_MEM_PRIV_ALL_FLAG, &S_big))
		goto out;

	for (int round = 0; round < rounds; round++) {
		DAT_CONN_QUAL qual = qual0 + (DAT_CONN_QUAL)(round % 4);
		int kind = (int)rnd(NKINDS);
		struct peer_info pi;
		struct pollfd pf = { info[0], POLLIN, 0 };
		DAT_EVD_HANDLE req = NULL, recv = NULL, conn = NULL;
		DAT_EP_HANDLE ep = NULL;
		DAT_EP_ATTR attr = small_attr(WIN + 4, 1);
		DAT_EVENT ev;
		DAT_RETURN r;
		int established = 0, ended = 0, killed = 0, nfail = g_fails;

		memset(&R, 0, sizeof(R));
		by_kind[kind]++;
		if (write(cmd[1], &qual, sizeof(qual)) != (ssize_t)sizeof(qual) ||
		    read(pidp[0], &peer, sizeof(peer)) != (ssize_t)sizeof(peer)) {
			fail("round %d: the spawner is gone", round);
			break;
		}
		if (poll(&pf, 1, 60000) != 1 || read(info[0], &pi, sizeof(pi)) != (ssize_t)sizeof(pi) || !pi.ok) {
			fail("round %d: the peer (pid %d) did not start", round, (int)peer);
			break;
		}
		req = make_evd(ia, 64, DAT_EVD_DTO_FLAG);
		recv = make_evd(ia, 64, DAT_EVD_DTO_FLAG);
		conn = make_evd(ia, 8, DAT_EVD_CONNECTION_FLAG);
		if (!req || !recv || !conn || CALL(dat_ep_create(ia, pz, recv, req, conn, &attr, &ep)) != DAT_SUCCESS) {
			fail("round %d: survivor setup", round);
			break;
		}
		/* receives the peer never fills: each must come back, flushed */
		for (int i = 0; i < RECVS; i++) {
			DAT_LMR_TRIPLET l = triplet(&S_src, WMSG + (size_t)i * SMSG, SMSG);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)(MAXP + 1 + i) };
			CHECK_RC(dat_ep_post_recv(ep, 1, &l, ck, 0), DAT_SUCCESS, "round %d: post_recv", round);
		}
		r = CALL(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&self, qual, 10 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT,
					DAT_CONNECT_DEFAULT_FLAG));
		if (r != DAT_SUCCESS) {
			fail("round %d: dat_ep_connect: %s", round, describe(r));
			break;
		}
		if (kind == K_CONNECT) {
			/* somewhere between the request leaving and the connection settling */
			usleep(rnd(3000));
			kill(peer, SIGKILL);
			killed = 1;
		}
		r = timed_wait(&R, conn, EV_US, &ev);
		if (r != DAT_SUCCESS) {
			fail("round %d (%s): no connection event: %s", round, kind_name[kind], describe(r));
		} else if (ev.event_number == DAT_CONNECTION_EVENT_ESTABLISHED) {
			established = 1;
		} else if (!killed) {
			fail("round %d: connect to a live peer: %s", round, event_name(ev.event_number));
		} else {
			ended = 1;	/* the connect failed: the peer died first */
			failed_connects++;
			g_stats.errors++;
		}
		if (established && kind == K_STREAM) {
			/* sends and RDMA writes, WIN outstanding; the kill after a random count */
			int kill_at = (int)rnd(300), outstanding = 0;
			while (R.posted < MAXP - 1) {
				if (!killed && R.done >= kill_at) {
					kill(peer, SIGKILL);
					killed = 1;
				}
				if (outstanding < WIN) {
					if (!post_one(&R, ep, R.posted % 2, &pi))
						break;
					outstanding++;
					continue;
				}
				if (timed_wait(&R, req, 20 * SEC, &ev) != DAT_SUCCESS) {
					fail("round %d: no DTO completion within 20 s (peer %s)", round, killed ? "dead" : "alive");
					break;
				}
				tally(&R, &ev);
				outstanding--;
				if (killed && R.flushed + R.errors > 0)
					break;	/* the EP is in error: what is left flushes */
			}
		} else if (established && kind == K_READ) {
			/* a few sends, then the big read, then the kill while it runs */
			for (int i = 0; i < 4; i++)
				post_one(&R, ep, 0, &pi);
			post_one(&R, ep, 2, &pi);
			usleep(rnd(2000));
			kill(peer, SIGKILL);
			killed = 1;
		}
		if (!killed) {
			kill(peer, SIGKILL);
			killed = 1;
		}
		/* the survivor is told: DISCONNECTED or BROKEN */
		while (established && !ended) {
			r = timed_wait(&R, conn, EV_US, &ev);
			if (r != DAT_SUCCESS) {
				fail("round %d (%s): no DISCONNECTED or BROKEN within %d s of the kill: %s", round,
				     kind_name[kind], EV_US / SEC, describe(r));
				break;
			}
			if (ev.event_number == DAT_CONNECTION_EVENT_DISCONNECTED ||
			    ev.event_number == DAT_CONNECTION_EVENT_BROKEN) {
				ended = 1;
				g_stats.errors++;
			} else {
				fail("round %d: connection event %s after the kill", round, event_name(ev.event_number));
				break;
			}
		}
		/* every DTO completes, exactly once, and then nothing more */
		double end = now_s() + 60;
		while (R.done < R.posted && now_s() < end)
			if (timed_wait(&R, req, SEC, &ev) == DAT_SUCCESS)
				tally(&R, &ev);
		while (timed_wait(&R, req, 100000, &ev) == DAT_SUCCESS)
			tally(&R, &ev);
		int rdone = 0, rflushed = 0, rother = 0, rdup = 0;
		unsigned char rseen[RECVS] = { 0 };
		end = now_s() + 60;
		while (rdone < RECVS && now_s() < end) {
			if (timed_wait(&R, recv, SEC, &ev) != DAT_SUCCESS)
				continue;
			uint64_t k = ev.event_data.dto_completion_event_data.user_cookie.as_64 - (MAXP + 1);
			if (ev.event_number != DAT_DTO_COMPLETION_EVENT || k >= RECVS) {
				rother++;
				continue;
			}
			if (rseen[k]++) {
				rdup++;
				continue;
			}
			rdone++;
			rflushed += ev.event_data.dto_completion_event_data.status == DAT_DTO_ERR_FLUSHED;
		}
		while (timed_wait(&R, recv, 100000, &ev) == DAT_SUCCESS)
			rother++;
		CHECK(R.done == R.posted, "round %d (%s): %d of %d DTOs completed", round, kind_name[kind], R.done, R.posted);
		for (int k = 1, shown = 0; k <= R.posted && shown < 4; k++)
			if (!R.seen[k] && ++shown)
				note("round %d: DTO #%d of %d (%s) never completed", round, k, R.posted,
				     kind == K_STREAM ? (k % 2 ? "send" : "RDMA write") : "send or read");
		CHECK(R.dup == 0 && rdup == 0, "round %d: %d DTO and %d receive completions duplicated", round, R.dup, rdup);
		CHECK(R.unknown == 0 && rother == 0, "round %d: %d + %d completions never posted", round, R.unknown, rother);
		CHECK(rdone == RECVS && rflushed == RECVS, "round %d (%s): %d of %d receives completed, %d as flushed", round,
		      kind_name[kind], rdone, RECVS, rflushed);
		/* a dead connection's EP and its EVDs free at once */
		CHECK_RC(dat_ep_free(ep), DAT_SUCCESS, "round %d: dat_ep_free", round);
		CHECK_RC(dat_evd_free(req), DAT_SUCCESS, "round %d: dat_evd_free(request)", round);
		CHECK_RC(dat_evd_free(recv), DAT_SUCCESS, "round %d: dat_evd_free(receive)", round);
		CHECK_RC(dat_evd_free(conn), DAT_SUCCESS, "round %d: dat_evd_free(connection)", round);
		g_stats.lost += R.posted - R.done + RECVS - rdone;
		g_stats.dup += R.dup + rdup;
		posted_total += R.posted + RECVS;
		ok_total += R.ok;
		flushed_total += R.flushed + rflushed;
		err_total += R.errors;
		reads_ok += R.reads_ok;
		reads_failed += R.reads_failed;
		if (g_fails != nfail) {
			note("round %d failed (%s), seed %lu", round, kind_name[kind], seed);
			break;
		}
		survived++;
	}
	printf("# peer_killed_rounds: %d of %d rounds survived in %.1f s (%d at connect, %d mid-stream, %d during a "
	       "read); %d connects failed; %ld DTOs: %ld succeeded, %ld flushed, %ld in error; reads %d whole, %d cut\n",
	       survived, rounds, now_s() - t_start, by_kind[K_CONNECT], by_kind[K_STREAM], by_kind[K_READ],
	       failed_connects, posted_total, ok_total, flushed_total, err_total, reads_ok, reads_failed);
	CHECK(survived == rounds, "%d of %d rounds survived", survived, rounds);
	g_stats.kills = survived;
	g_stats.faults += survived;
	g_stats.ops = posted_total;
	cover("dat_ep_post_send dat_ep_post_rdma_write dat_ep_post_rdma_read dat_ep_post_recv dat_evd_wait dat_ep_connect "
	      "dat_ep_free dat_evd_free dat_lmr_free dat_pz_free dat_ia_close");
	/* everything freed, the IA closes gracefully */
	CHECK_RC(dat_lmr_free(S_src.lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_lmr_free(S_big.lmr), DAT_SUCCESS, "dat_lmr_free(big)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ia_close(GRACEFUL) after %d kill rounds",
		 survived);
	ia = NULL;
out:
	if (peer > 0)
		kill(peer, SIGKILL);
	close(cmd[1]);	/* the spawner ends */
	waitpid(spawner, NULL, 0);
	if (ia)
		close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(ABRUPT) after a failed round");
}

const struct tcase kills_cases[] = {
	CASE("faults", peer_killed_rounds, 0),
};
const int kills_ncases = sizeof(kills_cases) / sizeof(kills_cases[0]);
