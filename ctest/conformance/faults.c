/*
 * faults.c - the survivor's view of faults: a peer process killed mid-stream,
 * connects to nobody and to a dead listener, a server that restarts, an
 * abrupt close with everything live (checked with `rdma resource show`),
 * receive queue overrun, and DTO EVD overflow.
 *
 * Peers are separate processes, forked before this process makes any DAT
 * call (a fork after registering memory would share pinned pages); a peer
 * that must start later waits on a pipe.
 */
#include "harness.h"

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#define MSG  256
#define SLOTS 16

/* ------------------------------------------------------------------ */
/* The peer process                                                   */

enum { SRV_SINK, SRV_ECHO, SRV_LISTEN };

struct server {
	pid_t pid;
	int ready;	/* read end: one byte when listening */
	int go;		/* write end: start (for a server that waits) */
};

static void srv_die(const char *what, DAT_RETURN r)
{
	fprintf(stderr, "server %d: %s: %s\n", (int)getpid(), what, describe(r));
	_exit(3);
}

/* The peer: listens on qual, accepts one connection at a time, and either
 * swallows every message (SINK), returns it (ECHO) or never accepts (LISTEN).
 * Runs until killed. */
static void server_main(DAT_CONN_QUAL qual, int mode, int ready, int go)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
	DAT_EVD_HANDLE async = DAT_HANDLE_NULL, cr, conn, req, recv;
	DAT_PZ_HANDLE pz;
	DAT_PSP_HANDLE psp;
	DAT_EP_HANDLE ep;
	DAT_EVENT ev;
	DAT_COUNT nm;
	struct mem m;
	DAT_EP_ATTR attr = small_attr(SLOTS, 1);
	char c;
	DAT_RETURN r;

	if (go >= 0 && read(go, &c, 1) != 1)
		_exit(0);
	if ((r = dat_ia_open((DAT_NAME_PTR)g_ia, 8, &async, &ia)) != DAT_SUCCESS)
		srv_die("dat_ia_open", r);
	if ((r = dat_pz_create(ia, &pz)) != DAT_SUCCESS)
		srv_die("dat_pz_create", r);
	if (dat_evd_create(ia, 8, NULL, DAT_EVD_CR_FLAG, &cr) || dat_evd_create(ia, 8, NULL, DAT_EVD_CONNECTION_FLAG, &conn) ||
	    dat_evd_create(ia, 64, NULL, DAT_EVD_DTO_FLAG, &req) || dat_evd_create(ia, 64, NULL, DAT_EVD_DTO_FLAG, &recv))
		srv_die("dat_evd_create", 0);
	if (!mem_reg(ia, pz, MSG * SLOTS, DAT_MEM_PRIV_ALL_FLAG, &m))
		srv_die("dat_lmr_create", 0);
	if ((r = dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS)
		srv_die("dat_psp_create", r);
	if (write(ready, "R", 1) != 1)
		_exit(3);
	for (;;) {
		if (dat_evd_wait(cr, DAT_TIMEOUT_INFINITE, 1, &ev, &nm) != DAT_SUCCESS)
			continue;
		if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT || mode == SRV_LISTEN)
			continue;
		if ((r = dat_ep_create(ia, pz, recv, req, conn, &attr, &ep)) != DAT_SUCCESS)
			srv_die("dat_ep_create", r);
		for (int i = 0; i < SLOTS; i++) {
			DAT_LMR_TRIPLET t = triplet(&m, (size_t)i * MSG, MSG);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
			if ((r = dat_ep_post_recv(ep, 1, &t, ck, 0)) != DAT_SUCCESS)
				srv_die("dat_ep_post_recv", r);
		}
		if ((r = dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, ep, 0, NULL)) != DAT_SUCCESS)
			srv_die("dat_cr_accept", r);
		for (;;) {
			if (dat_evd_wait(recv, 200000, 1, &ev, &nm) != DAT_SUCCESS) {
				/* drop a connection the client ended */
				if (dat_evd_dequeue(conn, &ev) == DAT_SUCCESS &&
				    ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) {
					dat_ep_free(ep);
					break;
				}
				continue;
			}
			DAT_DTO_COMPLETION_EVENT_DATA *d = &ev.event_data.dto_completion_event_data;
			if (d->status != DAT_DTO_SUCCESS)
				continue;
			int slot = (int)d->user_cookie.as_64;
			DAT_LMR_TRIPLET t = triplet(&m, (size_t)slot * MSG, MSG);
			if (mode == SRV_ECHO) {
				t.segment_length = d->transfered_length;
				/* answered at once, maybe before this side's ESTABLISHED */
				if ((r = dat_ep_post_send(ep, 1, &t, d->user_cookie, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS)
					fprintf(stderr, "server %d: echo dat_ep_post_send: %s\n", (int)getpid(), describe(r));
				else if ((r = dat_evd_wait(req, 10 * SEC, 1, &ev, &nm)) != DAT_SUCCESS)
					fprintf(stderr, "server %d: echo completion: %s\n", (int)getpid(), describe(r));
				t.segment_length = MSG;
			}
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)slot };
			dat_ep_post_recv(ep, 1, &t, ck, 0);
		}
	}
}

/* Forks a peer now (before any DAT call here); with `delayed` it opens its
 * IA only after server_go. */
static int server_fork(struct server *s, DAT_CONN_QUAL qual, int mode, int delayed)
{
	int rp[2], gp[2] = { -1, -1 };

	if (pipe(rp) != 0 || (delayed && pipe(gp) != 0)) {
		fail("pipe: %s", strerror(errno));
		return 0;
	}
	fflush(stdout);
	fflush(stderr);
	s->pid = fork();
	if (s->pid < 0) {
		fail("fork: %s", strerror(errno));
		return 0;
	}
	if (s->pid == 0) {
		close(rp[0]);
		if (delayed)
			close(gp[1]);
		server_main(qual, mode, rp[1], delayed ? gp[0] : -1);
		_exit(0);
	}
	close(rp[1]);
	if (delayed)
		close(gp[0]);
	s->ready = rp[0];
	s->go = gp[1];
	return 1;
}

static int server_wait_ready(struct server *s)
{
	struct pollfd pf = { s->ready, POLLIN, 0 };
	char c;

	if (s->go >= 0 && write(s->go, "G", 1) != 1) {
		fail("starting the server: %s", strerror(errno));
		return 0;
	}
	if (poll(&pf, 1, 60000) != 1 || read(s->ready, &c, 1) != 1) {
		fail("the server (pid %d) did not start listening within 60 s", (int)s->pid);
		return 0;
	}
	return 1;
}

static void server_kill(struct server *s)
{
	int st;

	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &st, 0);
	}
	s->pid = 0;
}

/* ------------------------------------------------------------------ */
/* The surviving client                                               */

struct client {
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE req, recv, conn;
	DAT_EP_HANDLE ep;
	struct mem m;
	struct sockaddr_in self;
};

