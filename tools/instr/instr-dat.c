/*
 * instr-dat: the DAT side of tools/bench-instr.sh. One process, two EPs on
 * one IA connected to each other over the IA's own address, then each
 * operation N times in a row. Every measured call sits alone in its own
 * noinline op_* function (so that callgrind can name it). After each phase
 * phase_done() is called, and --dump-after=phase_done writes one dump per
 * phase, in the order listed by the program on stderr. A dump counts the
 * whole process, all threads: the loop around each call adds the same few
 * instructions here and in instr-verbs.c, and whatever a provider's own
 * threads do during the phase is part of the cost.
 *
 * The same binary runs over our stack and over the reference (DAPL's
 * libdat2 + libdaplofa) by switching LD_LIBRARY_PATH and the IA name.
 *
 *   instr-dat IA N LMR_N CM_N
 */
#include <dat2/udat.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000
#define MSG 64
#define QUAL 4711

static DAT_IA_HANDLE ia;
static DAT_PZ_HANDLE pz;
static DAT_EVD_HANDLE cr_evd, a_conn, b_conn, a_req, a_recv, b_req, b_recv, async_evd;
static DAT_EP_HANDLE a_ep, b_ep;
static DAT_PSP_HANDLE psp;
static DAT_LMR_HANDLE lmr;
static DAT_LMR_CONTEXT lctx;
static DAT_RMR_CONTEXT rctx;
static char *buf;		/* [0, 4096): A's; [4096, 8192): B's */
static struct sockaddr_in self;
static int phase_no;

static void die(const char *what, DAT_RETURN r)
{
	const char *maj = "?", *min = "?";

	dat_strerror(r, &maj, &min);
	fprintf(stderr, "instr-dat: %s: %s %s (0x%x)\n", what, maj, min, (unsigned)r);
	exit(1);
}
#define OK(call) do { DAT_RETURN r_ = (call); if (r_ != DAT_SUCCESS) die(#call, r_); } while (0)

/* The end of a phase: callgrind dumps after each call (--dump-after). */
__attribute__((noinline)) void phase_done(const char *name)
{
	fprintf(stderr, "instr-dat: dump %d = %s\n", ++phase_no, name);
	__asm__ volatile("" ::: "memory");
}

/* ---- the measured calls, one DAT call each ---- */
__attribute__((noinline)) DAT_RETURN op_post_recv(void)
{
	DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)(buf + 4096), MSG, lctx };
	DAT_DTO_COOKIE c = { .as_64 = 2 };
	return dat_ep_post_recv(b_ep, 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG);
}

__attribute__((noinline)) DAT_RETURN op_post_send(void)
{
	DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)buf, MSG, lctx };
	DAT_DTO_COOKIE c = { .as_64 = 1 };
	return dat_ep_post_send(a_ep, 1, &iov, c, DAT_COMPLETION_DEFAULT_FLAG);
}

__attribute__((noinline)) DAT_RETURN op_post_write(void)
{
	DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)buf, MSG, lctx };
	DAT_RMR_TRIPLET rem = { (DAT_VADDR)(uintptr_t)(buf + 4096), MSG, rctx };
	DAT_DTO_COOKIE c = { .as_64 = 3 };
	return dat_ep_post_rdma_write(a_ep, 1, &iov, c, &rem, DAT_COMPLETION_DEFAULT_FLAG);
}

__attribute__((noinline)) DAT_RETURN op_post_read(void)
{
	DAT_LMR_TRIPLET iov = { (DAT_VADDR)(uintptr_t)buf, MSG, lctx };
	DAT_RMR_TRIPLET rem = { (DAT_VADDR)(uintptr_t)(buf + 4096), MSG, rctx };
	DAT_DTO_COOKIE c = { .as_64 = 4 };
	return dat_ep_post_rdma_read(a_ep, 1, &iov, c, &rem, DAT_COMPLETION_DEFAULT_FLAG);
}

__attribute__((noinline)) DAT_RETURN op_dequeue_hit(DAT_EVD_HANDLE evd, DAT_EVENT *ev)
{
	return dat_evd_dequeue(evd, ev);
}

