/*
 * counters.c - DAPL's statistics counters (dat_ib_query_counters,
 * dat_ib_print_counters, dat_ib_start_counter, dat_ib_stop_counter): each
 * case does a known amount of work and checks that the IA, EP and EVD
 * counters moved by exactly that much, and that nothing else moved.
 */
#include "harness.h"
#include <dat2/dat_ib_extensions.h>

/* dat_ib_start/stop_counter cast their group to DAT_COUNTER_TYPE, which no
 * DAT header declares (as in DAPL's); the groups are DAT_IA_COUNTER_TYPE. */
#define DAT_COUNTER_TYPE DAT_IA_COUNTER_TYPE

struct ep_counts { DAT_UINT64 v[DCNT_EP_ALL_COUNTERS]; };
struct evd_counts { DAT_UINT64 v[DCNT_EVD_ALL_COUNTERS]; };
struct ia_counts { DAT_UINT64 v[DCNT_IA_ALL_COUNTERS]; };

static int query(DAT_HANDLE h, int all, DAT_UINT64 *out, const char *what)
{
	DAT_RETURN r = CALL(dat_ib_query_counters(h, all, out, 0));

	if (r != DAT_SUCCESS)
		fail("%s: dat_ib_query_counters: %s", what, describe(r));
	return r == DAT_SUCCESS;
}

/* Every counter of `after` equals `before` plus its entry in `delta`. */
static void check_moved(const DAT_UINT64 *before, const DAT_UINT64 *after, const DAT_UINT64 *delta, int n,
			const char *what)
{
	for (int i = 0; i < n; i++)
		if (after[i] - before[i] != delta[i])
			fail("%s: counter %d moved by %llu, expected %llu", what, i,
			     (unsigned long long)(after[i] - before[i]), (unsigned long long)delta[i]);
}

/* Sends, RDMA write/read, write with immediate data and both atomics from
 * A to B; B's receives reaped with dat_evd_wait, A's completions with
 * dat_evd_dequeue polling. */