static int client_open(struct client *c, DAT_COUNT dtos)
{
	DAT_EP_ATTR attr = small_attr(dtos, 1);

	memset(c, 0, sizeof(*c));
	c->ia = open_ia(g_ia);
	if (!c->ia)
		return 0;
	c->pz = make_pz(c->ia);
	c->req = make_evd(c->ia, 256, DAT_EVD_DTO_FLAG);
	c->recv = make_evd(c->ia, 256, DAT_EVD_DTO_FLAG);
	c->conn = make_evd(c->ia, 8, DAT_EVD_CONNECTION_FLAG);
	if (!c->pz || !c->req || !c->recv || !c->conn || !self_addr(c->ia, &c->self))
		return 0;
	if (!mem_reg(c->ia, c->pz, MSG * 64, DAT_MEM_PRIV_ALL_FLAG, &c->m))
		return 0;
	if (CALL(dat_ep_create(c->ia, c->pz, c->recv, c->req, c->conn, &attr, &c->ep)) != DAT_SUCCESS) {
		fail("dat_ep_create");
		return 0;
	}
	return 1;
}

static int client_connect(struct client *c, DAT_CONN_QUAL qual)
{
	DAT_EVENT ev;
	DAT_RETURN r = CALL(dat_ep_connect(c->ep, (DAT_IA_ADDRESS_PTR)&c->self, qual, 20 * SEC, 0, NULL,
					   DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));

	if (r != DAT_SUCCESS) {
		fail("dat_ep_connect: %s", describe(r));
		return 0;
	}
	return expect_ev(c->conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "client connect");
}

/* Every DTO posted completes exactly once: cookies are 1..n, tracked here. */
struct tally {
	unsigned char seen[4096];
	int n, done, flushed, errors, dup, unknown;
};

static void tally_event(struct tally *t, const DAT_DTO_COMPLETION_EVENT_DATA *d)
{
	uint64_t k = d->user_cookie.as_64;

	if (k == 0 || k > (uint64_t)t->n) {
		t->unknown++;
		return;
	}
	if (t->seen[k]++) {
		t->dup++;
		return;
	}
	t->done++;
	if (d->status == DAT_DTO_ERR_FLUSHED)
		t->flushed++;
	else if (d->status != DAT_DTO_SUCCESS)
		t->errors++;
}

/* Reaps evd until every one of t's DTOs completed (or `secs` pass). */
static void tally_drain(struct tally *t, DAT_EVD_HANDLE evd, double secs, const char *what)
{
	double end = now_s() + secs;
	DAT_EVENT ev;

	while (t->done < t->n && now_s() < end) {
		if (wait_ev(evd, 500000, &ev) != DAT_SUCCESS)
			continue;
		if (ev.event_number == DAT_DTO_COMPLETION_EVENT)
			tally_event(t, &ev.event_data.dto_completion_event_data);
	}
	/* and nothing more comes */
	while (wait_ev(evd, 500000, &ev) == DAT_SUCCESS)
		if (ev.event_number == DAT_DTO_COMPLETION_EVENT)
			tally_event(t, &ev.event_data.dto_completion_event_data);
	CHECK(t->done == t->n, "%s: %d of %d DTOs completed (lost %d)", what, t->done, t->n, t->n - t->done);
	CHECK(t->dup == 0, "%s: %d completions duplicated", what, t->dup);
	CHECK(t->unknown == 0, "%s: %d completions with a cookie never posted", what, t->unknown);
	g_stats.lost += t->n - t->done;
	g_stats.dup += t->dup;
	g_stats.ops += t->n;
}

static void case_peer_killed(void)
{
	struct server s;
	struct client c;
	struct tally sends, recvs;
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	DAT_EVENT ev;
	int outstanding = 0, killed = 0;

	memset(&sends, 0, sizeof(sends));
	memset(&recvs, 0, sizeof(recvs));
	if (!server_fork(&s, qual, SRV_SINK, 0))
		return;
	if (!server_wait_ready(&s) || !client_open(&c, 32))
		goto out;
	/* receives the peer will never fill: they must flush */
	for (int i = 0; i < 8; i++) {
		DAT_LMR_TRIPLET t = triplet(&c.m, (size_t)(32 + i) * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)++recvs.n };
		CHECK_RC(dat_ep_post_recv(c.ep, 1, &t, ck, 0), DAT_SUCCESS, "dat_ep_post_recv %d", i);
	}
	if (!client_connect(&c, qual))
		goto out;
	/* stream sends, up to 16 outstanding; kill the peer after 100 completed */
	while (sends.n < 2000) {
		DAT_RETURN r;
		if (!killed && sends.done >= 100) {
			kill(s.pid, SIGKILL);
			killed = 1;
			note("peer killed with %d sends outstanding", outstanding);
		}
		if (outstanding < 16) {
			DAT_LMR_TRIPLET t = triplet(&c.m, (size_t)(sends.n % 16) * MSG, MSG);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)(sends.n + 1) };
			r = CALL(dat_ep_post_send(c.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
			if (r == DAT_SUCCESS) {
				sends.n++;
				outstanding++;
				continue;
			}
			if (!killed)
				fail("dat_ep_post_send before the kill: %s", describe(r));
			else
				CHECK(DAT_GET_TYPE(r) == DAT_INVALID_STATE, "post after the peer died: %s", describe(r));
			break;
		}
		if (wait_ev(c.req, 20 * SEC, &ev) != DAT_SUCCESS) {
			fail("no send completion within 20 s (%d outstanding, peer %s)", outstanding, killed ? "dead" : "alive");
			break;
		}
		tally_event(&sends, &ev.event_data.dto_completion_event_data);
		outstanding--;
		if (killed && sends.flushed + sends.errors > 0)
			break;	/* the QP is in error: everything else flushes */
	}
	CHECK(killed, "the stream ended before the peer was killed");
	/* the survivor is told */
	DAT_RETURN r = wait_ev(c.conn, 90 * SEC, &ev);
	if (r != DAT_SUCCESS)
		fail("no connection event within 90 s of the peer's death: %s", describe(r));
	else if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED && ev.event_number != DAT_CONNECTION_EVENT_BROKEN)
		fail("connection event %s, expected DISCONNECTED or BROKEN", event_name(ev.event_number));
	else
		g_stats.errors++;
	tally_drain(&sends, c.req, 60, "sends");
	tally_drain(&recvs, c.recv, 60, "receives");
	CHECK(recvs.flushed == recvs.n, "%d of %d never-filled receives completed as flushed", recvs.flushed, recvs.n);
	CHECK(sends.flushed + sends.errors > 0 || sends.done == sends.n,
	      "no send failed after the kill (sends %d)", sends.n);
	g_stats.faults++;
out:
	server_kill(&s);
	close_ia(c.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
}

