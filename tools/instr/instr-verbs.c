/*
 * instr-verbs: the native-verbs side of tools/bench-instr.sh, the same
 * phases as instr-dat.c over libibverbs and librdmacm directly. Two RC QPs
 * in one process, connected to each other through rdma_cm over the device's
 * own address (10.0.0.1 in the guest). Each measured call is alone in a
 * noinline op_* function; phase_done() marks the end of each phase
 * (callgrind --dump-after=phase_done).
 *
 * "wait on an event already there" has no separate native call: a blocking
 * verbs consumer that finds a completion does not sleep, it polls, so the
 * native figure for that line is ibv_poll_cq finding one.
 *
 *   instr-verbs ADDR N LMR_N CM_N
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG 64
#define PORT 4712

static struct rdma_event_channel *ch;
static struct rdma_cm_id *listen_id, *a_id, *b_id;
static struct ibv_pd *pd;
static struct ibv_cq *a_scq, *a_rcq, *b_scq, *b_rcq;
static struct ibv_qp *a_qp, *b_qp;
static struct ibv_mr *mr;
static char *buf;
static struct sockaddr_in addr;
static int phase_no, depth;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

__attribute__((noinline)) void phase_done(const char *name)
{
	fprintf(stderr, "instr-verbs: dump %d = %s\n", ++phase_no, name);
	__asm__ volatile("" ::: "memory");
}

/* ---- the measured calls ---- */
__attribute__((noinline)) int op_post_recv(void)
{
	struct ibv_sge sge = { (uintptr_t)(buf + 4096), MSG, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(b_qp, &wr, &bad);
}

__attribute__((noinline)) int op_post_send(void)
{
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	return ibv_post_send(a_qp, &wr, &bad);
}

__attribute__((noinline)) int op_post_write(void)
{
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)(buf + 4096);
	wr.wr.rdma.rkey = mr->rkey;
	return ibv_post_send(a_qp, &wr, &bad);
}

__attribute__((noinline)) int op_post_read(void)
{
	struct ibv_sge sge = { (uintptr_t)buf, MSG, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 4, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)(buf + 4096);
	wr.wr.rdma.rkey = mr->rkey;
	return ibv_post_send(a_qp, &wr, &bad);
}

__attribute__((noinline)) int op_dequeue_hit(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

__attribute__((noinline)) int op_dequeue_miss(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

__attribute__((noinline)) int op_wait_present(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, 1, wc);
}

__attribute__((noinline)) int op_lmr(size_t len)
{
	struct ibv_mr *m = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ);
	if (!m)
		return -1;
	return ibv_dereg_mr(m);
}

/* ---- unmeasured helpers ---- */
static struct rdma_cm_id *next_event(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	if (ev->event != want) {
		fprintf(stderr, "instr-verbs: cm event %s, expected %s\n", rdma_event_str(ev->event),
			rdma_event_str(want));
		exit(1);
	}
	id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

static struct ibv_qp_init_attr qp_attr(struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr a = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC };
	a.cap.max_send_wr = a.cap.max_recv_wr = depth;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	return a;
}

/* One connection: client id resolved and connected, the request accepted on a
 * new id, both established. The same steps as dat_ep_connect + dat_cr_accept
 * (which also make the QPs when the EPs are made: here rdma_create_qp). */
static void connect_pair(void)
{
	struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 7,
				     .rnr_retry_count = 7 };
	struct ibv_qp_init_attr qa;

	if (rdma_create_id(ch, &a_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(a_id, NULL, (struct sockaddr *)&addr, 2000))
		die("rdma_resolve_addr");
	next_event(RDMA_CM_EVENT_ADDR_RESOLVED);
	if (rdma_resolve_route(a_id, 2000))
		die("rdma_resolve_route");
	next_event(RDMA_CM_EVENT_ROUTE_RESOLVED);
	qa = qp_attr(a_scq, a_rcq);
	if (rdma_create_qp(a_id, pd, &qa))
		die("rdma_create_qp(A)");
	a_qp = a_id->qp;
	if (rdma_connect(a_id, &p))
		die("rdma_connect");
	b_id = next_event(RDMA_CM_EVENT_CONNECT_REQUEST);
	qa = qp_attr(b_scq, b_rcq);
	if (rdma_create_qp(b_id, pd, &qa))
		die("rdma_create_qp(B)");
	b_qp = b_id->qp;
	if (rdma_accept(b_id, &p))
		die("rdma_accept");
	next_event(RDMA_CM_EVENT_ESTABLISHED);
	next_event(RDMA_CM_EVENT_ESTABLISHED);
}