static void case_counters_dto(void)
{
	static const size_t sends[] = { 100, 200, 300 };
	struct pair p;
	struct mem src, dst, rbuf, target, result;
	struct ep_counts a0, a1, b0, b1, da, db;
	struct evd_counts q0, q1, w0, w1, dq, dw;
	DAT_LMR_TRIPLET l;
	DAT_RMR_TRIPLET rt;
	DAT_DTO_COOKIE ck;
	DAT_EVENT ev;
	DAT_COUNT nmore;
	long calls = 0, found = 0, waits = 0;
	size_t i;

	memset(&da, 0, sizeof(da));
	memset(&db, 0, sizeof(db));
	memset(&dq, 0, sizeof(dq));
	memset(&dw, 0, sizeof(dw));
	if (!pair_open(&p))
		return;
	if (!mem_reg(p.ia, p.pz, 8192, DAT_MEM_PRIV_ALL_FLAG, &src) || !mem_reg(p.ia, p.pz, 8192, DAT_MEM_PRIV_ALL_FLAG, &dst) ||
	    !mem_reg(p.ia, p.pz, 4096, DAT_MEM_PRIV_ALL_FLAG, &rbuf) ||
	    !mem_reg(p.ia, p.pz, 64, DAT_MEM_PRIV_ALL_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC, &target) ||
	    !mem_reg(p.ia, p.pz, 64, DAT_MEM_PRIV_ALL_FLAG, &result))
		goto out;
	if (!query(p.a.ep, DCNT_EP_ALL_COUNTERS, a0.v, "A before") || !query(p.b.ep, DCNT_EP_ALL_COUNTERS, b0.v, "B before") ||
	    !query(p.a.req, DCNT_EVD_ALL_COUNTERS, q0.v, "A's request EVD before") ||
	    !query(p.b.recv, DCNT_EVD_ALL_COUNTERS, w0.v, "B's receive EVD before"))
		goto out;
	/* Connecting counted: one connect on A, none on B. */
	CHECK_EQ(a0.v[DCNT_EP_CONNECT], 1, "A's DCNT_EP_CONNECT after pair_connect");
	CHECK_EQ(b0.v[DCNT_EP_CONNECT], 0, "B's DCNT_EP_CONNECT (accepted, not connected)");

	/* B: three 512-byte receives for the sends, one 64-byte one for the immediate. */
	for (i = 0; i < 4; i++) {
		l = triplet(&rbuf, i * 512, i < 3 ? 512 : 64);
		ck.as_64 = 100 + i;
		CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "B post_recv");
	}
	db.v[DCNT_EP_POST_RECV] = 4;
	db.v[DCNT_EP_POST_RECV_DATA] = 3 * 512 + 64;
	for (i = 0; i < 3; i++) {
		l = triplet(&src, 0, sends[i]);
		ck.as_64 = i;
		CHECK_RC(dat_ep_post_send(p.a.ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "A post_send");
		da.v[DCNT_EP_POST_SEND]++;
		da.v[DCNT_EP_POST_SEND_DATA] += sends[i];
		db.v[DCNT_EP_RECV]++;
		db.v[DCNT_EP_RECV_DATA] += sends[i];
	}
	rt.rmr_context = dst.rkey;
	rt.virtual_address = dst.addr;
	rt.segment_length = 2048;
	l = triplet(&src, 0, 2048);
	CHECK_RC(dat_ep_post_rdma_write(p.a.ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "A rdma_write");
	da.v[DCNT_EP_POST_WRITE] = 1;
	da.v[DCNT_EP_POST_WRITE_DATA] = 2048;
	l = triplet(&src, 4096, 1024);
	rt.segment_length = 1024;
	CHECK_RC(dat_ep_post_rdma_read(p.a.ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "A rdma_read");
	da.v[DCNT_EP_POST_READ] = 1;
	da.v[DCNT_EP_POST_READ_DATA] = 1024;
	l = triplet(&src, 0, 1000);
	rt.virtual_address = dst.addr + 4096;
	rt.segment_length = 1000;
	CHECK_RC(dat_ib_post_rdma_write_immed(p.a.ep, 1, &l, ck, &rt, 0x5EED, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS,
		 "A write_immed");
	da.v[DCNT_EP_POST_WRITE_IMM] = 1;
	da.v[DCNT_EP_POST_WRITE_IMM_DATA] = 1000;
	db.v[DCNT_EP_RECV_RDMA_IMM] = 1;
	db.v[DCNT_EP_RECV_RDMA_IMM_DATA] = 1000;
	l = triplet(&result, 0, 8);
	rt.rmr_context = target.rkey;
	rt.virtual_address = target.addr;
	rt.segment_length = 8;
	CHECK_RC(dat_ib_post_cmp_and_swap(p.a.ep, 0, 7, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "A cmp_and_swap");
	CHECK_RC(dat_ib_post_fetch_and_add(p.a.ep, 5, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "A fetch_and_add");
	da.v[DCNT_EP_POST_CMP_SWAP] = 1;
	da.v[DCNT_EP_POST_FETCH_ADD] = 1;

	/* A's eight completions by polling: every call counts, found or not. */
	for (int spins = 0; found < 8 && spins < 300000; spins++) {
		DAT_RETURN r = dat_evd_dequeue(p.a.req, &ev);

		calls++;
		if (r == DAT_SUCCESS) {
			found++;
			CHECK_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS, "A's completion status");
		} else if (r == DAT_QUEUE_EMPTY) {
			usleep(100);
		} else {
			fail("dat_evd_dequeue(A's request EVD): %s", describe(r));
			break;
		}
	}
	cover("dat_evd_dequeue");
	CHECK_EQ(found, 8, "A's completions");
	dq.v[DCNT_EVD_DEQUEUE] = calls;
	dq.v[DCNT_EVD_DEQUEUE_FOUND] = found;
	dq.v[DCNT_EVD_DEQUEUE_NOT_FOUND] = calls - found;
	/* Each dequeue polls the CQ once: a completion ends it, an empty poll too. */
	dq.v[DCNT_EVD_DEQUEUE_POLL] = calls;
	dq.v[DCNT_EVD_DEQUEUE_POLL_FOUND] = found;
	/* B's four receives by waiting; the immediate's is an extended event. */
	for (i = 0; i < 4; i++) {
		DAT_RETURN r = CALL(dat_evd_wait(p.b.recv, WAIT_US, 1, &ev, &nmore));

		waits++;
		if (r != DAT_SUCCESS) {
			fail("B's receive %zu: %s", i, describe(r));
			goto out;
		}
		CHECK(ev.event_number == DAT_DTO_COMPLETION_EVENT || ev.event_number == (DAT_EVENT_NUMBER)DAT_IB_DTO_EVENT,
		      "B's receive %zu: event %s", i, event_name(ev.event_number));
		CHECK_EQ(ev.event_data.dto_completion_event_data.status, DAT_DTO_SUCCESS, "B's receive status");
	}

	if (!query(p.a.ep, DCNT_EP_ALL_COUNTERS, a1.v, "A after") || !query(p.b.ep, DCNT_EP_ALL_COUNTERS, b1.v, "B after") ||
	    !query(p.a.req, DCNT_EVD_ALL_COUNTERS, q1.v, "A's request EVD after") ||
	    !query(p.b.recv, DCNT_EVD_ALL_COUNTERS, w1.v, "B's receive EVD after"))
		goto out;
	check_moved(a0.v, a1.v, da.v, DCNT_EP_ALL_COUNTERS, "A's EP counters");
	check_moved(b0.v, b1.v, db.v, DCNT_EP_ALL_COUNTERS, "B's EP counters");
	check_moved(q0.v, q1.v, dq.v, DCNT_EVD_ALL_COUNTERS, "A's request EVD counters");
	/* Blocking and wakeups depend on timing; the calls do not. */
	CHECK_EQ(w1.v[DCNT_EVD_WAIT] - w0.v[DCNT_EVD_WAIT], waits, "B's DCNT_EVD_WAIT");
	CHECK(w1.v[DCNT_EVD_WAIT_NOTIFY] + w1.v[DCNT_EVD_DTO_CALLBACK] <= 2 * w1.v[DCNT_EVD_WAIT_BLOCKED],
	      "B's EVD: more wakeups than sleeps");
	CHECK_EQ(w1.v[DCNT_EVD_DEQUEUE] - w0.v[DCNT_EVD_DEQUEUE], 0, "B's DCNT_EVD_DEQUEUE (waited, not dequeued)");
	g_stats.ops += 12;
out:
	pair_close(&p);
}

/* The IA's object and connection counters: absolute on a fresh IA, then
 * moved by a known set of creates, frees, a rejected and an accepted CR. */
static void case_counters_ia(void)
{
	struct pair p;
	struct ia_counts c0, c1, want;
	struct mem m1, m2;
	DAT_PSP_HANDLE psp_any = NULL;
	DAT_CONN_QUAL any_qual = 0;
	DAT_EP_HANDLE c_ep = NULL, rsp_ep = NULL;
	DAT_EVD_HANDLE c_conn = NULL;
	DAT_RSP_HANDLE rsp = NULL;
	DAT_SRQ_HANDLE srq = NULL;
	DAT_SRQ_ATTR sattr;
	struct sockaddr_in self;
	DAT_EVENT ev;

	if (!pair_open(&p))
		return;
	if (!query(p.ia, DCNT_IA_ALL_COUNTERS, c0.v, "IA after pair_open"))
		goto out;
	/* pair_open: one PZ, seven EVDs and the async one, two EPs, one PSP
	 * listening, one CR accepted, one connection established each way. */
	CHECK_EQ(c0.v[DCNT_IA_PZ_CREATE], 1, "DCNT_IA_PZ_CREATE");
	CHECK_EQ(c0.v[DCNT_IA_EVD_CREATE], 8, "DCNT_IA_EVD_CREATE");
	CHECK_EQ(c0.v[DCNT_IA_EP_CREATE], 2, "DCNT_IA_EP_CREATE");
	CHECK_EQ(c0.v[DCNT_IA_PSP_CREATE], 1, "DCNT_IA_PSP_CREATE");
	CHECK_EQ(c0.v[DCNT_IA_CM_LISTEN], 1, "DCNT_IA_CM_LISTEN");
	CHECK_EQ(c0.v[DCNT_IA_SP_CR], 1, "DCNT_IA_SP_CR");
	CHECK_EQ(c0.v[DCNT_IA_SP_CR_ACCEPTED], 1, "DCNT_IA_SP_CR_ACCEPTED");
	CHECK_EQ(c0.v[DCNT_IA_SP_CR_REJECTED], 0, "DCNT_IA_SP_CR_REJECTED");
	CHECK_EQ(c0.v[DCNT_IA_CM_ACTIVE_EST], 1, "DCNT_IA_CM_ACTIVE_EST");
	CHECK_EQ(c0.v[DCNT_IA_CM_PASSIVE_EST], 1, "DCNT_IA_CM_PASSIVE_EST");
	CHECK_EQ(c0.v[DCNT_IA_EP_FREE] + c0.v[DCNT_IA_PZ_FREE] + c0.v[DCNT_IA_EVD_FREE], 0, "frees before any free");

	memset(&want, 0, sizeof(want));
	/* Two LMRs, registered and freed. */
	if (!mem_reg(p.ia, p.pz, 4096, DAT_MEM_PRIV_ALL_FLAG, &m1) || !mem_reg(p.ia, p.pz, 12288, DAT_MEM_PRIV_ALL_FLAG, &m2))
		goto out;
	CHECK_RC(dat_lmr_free(m1.lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_lmr_free(m2.lmr), DAT_SUCCESS, "dat_lmr_free");
	want.v[DCNT_IA_LMR_CREATE] = want.v[DCNT_IA_LMR_FREE] = 2;
	want.v[DCNT_IA_MEM_ALLOC] = want.v[DCNT_IA_MEM_FREE] = 2;
	want.v[DCNT_IA_MEM_ALLOC_DATA] = 4096 + 12288;
	/* A PSP on any qualifier: a PSP, one of them "any", and a listen. */
	CHECK_RC(dat_psp_create_any(p.ia, &any_qual, p.cr, DAT_PSP_CONSUMER_FLAG, &psp_any), DAT_SUCCESS, "dat_psp_create_any");
	CHECK_RC(dat_psp_free(psp_any), DAT_SUCCESS, "dat_psp_free");
	want.v[DCNT_IA_PSP_CREATE] = want.v[DCNT_IA_PSP_CREATE_ANY] = want.v[DCNT_IA_PSP_FREE] = 1;
	want.v[DCNT_IA_CM_LISTEN] = 1;
	/* An RSP with its EP, and an SRQ. */
	CHECK_RC(dat_ep_create(p.ia, p.pz, p.a.recv, p.a.req, p.a.conn, NULL, &rsp_ep), DAT_SUCCESS, "dat_ep_create (RSP)");
	CHECK_RC(dat_rsp_create(p.ia, p.qual + 5, rsp_ep, p.cr, &rsp), DAT_SUCCESS, "dat_rsp_create");
	CHECK_RC(dat_rsp_free(rsp), DAT_SUCCESS, "dat_rsp_free");
	CHECK_RC(dat_ep_free(rsp_ep), DAT_SUCCESS, "dat_ep_free (RSP)");
	want.v[DCNT_IA_RSP_CREATE] = want.v[DCNT_IA_RSP_FREE] = 1;
	want.v[DCNT_IA_CM_LISTEN]++;
	want.v[DCNT_IA_EP_CREATE]++;
	want.v[DCNT_IA_EP_FREE]++;
	memset(&sattr, 0, sizeof(sattr));
	sattr.max_recv_dtos = 8;
	sattr.max_recv_iov = 1;
	CHECK_RC(dat_srq_create(p.ia, p.pz, &sattr, &srq), DAT_SUCCESS, "dat_srq_create");
	CHECK_RC(dat_srq_free(srq), DAT_SUCCESS, "dat_srq_free");
	want.v[DCNT_IA_SRQ_CREATE] = want.v[DCNT_IA_SRQ_FREE] = 1;
	/* A third EP whose connect B's side rejects. */
	c_conn = make_evd(p.ia, 8, DAT_EVD_CONNECTION_FLAG);
	if (!c_conn || !self_addr(p.ia, &self))
		goto out;
	want.v[DCNT_IA_EVD_CREATE]++;
	CHECK_RC(dat_ep_create(p.ia, p.pz, p.a.recv, p.a.req, c_conn, NULL, &c_ep), DAT_SUCCESS, "dat_ep_create (C)");
	want.v[DCNT_IA_EP_CREATE]++;
	CHECK_RC(dat_ep_connect(c_ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT,
				DAT_CONNECT_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_connect (C)");
	if (expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "C's request"))
		CHECK_RC(dat_cr_reject(ev.event_data.cr_arrival_event_data.cr_handle, 0, NULL), DAT_SUCCESS, "dat_cr_reject");
	expect_ev(c_conn, WAIT_US, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev, "C rejected");
	want.v[DCNT_IA_SP_CR] = want.v[DCNT_IA_SP_CR_REJECTED] = 1;
	CHECK_RC(dat_ep_free(c_ep), DAT_SUCCESS, "dat_ep_free (C)");
	CHECK_RC(dat_evd_free(c_conn), DAT_SUCCESS, "dat_evd_free (C's connection EVD)");
	want.v[DCNT_IA_EP_FREE]++;
	want.v[DCNT_IA_EVD_FREE]++;

	if (!query(p.ia, DCNT_IA_ALL_COUNTERS, c1.v, "IA after"))
		goto out;
	check_moved(c0.v, c1.v, want.v, DCNT_IA_ALL_COUNTERS, "IA counters");
out:
	pair_close(&p);
}

/* Reads what `print` wrote to stdout. */
static size_t printed(DAT_RETURN *r, DAT_HANDLE h, int cntr, int reset, char *buf, size_t size)
{
	FILE *tmp = tmpfile();
	int saved;
	size_t n = 0;

	if (!tmp) {
		fail("tmpfile: %s", strerror(errno));
		return 0;
	}
	fflush(stdout);
	saved = dup(1);
	dup2(fileno(tmp), 1);
	*r = CALL(dat_ib_print_counters(h, cntr, reset));
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	rewind(tmp);
	n = fread(buf, 1, size - 1, tmp);
	buf[n] = 0;
	fclose(tmp);
	return n;
}

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Advertising, single counters, reset, printing, device groups, and the
 * errors of all four calls. */
static void case_counters_calls(void)
{
	struct pair p;
	struct mem m;
	struct ep_counts one, all;
	DAT_PROVIDER_ATTR pattr;
	DAT_LMR_TRIPLET l;
	DAT_DTO_COOKIE ck;
	DAT_RETURN r;
	char text[8192];
	int advertised = 0;

	if (!pair_setup(&p, 8, NULL))
		goto out;
	memset(&pattr, 0, sizeof(pattr));
	CHECK_RC(dat_ia_query(p.ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, &pattr), DAT_SUCCESS, "dat_ia_query");
	for (int i = 0; i < pattr.num_provider_specific_attr; i++)
		if (!strcmp(pattr.provider_specific_attr[i].name, DAT_IB_ATTR_COUNTERS))
			advertised = !strcmp(pattr.provider_specific_attr[i].value, "TRUE");
	CHECK(advertised, "ia_query does not advertise %s=TRUE", DAT_IB_ATTR_COUNTERS);
	if (!mem_reg(p.ia, p.pz, 256, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	for (int i = 0; i < 3; i++) {
		l = triplet(&m, 0, 16);
		ck.as_64 = i;
		CHECK_RC(dat_ep_post_recv(p.a.ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "post_recv");
	}
	/* One counter lands at its own index of the array, as in DAPL. */
	memset(&one, 0xEE, sizeof(one));
	CHECK_RC(dat_ib_query_counters(p.a.ep, DCNT_EP_POST_RECV, one.v, 0), DAT_SUCCESS, "query one counter");
	CHECK_EQ(one.v[DCNT_EP_POST_RECV], 3, "DCNT_EP_POST_RECV");
	CHECK_EQ(one.v[DCNT_EP_POST_RECV_DATA], 0xEEEEEEEEEEEEEEEEull, "the counter next to the one asked for");
	/* Printing: one line per counter, the value after " = ". */
	printed(&r, p.a.ep, DCNT_EP_POST_RECV_DATA, 0, text, sizeof(text));
	CHECK_EQ(r, DAT_SUCCESS, "dat_ib_print_counters (one)");
	CHECK(lines(text) == 1 && strstr(text, "DCNT_EP_POST_RECV_DATA = 48\n"), "printed one counter as: %s", text);
	printed(&r, p.a.ep, DCNT_EP_ALL_COUNTERS, 0, text, sizeof(text));
	CHECK_EQ(r, DAT_SUCCESS, "dat_ib_print_counters (all)");
	CHECK(lines(text) == DCNT_EP_ALL_COUNTERS && strstr(text, "DCNT_EP_POST_RECV = 3\n") &&
	      strstr(text, "DCNT_EP_RECV_RDMA_IMM_DATA = 0\n"), "printed all EP counters as: %s", text);
	printed(&r, p.ia, DCNT_IA_ALL_COUNTERS, 0, text, sizeof(text));
	CHECK(lines(text) == DCNT_IA_ALL_COUNTERS && strstr(text, "DCNT_IA_LMR_CREATE = 1\n"), "printed IA counters as: %s",
	      text);
	/* Reset while printing: the printed counter reads 0 afterwards, its neighbour not. */
	printed(&r, p.a.ep, DCNT_EP_POST_RECV, 1, text, sizeof(text));
	CHECK(strstr(text, "DCNT_EP_POST_RECV = 3\n") != NULL, "print with reset: %s", text);
	CHECK_RC(dat_ib_query_counters(p.a.ep, DCNT_EP_ALL_COUNTERS, all.v, 1), DAT_SUCCESS, "query all with reset");
	CHECK_EQ(all.v[DCNT_EP_POST_RECV], 0, "DCNT_EP_POST_RECV after a printing reset");
	CHECK_EQ(all.v[DCNT_EP_POST_RECV_DATA], 48, "DCNT_EP_POST_RECV_DATA (not reset by the print)");
	CHECK_RC(dat_ib_query_counters(p.a.ep, DCNT_EP_ALL_COUNTERS, all.v, 0), DAT_SUCCESS, "query all after a reset");
	CHECK_EQ(all.v[DCNT_EP_POST_RECV_DATA], 0, "DCNT_EP_POST_RECV_DATA after a querying reset");
	/* Device groups: start and stop each; stop before start is refused. */
	CHECK_RC(dat_ib_stop_counter(p.ia, DCNT_IA_LNK), BAD_STATE(0), "dat_ib_stop_counter before a start");
	for (int g = DCNT_IA_CM; g <= DCNT_IA_DIAG; g++) {
		CHECK_RC(dat_ib_start_counter(p.ia, g), DAT_SUCCESS, "dat_ib_start_counter");
		CHECK_RC(dat_ib_stop_counter(p.ia, g), DAT_SUCCESS, "dat_ib_stop_counter");
	}
	/* Errors: handles that have no counters, counters out of range, no array. */
	CHECK_RC(dat_ib_query_counters(NULL, 0, all.v, 0), BAD_HANDLE(DAT_INVALID_HANDLE1), "query on a NULL handle");
	CHECK_RC(dat_ib_query_counters(p.pz, 0, all.v, 0), BAD_HANDLE(DAT_INVALID_HANDLE1), "query on a PZ");
	CHECK_RC(dat_ib_print_counters(p.pz, 0, 0), BAD_HANDLE(DAT_INVALID_HANDLE1), "print on a PZ");
	CHECK_RC(dat_ib_start_counter(p.a.ep, DCNT_IA_LNK), BAD_HANDLE(DAT_INVALID_HANDLE1), "start on an EP");
	CHECK_RC(dat_ib_stop_counter(p.a.req, DCNT_IA_LNK), BAD_HANDLE(DAT_INVALID_HANDLE1), "stop on an EVD");
	CHECK_RC(dat_ib_query_counters(p.a.ep, DCNT_EP_ALL_COUNTERS + 1, all.v, 0), BAD_ARG(DAT_INVALID_ARG3),
		 "query past the EP's counters");
	CHECK_RC(dat_ib_query_counters(p.a.req, -1, all.v, 0), BAD_ARG(DAT_INVALID_ARG3), "query counter -1");
	CHECK_RC(dat_ib_print_counters(p.a.req, DCNT_EVD_ALL_COUNTERS + 1, 0), BAD_ARG(DAT_INVALID_ARG3),
		 "print past the EVD's counters");
	CHECK_RC(dat_ib_query_counters(p.a.ep, 0, NULL, 0), BAD_ARG(DAT_INVALID_ARG4), "query into NULL");
	CHECK_RC(dat_ib_start_counter(p.ia, 3), BAD_ARG(DAT_INVALID_ARG3), "start of an unknown group");
	/* A freed EP's handle has no counters any more. */
	CHECK_RC(dat_ep_free(p.b.ep), DAT_SUCCESS, "dat_ep_free(B)");
	CHECK_RC(dat_ib_query_counters(p.b.ep, DCNT_EP_ALL_COUNTERS, all.v, 0), BAD_HANDLE(DAT_INVALID_HANDLE1),
		 "query on a freed EP");
	p.b.ep = NULL;
out:
	pair_close(&p);
}

const struct tcase counters_cases[] = {
	CASE("counters", counters_dto, 0),
	CASE("counters", counters_ia, 0),
	CASE("counters", counters_calls, 0),
};
const int counters_ncases = sizeof(counters_cases) / sizeof(counters_cases[0]);