/* No listener on the qualifier: NON_PEER_REJECTED, within the timeout. */
static void case_connect_no_listener(void)
{
	struct client c;
	DAT_EVENT ev;
	double t0;

	if (!client_open(&c, 8))
		goto out;
	t0 = now_s();
	CHECK_RC(dat_ep_connect(c.ep, (DAT_IA_ADDRESS_PTR)&c.self, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8), 10 * SEC,
				0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS, "dat_ep_connect(nobody listening)");
	if (expect_ev(c.conn, 30 * SEC, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev, "connect to no listener")) {
		CHECK(ev.event_data.connect_event_data.ep_handle == c.ep, "event names EP %p", (void *)ev.event_data.connect_event_data.ep_handle);
		CHECK(now_s() - t0 < 15, "the rejection took %.1f s (timeout 10 s)", now_s() - t0);
	}
	/* the EP can be reset and used again */
	CHECK_RC(dat_ep_reset(c.ep), DAT_SUCCESS, "dat_ep_reset after the rejection");
	CHECK_RC(dat_ep_connect(c.ep, (DAT_IA_ADDRESS_PTR)&c.self, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8 + 1),
				10 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS, "dat_ep_connect after the reset");
	expect_ev(c.conn, 30 * SEC, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev, "second connect to no listener");
	g_stats.faults++;
out:
	close_ia(c.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
}

/* The listener was there and died: the same answer, not a hang. */
static void case_connect_dead_listener(void)
{
	struct server s;
	struct client c;
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	DAT_EVENT ev;
	double t0;

	memset(&c, 0, sizeof(c));
	if (!server_fork(&s, qual, SRV_LISTEN, 0))
		return;
	if (!server_wait_ready(&s))
		goto out;
	server_kill(&s);
	if (!client_open(&c, 8))
		goto out;
	t0 = now_s();
	CHECK_RC(dat_ep_connect(c.ep, (DAT_IA_ADDRESS_PTR)&c.self, qual, 10 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect(listener killed)");
	if (expect_ev(c.conn, 30 * SEC, DAT_CONNECTION_EVENT_NON_PEER_REJECTED, &ev, "connect to a dead listener"))
		CHECK(now_s() - t0 < 15, "the rejection took %.1f s (timeout 10 s)", now_s() - t0);
	g_stats.faults++;
out:
	server_kill(&s);
	close_ia(c.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
}

/* One echo round trip on the client's connected EP. */
static int echo_once(struct client *c, unsigned seed, const char *what)
{
	DAT_LMR_TRIPLET st = triplet(&c->m, 0, MSG), rt = triplet(&c->m, MSG, MSG);
	DAT_DTO_COOKIE sk = { .as_64 = 1000 + seed }, rk = { .as_64 = 2000 + seed };
	DAT_DTO_COMPLETION_EVENT_DATA d;

	for (int i = 0; i < MSG; i++) {
		c->m.buf[i] = (unsigned char)(seed * 31 + (unsigned)i);
		c->m.buf[MSG + i] = 0;
	}
	CHECK_RC(dat_ep_post_recv(c->ep, 1, &rt, rk, 0), DAT_SUCCESS, "%s: dat_ep_post_recv", what);
	CHECK_RC(dat_ep_post_send(c->ep, 1, &st, sk, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "%s: dat_ep_post_send", what);
	if (!want_dto(c->req, WAIT_US, &d, what) || !want_dto(c->recv, WAIT_US, &d, what))
		return 0;
	CHECK_EQ(d.user_cookie.as_64, 2000 + seed, "echo receive cookie");
	CHECK_EQ(d.transfered_length, MSG, "echo length");
	if (memcmp(c->m.buf, c->m.buf + MSG, MSG) != 0) {
		fail("%s: the echo differs from what was sent", what);
		return 0;
	}
	g_stats.bytes += MSG;
	g_stats.ops += 2;
	return 1;
}

/* The server dies and a new one takes its place: the client notices, resets
 * its EP and connects again to the new one. */
static void case_server_restart(void)
{
	struct server s1, s2;
	struct client c;
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	DAT_EVENT ev;
	DAT_EP_STATE st;

	memset(&c, 0, sizeof(c));
	memset(&s1, 0, sizeof(s1));
	memset(&s2, 0, sizeof(s2));
	if (!server_fork(&s1, qual, SRV_ECHO, 0) || !server_fork(&s2, qual, SRV_ECHO, 1))
		goto out;
	if (!server_wait_ready(&s1) || !client_open(&c, 8) || !client_connect(&c, qual))
		goto out;
	if (!echo_once(&c, 1, "echo from the first server"))
		goto out;
	server_kill(&s1);
	DAT_RETURN r = wait_ev(c.conn, 90 * SEC, &ev);
	if (r != DAT_SUCCESS || (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED &&
				 ev.event_number != DAT_CONNECTION_EVENT_BROKEN)) {
		fail("after the server died: %s %s, expected DISCONNECTED or BROKEN", describe(r),
		     r == DAT_SUCCESS ? event_name(ev.event_number) : "");
		goto out;
	}
	g_stats.errors++;
	CHECK_RC(dat_ep_get_status(c.ep, &st, NULL, NULL), DAT_SUCCESS, "dat_ep_get_status");
	CHECK_EQ(st, DAT_EP_STATE_DISCONNECTED, "client EP state after the server died");
	CHECK_RC(dat_ep_reset(c.ep), DAT_SUCCESS, "dat_ep_reset");
	if (!server_wait_ready(&s2) || !client_connect(&c, qual))
		goto out;
	if (echo_once(&c, 2, "echo from the restarted server") && echo_once(&c, 3, "second echo"))
		g_stats.faults++;
	CHECK_RC(dat_ep_disconnect(c.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ep_disconnect");
	expect_ev(c.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "graceful disconnect");
out:
	server_kill(&s1);
	server_kill(&s2);
	close_ia(c.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
}

/* dat_ia_close(ABRUPT) with connected EPs, posted DTOs, LMRs, an RMR, an SRQ:
 * every verbs object of this process is gone afterwards. */
static void case_abrupt_close_releases(void)
{
	static const char *kinds[] = { "qp", "cq", "mr", "pd", "cm_id", "srq" };
	enum { NK = sizeof(kinds) / sizeof(kinds[0]) };
	int base[NK], live[NK], after[NK];
	pid_t me = getpid();

	for (int k = 0; k < NK; k++)
		base[k] = rdma_count(kinds[k], me);
	if (base[0] < 0) {
		fail("rdma resource show gives nothing: cannot count verbs objects");
		return;
	}
	for (int round = 0; round < 2; round++) {
		struct pair p;
		struct mem m[4];
		DAT_RMR_HANDLE rmr = NULL;
		DAT_SRQ_HANDLE srq = NULL;
		DAT_SRQ_ATTR sa = { 8, 1, 0 };
		if (!pair_open(&p))
			return;
		for (int i = 0; i < 4; i++)
			if (!mem_reg(p.ia, p.pz, 16384, DAT_MEM_PRIV_ALL_FLAG, &m[i]))
				return;
		CHECK_RC(dat_rmr_create(p.pz, &rmr), DAT_SUCCESS, "dat_rmr_create");
		CHECK_RC(dat_srq_create(p.ia, p.pz, &sa, &srq), DAT_SUCCESS, "dat_srq_create");
		for (int i = 0; i < 8; i++) {
			DAT_LMR_TRIPLET t = triplet(&m[0], (size_t)i * 512, 512);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
			CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &t, ck, 0), DAT_SUCCESS, "post_recv on B");
			CHECK_RC(dat_ep_post_recv(p.a.ep, 1, &t, ck, 0), DAT_SUCCESS, "post_recv on A");
		}
		for (int i = 0; i < 4; i++) {
			DAT_LMR_TRIPLET t = triplet(&m[1], (size_t)i * 512, 512);
			DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
			CHECK_RC(dat_ep_post_send(p.a.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "post_send on A");
		}
		for (int k = 0; k < NK; k++)
			live[k] = rdma_count(kinds[k], me);
		double t0 = now_s();
		CHECK_RC(dat_ia_close(p.ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS,
			 "dat_ia_close(ABRUPT): 2 connected EPs, 20 DTOs posted, 4 LMRs, an RMR, an SRQ");
		CHECK(now_s() - t0 < 20, "the abrupt close took %.1f s", now_s() - t0);
		for (int k = 0; k < NK; k++) {
			after[k] = rdma_count(kinds[k], me);
			if (after[k] != base[k])
				fail("round %d: rdma resource show %s: %d of this process after the close, %d before the "
				     "open (%d while open)", round, kinds[k], after[k], base[k], live[k]);
		}
		if (round == 0) {
			note("verbs objects before / open / after: qp %d/%d/%d cq %d/%d/%d mr %d/%d/%d pd %d/%d/%d "
			     "cm_id %d/%d/%d srq %d/%d/%d", base[0], live[0], after[0], base[1], live[1], after[1], base[2],
			     live[2], after[2], base[3], live[3], after[3], base[4], live[4], after[4], base[5], live[5],
			     after[5]);
			CHECK(live[0] >= base[0] + 2 && live[2] >= base[2] + 4 && live[3] >= base[3] + 1 &&
			      live[4] >= base[4] + 3,
			      "the open objects are not counted (qp %d mr %d pd %d cm_id %d): the check would prove nothing",
			      live[0], live[2], live[3], live[4]);
		}
		CHECK_RC(dat_ep_free(p.a.ep), BAD_HANDLE(DAT_INVALID_HANDLE_EP), "dat_ep_free(EP of the closed IA)");
		CHECK_RC(dat_lmr_free(m[0].lmr), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(LMR of the closed IA)");
		for (int i = 0; i < 4; i++)
			free(m[i].buf);
	}
	g_stats.faults++;
}

/* dat-fuzz finding: an IA closed right after dat_psp_create kept the
 * listener (the sock provider's progress thread stopped with the listen
 * command still queued, and its socket was never closed), so the qualifier
 * stayed in use for the rest of the process. Every round must get the
 * qualifier again; the race came within a few rounds. So must a PSP made
 * right after dat_psp_free (sock closed the listener later, on its
 * progress thread: 99 of 100 rounds were refused). */
static void case_close_frees_qualifier(void)
{
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	int refused = 0, rounds = 100;

	for (int round = 0; round < rounds; round++) {
		DAT_IA_HANDLE ia = open_ia(g_ia);
		DAT_EVD_HANDLE cr = DAT_HANDLE_NULL;
		DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;

		if (!ia)
			return;
		CHECK_RC(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), DAT_SUCCESS, "dat_evd_create(CR)");
		if (CALL(dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS)
			refused++;
		close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(ABRUPT) right after dat_psp_create");
	}
	CHECK(refused == 0, "dat_psp_create refused qualifier %llu in %d of %d rounds: an earlier close kept it",
	      (unsigned long long)qual, refused, rounds);
	g_stats.faults++;

	/* dat_psp_free gives the qualifier back at once, too */
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_EVD_HANDLE cr = DAT_HANDLE_NULL;

	if (!ia)
		return;
	CHECK_RC(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr), DAT_SUCCESS, "dat_evd_create(CR)");
	refused = 0;
	for (int round = 0; round < rounds; round++) {
		DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;

		if (CALL(dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp)) != DAT_SUCCESS)
			refused++;
		else
			CHECK_RC(dat_psp_free(psp), DAT_SUCCESS, "dat_psp_free");
	}
	CHECK(refused == 0, "dat_psp_create refused qualifier %llu in %d of %d rounds: the PSP freed before kept it",
	      (unsigned long long)qual, refused, rounds);
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
	g_stats.faults++;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* dat-fuzz finding: an IA closed while a connect to its own PSP was on its
 * way left the connection request nobody had heard of yet (the sock
 * provider's id of it) holding the IA's shared state and two eventfds.
 * After warm-up rounds, further rounds must not leave descriptors behind. */
static void case_connect_close_releases(void)
{
	DAT_CONN_QUAL qual = (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8);
	int warm = -1, now = -1, rounds = 100;

	for (int round = 0; round < rounds; round++) {
		DAT_IA_HANDLE ia = open_ia(g_ia);
		DAT_IA_ATTR attr;
		DAT_EVD_HANDLE async = DAT_HANDLE_NULL, dto = DAT_HANDLE_NULL, cr = DAT_HANDLE_NULL;
		DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
		DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
		DAT_PSP_HANDLE psp = DAT_HANDLE_NULL;

		if (!ia)
			return;
		CHECK_RC(dat_ia_query(ia, &async, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL), DAT_SUCCESS, "dat_ia_query");
		CHECK_RC(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create");
		CHECK_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto), DAT_SUCCESS, "dat_evd_create(DTO)");
		CHECK_RC(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG | DAT_EVD_CONNECTION_FLAG, &cr), DAT_SUCCESS,
			 "dat_evd_create(CR, connection)");
		CHECK_RC(dat_ep_create(ia, pz, dto, dto, cr, NULL, &ep), DAT_SUCCESS, "dat_ep_create");
		CHECK_RC(dat_psp_create(ia, qual, cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS, "dat_psp_create");
		CHECK_RC(dat_ep_connect(ep, attr.ia_address_ptr, qual, 5 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT,
					DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_connect(own PSP)");
		close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(ABRUPT) with a connect on its way to its own PSP");
		if (round == 9)
			warm = open_fds();
	}
	/* Threads of the last IAs may still be ending. */
	for (int i = 0; i < 200 && (now = open_fds()) != warm; i++)
		usleep(10000);
	CHECK(now == warm, "%d descriptors open after round 10, %d after round %d: closes leave some behind", warm, now,
	      rounds);
	g_stats.faults++;
}

/* More receives than the queue holds: DAT_INSUFFICIENT_RESOURCES; a send
 * with no receive waiting is held (RNR), not lost, until one is posted. */
static void case_recv_overrun(void)
{
	struct pair p;
	struct mem mr, ms;
	DAT_EP_ATTR attr = small_attr(4, 1);
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_EVENT ev;
	int posted = 0;
	DAT_RETURN r = DAT_SUCCESS;

	if (!pair_setup(&p, 256, &attr) || !pair_connect(&p) || !mem_reg(p.ia, p.pz, 65536, DAT_MEM_PRIV_ALL_FLAG, &mr) ||
	    !mem_reg(p.ia, p.pz, 65536, DAT_MEM_PRIV_ALL_FLAG, &ms))
		goto out;
	/* the receive queue of B: at least 4 (as asked), and then refused */
	while (posted < 128) {
		DAT_LMR_TRIPLET t = triplet(&mr, (size_t)posted * 256, 256);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)(posted + 1) };
		r = CALL(dat_ep_post_recv(p.b.ep, 1, &t, ck, 0));
		if (r != DAT_SUCCESS)
			break;
		posted++;
	}
	CHECK(posted >= 4 && posted < 128, "%d receives posted on an EP with max_recv_dtos 4", posted);
	CHECK(DAT_GET_TYPE(r) == DAT_INSUFFICIENT_RESOURCES, "the receive past the queue: %s, expected "
	      "DAT_INSUFFICIENT_RESOURCES", describe(r));
	if (DAT_GET_TYPE(r) == DAT_INSUFFICIENT_RESOURCES)
		g_stats.errors++;
	/* A sends one message per receive, then one more */
	for (int i = 0; i <= posted; i++) {
		DAT_LMR_TRIPLET t = triplet(&ms, (size_t)i * 256, 256);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)(1000 + i) };
		memset(ms.buf + (size_t)i * 256, 0x40 + i, 256);
		CHECK_RC(dat_ep_post_send(p.a.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "send %d", i);
		if (i == posted)
			break;
		if (!want_dto(p.a.req, WAIT_US, &d, "send") || !want_dto(p.b.recv, WAIT_US, &d, "receive"))
			goto out;
		CHECK_EQ(d.user_cookie.as_64, (uint64_t)(i + 1), "receive cookie (order)");
		CHECK(memcmp(mr.buf + (size_t)i * 256, ms.buf + (size_t)i * 256, 256) == 0, "receive %d: wrong data", i);
		g_stats.bytes += 256;
	}
	/* the extra send waits for a receive: nothing completes */
	if (wait_ev(p.a.req, 2 * SEC, &ev) == DAT_SUCCESS) {
		fail("the send with no receive waiting completed (%s) instead of waiting for one",
		     dto_status_name(ev.event_data.dto_completion_event_data.status));
		goto out;
	}
	{
		DAT_LMR_TRIPLET t = triplet(&mr, 40000, 256);
		DAT_DTO_COOKIE ck = { .as_64 = 9999 };
		CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &t, ck, 0), DAT_SUCCESS, "the late receive");
	}
	if (next_dto(p.b.recv, WAIT_US, &d, "late receive") == DAT_DTO_SUCCESS) {
		CHECK_EQ(d.user_cookie.as_64, 9999, "late receive cookie");
		CHECK(memcmp(mr.buf + 40000, ms.buf + (size_t)posted * 256, 256) == 0,
		      "the held message arrived with the wrong data");
		g_stats.bytes += 256;
	}
	if (next_dto(p.a.req, WAIT_US, &d, "the held send") == DAT_DTO_SUCCESS)
		CHECK_EQ(d.user_cookie.as_64, (uint64_t)(1000 + posted), "held send cookie");
	g_stats.ops += 2 * (posted + 1);
	g_stats.faults++;
out:
	pair_close(&p);
}

/* A pair whose A sends into a 4-entry request EVD (*small). */
static int overflow_setup(struct pair *p, struct mem *m, DAT_EVD_HANDLE *small)
{
	DAT_EP_ATTR attr = small_attr(64, 1);

	if (!pair_setup(p, 256, &attr) || !mem_reg(p->ia, p->pz, 65536, DAT_MEM_PRIV_ALL_FLAG, m))
		return 0;
	*small = make_evd(p->ia, 4, DAT_EVD_DTO_FLAG);
	if (!*small)
		return 0;
	CHECK_RC(dat_ep_free(p->a.ep), DAT_SUCCESS, "dat_ep_free(A)");
	CHECK_RC(dat_ep_create(p->ia, p->pz, p->a.recv, *small, p->a.conn, &attr, &p->a.ep), DAT_SUCCESS,
		 "dat_ep_create(A, request EVD of 4 entries)");
	return pair_connect(p);
}

/* 32 sends, each received, completing into the 4-entry EVD. */
static void overflow(struct pair *p, struct mem *m)
{
	for (int i = 0; i < 32; i++) {
		DAT_LMR_TRIPLET t = triplet(m, (size_t)i * 256, 256);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
		CHECK_RC(dat_ep_post_recv(p->b.ep, 1, &t, ck, 0), DAT_SUCCESS, "post_recv %d", i);
	}
	for (int i = 0; i < 32; i++) {
		DAT_LMR_TRIPLET t = triplet(m, 32768 + (size_t)i * 256, 256);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)i };
		DAT_RETURN r = CALL(dat_ep_post_send(p->a.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG));
		if (r != DAT_SUCCESS)
			break;
	}
}

/* The overflow's event on the async EVD, naming the small EVD. */
static void expect_overflow_event(DAT_EVD_HANDLE async, DAT_EVD_HANDLE small)
{
	DAT_EVENT ev;
	DAT_RETURN r = wait_ev(async, 15 * SEC, &ev);

	if (r != DAT_SUCCESS)
		fail("no async event within 15 s of overflowing a 4-entry DTO EVD with 32 completions: %s", describe(r));
	else if (ev.event_number != DAT_ASYNC_ERROR_EVD_OVERFLOW)
		fail("async event %s, expected ASYNC_ERROR_EVD_OVERFLOW", event_name(ev.event_number));
	else {
		CHECK(ev.event_data.asynch_error_event_data.dat_handle == small,
		      "overflow event names %p, expected the small EVD %p",
		      (void *)ev.event_data.asynch_error_event_data.dat_handle, (void *)small);
		g_stats.errors++;
		g_stats.faults++;
	}
}

/* A DTO EVD smaller than what completes into it: the overflow is reported
 * on the IA's async EVD as DAT_ASYNC_ERROR_EVD_OVERFLOW. */
static void case_cq_overflow(void)
{
	struct pair p;
	struct mem m;
	DAT_EVD_HANDLE async = NULL, small;

	if (!overflow_setup(&p, &m, &small))
		goto out;
	CHECK_RC(dat_ia_query(p.ia, &async, 0, NULL, 0, NULL), DAT_SUCCESS, "dat_ia_query(async EVD)");
	overflow(&p, &m);
	expect_overflow_event(async, small);
out:
	pair_close(&p);
}

/* What the agent and the thread it waits for share. */
struct agent_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	DAT_EP_HANDLE ep;
	DAT_EVD_HANDLE evd;
	int fired, posted, freed, saw_freed, returned;
	DAT_RETURN ep_rc, evd_rc;
};

#define AGENT_WAIT_S 10

static int wait_until(struct agent_wait *w, const int *flag, int secs)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	while (!*flag)
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until) != 0)
			break;
	return *flag;
}