__attribute__((noinline)) DAT_RETURN op_dequeue_miss(DAT_EVD_HANDLE evd, DAT_EVENT *ev)
{
	return dat_evd_dequeue(evd, ev);
}

__attribute__((noinline)) DAT_RETURN op_wait_present(DAT_EVD_HANDLE evd, DAT_EVENT *ev)
{
	DAT_COUNT more;
	return dat_evd_wait(evd, 10 * SEC, 1, ev, &more);
}

__attribute__((noinline)) DAT_RETURN op_lmr(DAT_VLEN len)
{
	DAT_REGION_DESCRIPTION region = { .for_va = buf };
	DAT_LMR_HANDLE h;
	DAT_LMR_CONTEXT lc;
	DAT_RMR_CONTEXT rc;
	DAT_VLEN rlen;
	DAT_VADDR va;
	DAT_RETURN r = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_ALL_FLAG,
				      DAT_VA_TYPE_VA, &h, &lc, &rc, &rlen, &va);
	if (r != DAT_SUCCESS)
		return r;
	return dat_lmr_free(h);
}

/* ---- unmeasured helpers ---- */
static void wait_ev(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, DAT_EVENT *ev, const char *what)
{
	DAT_COUNT more;

	OK(dat_evd_wait(evd, 10 * SEC, 1, ev, &more));
	if (ev->event_number != want) {
		fprintf(stderr, "instr-dat: %s: event 0x%x, expected 0x%x\n", what, ev->event_number, want);
		exit(1);
	}
	if (want == DAT_DTO_COMPLETION_EVENT && ev->event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS) {
		fprintf(stderr, "instr-dat: %s: DTO status %d\n", what, ev->event_data.dto_completion_event_data.status);
		exit(1);
	}
}

static void make_eps(DAT_COUNT depth)
{
	DAT_EP_ATTR a;

	memset(&a, 0, sizeof(a));
	a.service_type = DAT_SERVICE_TYPE_RC;
	a.max_message_size = 1 << 20;
	a.max_rdma_size = 1 << 20;
	a.qos = DAT_QOS_BEST_EFFORT;
	a.recv_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.request_completion_flags = DAT_COMPLETION_DEFAULT_FLAG;
	a.max_recv_dtos = depth;
	a.max_request_dtos = depth;
	a.max_recv_iov = 1;
	a.max_request_iov = 1;
	a.max_rdma_read_in = 4;
	a.max_rdma_read_out = 4;
	a.max_rdma_read_iov = 1;
	a.max_rdma_write_iov = 1;
	OK(dat_ep_create(ia, pz, a_recv, a_req, a_conn, &a, &a_ep));
	OK(dat_ep_create(ia, pz, b_recv, b_req, b_conn, &a, &b_ep));
}

static void connect_eps(void)
{
	DAT_EVENT ev;

	OK(dat_ep_connect(a_ep, (DAT_IA_ADDRESS_PTR)&self, QUAL, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT,
			  DAT_CONNECT_DEFAULT_FLAG));
	wait_ev(cr_evd, DAT_CONNECTION_REQUEST_EVENT, &ev, "CR");
	OK(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, b_ep, 0, NULL));
	wait_ev(b_conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "B established");
	wait_ev(a_conn, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "A established");
}

static void disconnect_eps(void)
{
	DAT_EVENT ev;

	OK(dat_ep_disconnect(a_ep, DAT_CLOSE_GRACEFUL_FLAG));
	wait_ev(a_conn, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "A disconnected");
	wait_ev(b_conn, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "B disconnected");
}

/* Let rxe finish the N sends before the dequeues that must find them (a
 * dequeue that misses is counted and reported, so a too-short pause shows).
 * A fixed pause happens once in both runs and cancels in the difference. */
static void settle(void)
{
	usleep(300000);
}

static void reap(DAT_EVD_HANDLE evd, int n, const char *what)
{
	DAT_EVENT ev;

	for (int i = 0; i < n; i++)
		wait_ev(evd, DAT_DTO_COMPLETION_EVENT, &ev, what);
}