static void disconnect_pair(void)
{
	if (rdma_disconnect(a_id))
		die("rdma_disconnect");
	/* Over IB CM (which rxe uses) the passive side must answer the DREQ
	 * with its own rdma_disconnect (the DREP), or the active side waits
	 * for the DREQ timeout before its DISCONNECTED. */
	for (int i = 0; i < 2; i++)
		if (next_event(RDMA_CM_EVENT_DISCONNECTED) == b_id && rdma_disconnect(b_id))
			die("rdma_disconnect(B)");
	rdma_destroy_qp(a_id);
	rdma_destroy_qp(b_id);
	rdma_destroy_id(a_id);
	rdma_destroy_id(b_id);
}

static void reap(struct ibv_cq *cq, int n, const char *what)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++) {
		int r;
		while ((r = ibv_poll_cq(cq, 1, &wc)) == 0)
			usleep(100);
		if (r < 0 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "instr-verbs: %s: completion %s\n", what,
				r < 0 ? "poll error" : ibv_wc_status_str(wc.status));
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 4096, 65536, 1 << 20, 16 << 20, 64 << 20 };
	static const char *const names[] = { "lmr_4K", "lmr_64K", "lmr_1M", "lmr_16M", "lmr_64M" };
	struct ibv_wc wc;
	int n, lmr_n, cm_n, misses = 0;

	if (argc != 5) {
		fprintf(stderr, "usage: instr-verbs ADDR N LMR_N CM_N\n");
		return 2;
	}
	n = atoi(argv[2]);
	lmr_n = atoi(argv[3]);
	cm_n = atoi(argv[4]);
	depth = n + 8;
	buf = aligned_alloc(4096, 64 << 20);
	memset(buf, 1, 64 << 20);
	addr.sin_family = AF_INET;
	addr.sin_port = htons(PORT);
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1)
		die("inet_pton");

	ch = rdma_create_event_channel();
	if (!ch)
		die("rdma_create_event_channel");
	if (rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP))
		die("rdma_create_id(listen)");
	if (rdma_bind_addr(listen_id, (struct sockaddr *)&addr))
		die("rdma_bind_addr");
	if (rdma_listen(listen_id, 8))
		die("rdma_listen");
	pd = ibv_alloc_pd(listen_id->verbs);
	a_scq = ibv_create_cq(listen_id->verbs, n + 16, NULL, NULL, 0);
	a_rcq = ibv_create_cq(listen_id->verbs, n + 16, NULL, NULL, 0);
	b_scq = ibv_create_cq(listen_id->verbs, n + 16, NULL, NULL, 0);
	b_rcq = ibv_create_cq(listen_id->verbs, n + 16, NULL, NULL, 0);
	if (!pd || !a_scq || !a_rcq || !b_scq || !b_rcq)
		die("pd/cq");
	mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		die("ibv_reg_mr");

	connect_pair();
	phase_done("setup");
	for (int i = 0; i < n; i++)
		if (op_post_recv())
			die("ibv_post_recv");
	phase_done("post_recv");
	for (int i = 0; i < n; i++)
		if (op_post_send())
			die("ibv_post_send");
	phase_done("post_send");
	usleep(300000);
	for (int i = 0; i < n; i++)
		if (op_dequeue_hit(a_scq, &wc) != 1) {
			misses++;
			reap(a_scq, 1, "send (late)");
		}
	phase_done("dequeue_hit");
	for (int i = 0; i < n; i++)
		if (op_wait_present(b_rcq, &wc) != 1) {
			misses++;
			reap(b_rcq, 1, "recv (late)");
		}
	phase_done("wait_present");
	for (int i = 0; i < n; i++)
		if (op_dequeue_miss(a_scq, &wc) != 0)
			die("poll of an empty CQ found a completion");
	phase_done("dequeue_miss");
	for (int i = 0; i < n; i++)
		if (op_post_write())
			die("ibv_post_send(write)");
	phase_done("post_write");
	reap(a_scq, n, "write");
	phase_done("reap");
	for (int i = 0; i < n; i++)
		if (op_post_read())
			die("ibv_post_send(read)");
	phase_done("post_read");
	reap(a_scq, n, "read");
	phase_done("reap");
	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int i = 0; i < lmr_n; i++)
			if (op_lmr(sizes[s]))
				die("ibv_reg_mr/ibv_dereg_mr");
		phase_done(names[s]);
	}
	/* The first pair stays; each cycle makes, connects and destroys another. */
	for (int i = 0; i < cm_n; i++) {
		connect_pair();
		disconnect_pair();
	}
	phase_done("connect_cycle");
	fprintf(stderr, "instr-verbs: dequeue_hit misses %d\n", misses);
	return 0;
}