/* The proxy agent: hands the free to another thread and waits for it, as
 * a consumer whose agent wakes its progress thread and waits might. */
static void wait_for_free_agent(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
	struct agent_wait *w = data;

	(void)evd;
	pthread_mutex_lock(&w->mu);
	w->fired = 1;
	pthread_cond_broadcast(&w->cv);
	w->saw_freed = wait_until(w, &w->freed, AGENT_WAIT_S);
	w->returned = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void *free_overflowed(void *arg)
{
	struct agent_wait *w = arg;

	/* Not while the main thread still posts on the EP: freeing an EP
	 * another thread posts to is the consumer's race (docs/threads.md). */
	pthread_mutex_lock(&w->mu);
	int ready = wait_until(w, &w->fired, 30) && wait_until(w, &w->posted, 30);
	pthread_mutex_unlock(&w->mu);
	if (!ready)
		return NULL;
	DAT_RETURN ep_rc = dat_ep_free(w->ep);
	DAT_RETURN evd_rc = dat_evd_free(w->evd);
	pthread_mutex_lock(&w->mu);
	w->ep_rc = ep_rc;
	w->evd_rc = evd_rc;
	w->freed = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* An agent fired by the overflow's async event waits for another thread
 * that frees the overflowed EVD (and the EP on it): the free must not wait
 * for the agent. verbs' ibv_destroy_cq waits for the event's
 * acknowledgement, sock's free for its event thread, so the event is
 * acknowledged before agents run; with the agent inside the handling both
 * waited AGENT_WAIT_S seconds for each other. */
static void case_agent_waits_for_free(void)
{
	struct pair p;
	struct mem m;
	DAT_EVD_HANDLE async = NULL, small;
	DAT_CNO_HANDLE cno = NULL;
	struct agent_wait w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	DAT_OS_WAIT_PROXY_AGENT agent = { &w, wait_for_free_agent };
	pthread_t t;

	if (!overflow_setup(&p, &m, &small))
		goto out;
	CHECK_RC(dat_ia_query(p.ia, &async, 0, NULL, 0, NULL), DAT_SUCCESS, "dat_ia_query(async EVD)");
	CHECK_RC(dat_cno_create(p.ia, agent, &cno), DAT_SUCCESS, "dat_cno_create(agent)");
	if (!cno)
		goto out;
	CHECK_RC(dat_evd_modify_cno(async, cno), DAT_SUCCESS, "dat_evd_modify_cno(async EVD)");
	w.ep = p.a.ep;
	w.evd = small;
	if (pthread_create(&t, NULL, free_overflowed, &w) != 0) {
		fail("pthread_create failed");
		goto out;
	}
	overflow(&p, &m);
	pthread_mutex_lock(&w.mu);
	w.posted = 1;
	pthread_cond_broadcast(&w.cv);
	pthread_mutex_unlock(&w.mu);
	pthread_join(t, NULL);
	if (!w.fired) {
		fail("the async EVD's agent did not run within 30 s of the overflow");
		goto out;
	}
	pthread_mutex_lock(&w.mu);
	int returned = wait_until(&w, &w.returned, AGENT_WAIT_S + 5);
	pthread_mutex_unlock(&w.mu);
	if (!returned) {
		fail("the agent did not return within %d s of the frees", AGENT_WAIT_S + 5);
		goto out;
	}
	CHECK(w.saw_freed, "the EP and EVD frees had not returned after the agent waited %d s for them "
	      "(the free waits for the event the agent is part of)", AGENT_WAIT_S);
	CHECK_EQ(w.ep_rc, DAT_SUCCESS, "dat_ep_free(A) on the other thread");
	CHECK_EQ(w.evd_rc, DAT_SUCCESS, "dat_evd_free(the overflowed EVD) on the other thread");
	p.a.ep = NULL;
	/* dat_evd_wait refuses an EVD feeding an enabled CNO. */
	CHECK_RC(dat_evd_modify_cno(async, NULL), DAT_SUCCESS, "dat_evd_modify_cno(async EVD, none)");
	expect_overflow_event(async, small);
out:
	pair_close(&p);
}

/* What an agent fired by a connection event does, to what. */
struct agent_act {
	struct agent_wait w;
	DAT_RETURN (*act)(DAT_HANDLE);
	DAT_HANDLE target;
};

static void acting_agent(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
	struct agent_act *a = data;
	DAT_RETURN rc;

	(void)evd;
	rc = a->act(a->target);
	pthread_mutex_lock(&a->w.mu);
	a->w.ep_rc = rc;
	a->w.returned = 1;
	pthread_cond_broadcast(&a->w.cv);
	pthread_mutex_unlock(&a->w.mu);
}

/* Puts an agent that runs `act` on `target` on A's connection EVD and
 * has B disconnect: the DISCONNECTED event on A's side fires it, on the
 * provider's thread. Returns the agent's result; a provider thread stuck
 * in it ends the case (closing the IA would wait for that thread too). */
static DAT_RETURN on_disconnect(struct pair *p, DAT_RETURN (*act)(DAT_HANDLE), DAT_HANDLE target, const char *what)
{
	DAT_CNO_HANDLE cno = NULL;
	struct agent_act a = { .w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER },
			       .act = act, .target = target };
	DAT_OS_WAIT_PROXY_AGENT agent = { &a, acting_agent };

	CHECK_RC(dat_cno_create(p->ia, agent, &cno), DAT_SUCCESS, "dat_cno_create(agent)");
	if (!cno)
		return DAT_INTERNAL_ERROR;
	CHECK_RC(dat_evd_modify_cno(p->a.conn, cno), DAT_SUCCESS, "dat_evd_modify_cno(A's connection EVD)");
	CHECK_RC(dat_ep_disconnect(p->b.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(B)");
	pthread_mutex_lock(&a.w.mu);
	int returned = wait_until(&a.w, &a.w.returned, 20);
	pthread_mutex_unlock(&a.w.mu);
	if (!returned) {
		fail("the agent's %s had not returned 20 s after B's disconnect", what);
		fflush(NULL);
		_exit(1);
	}
	return a.w.ep_rc;
}

static DAT_RETURN free_ep(DAT_HANDLE ep)
{
	return dat_ep_free(ep);
}

static DAT_RETURN close_ia_abruptly(DAT_HANDLE ia)
{
	return dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
}

/* An agent fired by a connection event frees the EP the event is about,
 * on the provider's thread that runs it: the free ends the EP's
 * connection id, which verbs (rdma_destroy_id) does only once every event
 * of the id is acknowledged, and the event that fired the agent was
 * acknowledged after its agents before: the thread waited on itself. */
static void case_agent_frees_its_ep(void)
{
	struct pair p;

	if (!pair_open(&p))
		goto out;
	CHECK_EQ(on_disconnect(&p, free_ep, p.a.ep, "dat_ep_free(A)"), DAT_SUCCESS, "dat_ep_free(A) in the agent");
	p.a.ep = NULL;
	g_stats.faults++;
out:
	pair_close(&p);
}

/* An agent fired by a connection event closes the IA abruptly from the
 * provider's own thread (which the close stops): the close returns, the
 * thread ends without touching what the close freed, and the process
 * opens an IA and connects again. */
static void case_agent_closes_ia(void)
{
	struct pair p, q;

	memset(&q, 0, sizeof(q));
	if (!pair_open(&p))
		goto out;
	CHECK_EQ(on_disconnect(&p, close_ia_abruptly, p.ia, "dat_ia_close"), DAT_SUCCESS, "dat_ia_close(ABRUPT) in the agent");
	p.ia = p.ib = NULL;
	usleep(200000);
	if (pair_open(&q))
		g_stats.faults++;
	pair_close(&q);
out:
	pair_close(&p);
}

/* A thread the consumer cancels while it sleeps in dat_evd_wait or
 * dat_cno_wait (MVAPICH2 ends its connection thread so, with asynchronous
 * cancellation, in MPI_Finalize): it ends like any cancelled thread instead
 * of aborting the process, and the EVD and CNO can be waited on and freed
 * afterwards. Found running MVAPICH2 with on-demand connections. */
struct waiter {
	DAT_EVD_HANDLE evd;
	DAT_CNO_HANDLE cno;
	int async;
	volatile int started;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	DAT_EVENT ev;
	DAT_COUNT nmore;
	DAT_EVD_HANDLE got;

	pthread_setcanceltype(w->async ? PTHREAD_CANCEL_ASYNCHRONOUS : PTHREAD_CANCEL_DEFERRED, NULL);
	w->started = 1;
	/* Nothing is posted: only the cancel ends these waits. */
	if (w->cno)
		dat_cno_wait(w->cno, DAT_TIMEOUT_INFINITE, &got);
	else
		dat_evd_wait(w->evd, DAT_TIMEOUT_INFINITE, 1, &ev, &nmore);
	return (void *)1;
}

static void cancel_waiter(struct waiter *w, const char *what)
{
	pthread_t t;
	void *res = NULL;

	if (pthread_create(&t, NULL, waiter_main, w) != 0) {
		fail("%s: pthread_create failed", what);
		return;
	}
	while (!w->started)
		usleep(1000);
	usleep(300000);	/* well into the sleep */
	pthread_cancel(t);
	pthread_join(t, &res);
	CHECK(res == PTHREAD_CANCELED, "%s: the waiter ended with %p, not PTHREAD_CANCELED", what, res);
	if (res == PTHREAD_CANCELED)
		g_stats.faults++;
}

static void case_cancel_waiter(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_EVENT se, ev;
	DAT_COUNT nmore;

	if (!ia)
		return;
	memset(&se, 0, sizeof(se));
	se.event_number = DAT_SOFTWARE_EVENT;
	for (int async = 0; async <= 1; async++) {
		const char *type = async ? "asynchronous" : "deferred";
		DAT_EVD_HANDLE evd = make_evd(ia, 8, DAT_EVD_SOFTWARE_FLAG), cevd = NULL, got = NULL;
		DAT_CNO_HANDLE cno = NULL;
		DAT_OS_WAIT_PROXY_AGENT no_agent = { NULL, NULL };
		struct waiter w = { .evd = evd, .async = async };
		char what[64];

		if (!evd)
			break;
		snprintf(what, sizeof(what), "dat_evd_wait cancelled (%s)", type);
		cancel_waiter(&w, what);
		/* The cancelled waiter's claim went with it. */
		CHECK_RC(dat_evd_post_se(evd, &se), DAT_SUCCESS, "dat_evd_post_se after %s", what);
		CHECK_RC(dat_evd_wait(evd, 5 * SEC, 1, &ev, &nmore), DAT_SUCCESS, "dat_evd_wait after %s", what);
		CHECK_RC(dat_evd_free(evd), DAT_SUCCESS, "dat_evd_free after %s", what);

		CHECK_RC(dat_cno_create(ia, no_agent, &cno), DAT_SUCCESS, "dat_cno_create");
		if (!cno)
			break;
		CHECK_RC(dat_evd_create(ia, 8, cno, DAT_EVD_SOFTWARE_FLAG, &cevd), DAT_SUCCESS, "dat_evd_create(with the CNO)");
		snprintf(what, sizeof(what), "dat_cno_wait cancelled (%s)", type);
		w = (struct waiter){ .cno = cno, .async = async };
		cancel_waiter(&w, what);
		CHECK_RC(dat_evd_post_se(cevd, &se), DAT_SUCCESS, "dat_evd_post_se after %s", what);
		CHECK_RC(dat_cno_wait(cno, 5 * SEC, &got), DAT_SUCCESS, "dat_cno_wait after %s", what);
		CHECK(got == cevd, "dat_cno_wait after %s names EVD %p, expected %p", what, (void *)got, (void *)cevd);
		CHECK_RC(dat_evd_free(cevd), DAT_SUCCESS, "dat_evd_free(the CNO's EVD) after %s", what);
		CHECK_RC(dat_cno_free(cno), DAT_SUCCESS, "dat_cno_free after %s", what);
	}
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "close after cancelled waiters (GRACEFUL)");
}

/* Takes n completions off evd: every one a flushed receive, cookies
 * base..base+n-1 each once. */
static int all_flushed(DAT_EVD_HANDLE evd, int n, uint64_t base, const char *what)
{
	unsigned char seen[256] = { 0 };
	DAT_DTO_COMPLETION_EVENT_DATA d;

	for (int got = 0; got < n; got++) {
		int st = next_dto(evd, 10 * SEC, &d, what);
		uint64_t k = d.user_cookie.as_64 - base;

		if (st < 0) {
			fail("%s: %d of %d receives completed", what, got, n);
			return 0;
		}
		if (k >= (uint64_t)n || k >= sizeof(seen) || seen[k]) {
			fail("%s: cookie %#llx not posted here or reported twice", what,
			     (unsigned long long)d.user_cookie.as_64);
			return 0;
		}
		seen[k] = 1;
		CHECK(d.ep_handle != NULL, "%s: completion without an EP", what);
		CHECK(st == DAT_DTO_ERR_FLUSHED, "%s: receive %llu completed with %s, expected flushed", what,
		      (unsigned long long)k, dto_status_name(st));
	}
	return 1;
}

static int post_recvs(DAT_EP_HANDLE ep, const struct mem *m, int n, uint64_t base, const char *what)
{
	for (int i = 0; i < n; i++) {
		DAT_LMR_TRIPLET iov = triplet(m, (size_t)i * 64, 64);
		DAT_DTO_COOKIE ck = { .as_64 = base + (uint64_t)i };

		if (CALL(dat_ep_post_recv(ep, 1, &iov, ck, DAT_COMPLETION_DEFAULT_FLAG)) != DAT_SUCCESS) {
			fail("%s: dat_ep_post_recv %d", what, i);
			return 0;
		}
	}
	return 1;
}

/* A reset of an unconnected EP leaves its receives posted (DAT), an abrupt
 * disconnect flushes them. Receives still posted when an EP's QP is reset
 * complete, flushed, each once: a device flushes in its own time after the move to the error state,
 * and most verbs libraries (mlx4, mlx5, hns) clean a QP's completions off its
 * CQs when it enters RESET. An abrupt disconnect of an unconnected EP (how
 * DAT flushes its receives), round after round; a reset of a
 * disconnected EP whose receives were posted after the disconnect; and,
 * round after round, a reset the moment the peer's disconnect lands. */
static void case_flush_before_reset(void)
{
	int rounds = getenv("CONF_FLUSH_ROUNDS") ? atoi(getenv("CONF_FLUSH_ROUNDS")) : 50;
	int rounds2 = getenv("CONF_FLUSH_PEER_ROUNDS") ? atoi(getenv("CONF_FLUSH_PEER_ROUNDS")) : 10;
	DAT_EP_ATTR attr = small_attr(128, 1);
	struct client c;
	struct pair p;
	struct mem m;
	DAT_EVENT ev;
	DAT_COUNT nb = -1, bs = -1;
	char what[96];

	if (!client_open(&c, 16))
		goto out;
	/* DAT: a reset of an unconnected EP is a no-op, its receives stay posted */
	if (!post_recvs(c.ep, &c.m, 4, 0x80000, "receives on an unconnected EP"))
		goto out;
	CHECK_RC(dat_ep_reset(c.ep), DAT_SUCCESS, "dat_ep_reset(unconnected, receives posted)");
	CHECK_RC(dat_ep_recv_query(c.ep, &nb, &bs), DAT_SUCCESS, "dat_ep_recv_query after the reset");
	CHECK_EQ(nb, 4, "receives still posted after a reset of an unconnected EP");
	CHECK_RC(dat_evd_dequeue(c.recv, &ev), DAT_QUEUE_EMPTY, "dat_evd_dequeue after the reset: nothing flushed");
	CHECK_RC(dat_ep_disconnect(c.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(unconnected, receives posted)");
	if (!all_flushed(c.recv, 4, 0x80000, "an abrupt disconnect after the reset"))
		goto out;
	for (int r = 0; r < rounds; r++) {
		uint64_t base = 0x100000 + (uint64_t)r * 64;

		snprintf(what, sizeof(what), "abrupt disconnect of an unconnected EP, round %d", r);
		if (!post_recvs(c.ep, &c.m, 16, base, what))
			goto out;
		CHECK_RC(dat_ep_disconnect(c.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(%s)", what);
		if (!all_flushed(c.recv, 16, base, what))
			goto out;
	}
	g_stats.faults++;

	if (!pair_open(&p) || !mem_reg(p.ia, p.pz, 64 * 64, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out2;
	CHECK_RC(dat_ep_disconnect(p.a.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(connected A)");
	if (!expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "A's disconnect"))
		goto out2;
	if (!post_recvs(p.a.ep, &m, 8, 0x200000, "receives on a disconnected EP"))
		goto out2;
	CHECK_RC(dat_ep_reset(p.a.ep), DAT_SUCCESS, "dat_ep_reset(disconnected A, receives posted)");
	if (!all_flushed(p.a.recv, 8, 0x200000, "receives posted after the disconnect, then a reset"))
		goto out2;
	g_stats.faults++;
	pair_close(&p);

	/* The peer disconnects: A's QP goes to the error state on the provider's
	 * thread, and A is reset the moment it reads DISCONNECTED, while the
	 * device may still be flushing its receives. */
	if (!pair_setup(&p, 512, &attr) || !mem_reg(p.ia, p.pz, 128 * 64, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out2;
	for (int r = 0; r < rounds2; r++) {
		uint64_t base = 0x300000 + (uint64_t)r * 256;
		DAT_EP_STATE st = 0;

		snprintf(what, sizeof(what), "a reset as the peer's disconnect lands, round %d", r);
		if (r > 0) {
			CHECK_RC(dat_psp_free(p.psp), DAT_SUCCESS, "dat_psp_free(%s)", what);
			CHECK_RC(dat_ep_reset(p.b.ep), DAT_SUCCESS, "dat_ep_reset(B, %s)", what);
		}
		if (!pair_connect(&p) || !post_recvs(p.a.ep, &m, 128, base, what))
			goto out2;
		CHECK_RC(dat_ep_disconnect(p.b.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(B, %s)", what);
		for (double t0 = now_s(); st != DAT_EP_STATE_DISCONNECTED && now_s() - t0 < 30;)
			CHECK_RC(dat_ep_get_status(p.a.ep, &st, NULL, NULL), DAT_SUCCESS, "dat_ep_get_status(A, %s)", what);
		CHECK_RC(dat_ep_reset(p.a.ep), DAT_SUCCESS, "dat_ep_reset(A, %s)", what);
		if (!all_flushed(p.a.recv, 128, base, what))
			goto out2;
		if (!expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, what) ||
		    !expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, what))
			goto out2;
	}
	g_stats.faults++;
out2:
	pair_close(&p);
out:
	close_ia(c.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
}

const struct tcase faults_cases[] = {
	CASE("faults", peer_killed, 1),
	CASE("faults", connect_no_listener, 1),
	CASE("faults", connect_dead_listener, 1),
	CASE("faults", server_restart, 1),
	CASE("faults", abrupt_close_releases, 0),
	CASE("faults", recv_overrun, 1),
	CASE("faults", cq_overflow, 1),
	CASE("faults", agent_waits_for_free, 1),
	CASE("faults", agent_frees_its_ep, 1),
	CASE("faults", agent_closes_ia, 1),
	CASE("faults", close_frees_qualifier, 0),
	CASE("faults", connect_close_releases, 0),
	CASE("faults", cancel_waiter, 1),
	CASE("faults", flush_before_reset, 1),
};
const int faults_ncases = sizeof(faults_cases) / sizeof(faults_cases[0]);