int main(int argc, char **argv)
{
	DAT_IA_ATTR attr;
	DAT_EVD_HANDLE e;
	DAT_EVENT ev;
	int n, lmr_n, cm_n, misses = 0;
	static const DAT_VLEN sizes[] = { 4096, 65536, 1 << 20, 16 << 20, 64 << 20 };
	static const char *const names[] = { "lmr_4K", "lmr_64K", "lmr_1M", "lmr_16M", "lmr_64M" };

	if (argc != 5) {
		fprintf(stderr, "usage: instr-dat IA N LMR_N CM_N\n");
		return 2;
	}
	n = atoi(argv[2]);
	lmr_n = atoi(argv[3]);
	cm_n = atoi(argv[4]);

	/* One buffer for everything, touched so that registration never faults pages in. */
	buf = aligned_alloc(4096, 64 << 20);
	memset(buf, 1, 64 << 20);

	OK(dat_ia_open((DAT_NAME_PTR)argv[1], 8, &async_evd, &ia));
	OK(dat_pz_create(ia, &pz));
	memset(&attr, 0, sizeof(attr));
	e = DAT_HANDLE_NULL;
	OK(dat_ia_query(ia, &e, DAT_IA_FIELD_IA_ADDRESS_PTR, &attr, 0, NULL));
	memcpy(&self, attr.ia_address_ptr, sizeof(self));
	OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
	OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &a_conn));
	OK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &b_conn));
	/* Deep enough for a whole phase: N operations are posted before any is reaped. */
	OK(dat_evd_create(ia, n + 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &a_req));
	OK(dat_evd_create(ia, n + 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &a_recv));
	OK(dat_evd_create(ia, n + 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &b_req));
	OK(dat_evd_create(ia, n + 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &b_recv));
	OK(dat_psp_create(ia, QUAL, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
	{
		DAT_REGION_DESCRIPTION region = { .for_va = buf };
		DAT_VLEN rlen;
		DAT_VADDR va;
		OK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, 8192, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
				  &lmr, &lctx, &rctx, &rlen, &va));
	}

	make_eps(n + 8);
	connect_eps();
	phase_done("setup");

	for (int i = 0; i < n; i++)
		OK(op_post_recv());
	phase_done("post_recv");
	for (int i = 0; i < n; i++)
		OK(op_post_send());
	phase_done("post_send");
	settle();
	for (int i = 0; i < n; i++) {
		DAT_RETURN r = op_dequeue_hit(a_req, &ev);
		if (r != DAT_SUCCESS) {
			misses++;
			wait_ev(a_req, DAT_DTO_COMPLETION_EVENT, &ev, "send (late)");
		}
	}
	phase_done("dequeue_hit");
	for (int i = 0; i < n; i++)
		OK(op_wait_present(b_recv, &ev));
	phase_done("wait_present");
	for (int i = 0; i < n; i++)
		if (op_dequeue_miss(a_req, &ev) == DAT_SUCCESS)
			die("dequeue on an empty EVD found an event", 0);
	phase_done("dequeue_miss");
	for (int i = 0; i < n; i++)
		OK(op_post_write());
	phase_done("post_write");
	reap(a_req, n, "write");
	phase_done("reap");
	for (int i = 0; i < n; i++)
		OK(op_post_read());
	phase_done("post_read");
	reap(a_req, n, "read");
	phase_done("reap");
	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int i = 0; i < lmr_n; i++)
			OK(op_lmr(sizes[s]));
		phase_done(names[s]);
	}
	/* One cycle: two EPs made, connected, accepted, established on both
	 * sides, disconnected on both sides, freed. The first pair stays. */
	for (int i = 0; i < cm_n; i++) {
		make_eps(16);
		connect_eps();
		disconnect_eps();
		OK(dat_ep_free(a_ep));
		OK(dat_ep_free(b_ep));
	}
	phase_done("connect_cycle");
	fprintf(stderr, "instr-dat: dequeue_hit misses %d\n", misses);
	return 0;
}
