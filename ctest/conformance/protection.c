/*
 * protection.c - a peer reaches only the memory it was granted.
 *
 * One IA, two connected EPs (A initiator, B target).  B's memory is a
 * 192 KiB block whose middle 64 KiB is registered; the block is filled with
 * a known pattern and compared byte by byte with a shadow copy after every
 * refused access, guards included.  A refused access must complete on A with
 * DAT_DTO_ERR_REMOTE_ACCESS (a local-key violation with
 * DAT_DTO_ERR_LOCAL_PROTECTION), and the EP is then broken: its next DTO
 * is refused or flushed.  Each refused access gets a fresh connection.
 */
#include "harness.h"

#define SEG   65536
#define BLOCK (3 * SEG)

struct prot {
	struct pair p;
	unsigned char *block, *shadow;	/* B's memory; the LMR covers block[SEG, 2*SEG) */
	DAT_LMR_HANDLE tlmr;
	DAT_LMR_CONTEXT tlkey;
	DAT_RMR_CONTEXT trkey;
	DAT_VADDR taddr;
	struct mem local;	/* A's buffer, ALL privileges */
	uint64_t cookie;
};

static int window_bounds_unenforced(void)
{
	const char *v = getenv("CONF_WINDOW_BOUNDS");

	return v && strcmp(v, "unenforced") == 0;
}

static int reg_target(struct prot *x, DAT_PZ_HANDLE pz, DAT_MEM_PRIV_FLAGS priv)
{
	DAT_REGION_DESCRIPTION r;
	DAT_VLEN len = 0;
	DAT_RETURN rc;

	memset(&r, 0, sizeof(r));
	r.for_va = x->block + SEG;
	rc = CALL(dat_lmr_create(x->p.ia, DAT_MEM_TYPE_VIRTUAL, r, SEG, pz, priv, DAT_VA_TYPE_VA, &x->tlmr, &x->tlkey,
				 &x->trkey, &len, &x->taddr));
	if (rc != DAT_SUCCESS) {
		fail("dat_lmr_create(target, priv 0x%x): %s", (unsigned)priv, describe(rc));
		return 0;
	}
	return 1;
}

/* Pair connected, target registered in B's PZ (or `pz` if given) with `priv`. */
static int prot_open(struct prot *x, DAT_MEM_PRIV_FLAGS priv, int other_pz)
{
	memset(x, 0, sizeof(*x));
	x->cookie = 0x100;
	if (!pair_open(&x->p))
		return 0;
	x->block = must_alloc(BLOCK);
	x->shadow = must_alloc(BLOCK);
	for (size_t i = 0; i < BLOCK; i++)
		x->block[i] = x->shadow[i] = (unsigned char)((i * 13 + 7) & 0x7f);
	DAT_PZ_HANDLE pz = x->p.pz;
	if (other_pz && !(pz = make_pz(x->p.ia)))
		return 0;
	if (!reg_target(x, pz, priv))
		return 0;
	if (!mem_reg(x->p.ia, x->p.pz, SEG, DAT_MEM_PRIV_ALL_FLAG, &x->local))
		return 0;
	for (size_t i = 0; i < SEG; i++)
		x->local.buf[i] = (unsigned char)(0x80 | (i & 0x7f));
	return 1;
}

static void check_block(struct prot *x, const char *what)
{
	size_t n = 0, first = BLOCK, i;

	for (i = 0; i < BLOCK; i++)
		if (x->block[i] != x->shadow[i]) {
			if (first == BLOCK)
				first = i;
			n++;
		}
	if (n)
		fail("%s: B's memory changed in %zu bytes, first at block+%zu (LMR is block+%d..%d): 0x%02x, was 0x%02x",
		     what, n, first, SEG, 2 * SEG - 1, x->block[first], x->shadow[first]);
	else
		g_stats.bytes += BLOCK;
}

/* A posts an RDMA write (or read) of len bytes to remote address raddr with
 * rkey; returns the completion status or -1. */
static int rdma_op(struct prot *x, int write, DAT_VADDR raddr, size_t len, DAT_RMR_CONTEXT rkey, DAT_LMR_TRIPLET *local,
		   const char *what)
{
	DAT_LMR_TRIPLET l = local ? *local : triplet(&x->local, 0, len);
	DAT_RMR_TRIPLET rt;
	DAT_DTO_COOKIE ck;
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_RETURN r;
	int st;

	rt.virtual_address = raddr;
	rt.segment_length = len;
	rt.rmr_context = rkey;
	ck.as_64 = ++x->cookie;
	if (write)
		r = CALL(dat_ep_post_rdma_write(x->p.a.ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG));
	else
		r = CALL(dat_ep_post_rdma_read(x->p.a.ep, 1, &l, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG));
	if (r != DAT_SUCCESS) {
		fail("%s: dat_ep_post_rdma_%s: %s", what, write ? "write" : "read", describe(r));
		return -1;
	}
	st = next_dto(x->p.a.req, WAIT_US, &d, what);
	if (st >= 0) {
		CHECK_EQ(d.user_cookie.as_64, x->cookie, "completion cookie");
		CHECK(d.ep_handle == x->p.a.ep, "%s: completion ep_handle %p, expected A", what, (void *)d.ep_handle);
	}
	return st;
}

/* After an error completion the EP takes no more work: a post is refused,
 * or completes flushed. */
static void expect_broken(struct prot *x, const char *what)
{
	DAT_LMR_TRIPLET l = triplet(&x->local, 0, 16);
	DAT_DTO_COOKIE ck = { .as_64 = 0xdead };
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_RETURN r = CALL(dat_ep_post_send(x->p.a.ep, 1, &l, ck, DAT_COMPLETION_DEFAULT_FLAG));

	if (r == DAT_SUCCESS) {
		int st = next_dto(x->p.a.req, WAIT_US, &d, "send after the error");
		if (st >= 0 && st != DAT_DTO_ERR_FLUSHED)
			fail("%s: a send after the error completed with %s, expected DAT_DTO_ERR_FLUSHED (EP broken)", what,
			     dto_status_name(st));
	} else if (DAT_GET_TYPE(r) != DAT_INVALID_STATE) {
		fail("%s: a send after the error: expected DAT_INVALID_STATE or a flushed completion, got %s", what,
		     describe(r));
	} else {
		g_stats.errors++;
	}
}

/* One access B never granted: refused, B's memory intact, A broken. */
static void refused(struct prot *x, int write, DAT_VADDR raddr, size_t len, DAT_RMR_CONTEXT rkey, int want,
		    const char *what)
{
	int st = rdma_op(x, write, raddr, len, rkey, NULL, what);

	if (st < 0)
		return;
	if (st != want)
		fail("%s: completion %s, expected %s", what, dto_status_name(st), dto_status_name(want));
	check_block(x, what);
	if (!write) {
		/* a refused read wrote nothing into A's buffer either */
		for (size_t i = 0; i < len && i < SEG; i++)
			if (x->local.buf[i] != (unsigned char)(0x80 | (i & 0x7f))) {
				fail("%s: A's buffer changed at +%zu by a refused read", what, i);
				break;
			}
	}
	expect_broken(x, what);
}

static void prot_close(struct prot *x)
{
	pair_close(&x->p);
	free(x->block);
	free(x->shadow);
}

static void case_write_without_remote_write(void)
{
	struct prot x;

	if (prot_open(&x, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG, 0)) {
		/* reads are granted, and work */
		int st = rdma_op(&x, 0, x.taddr, 4096, x.trkey, NULL, "read (granted)");
		CHECK(st == DAT_DTO_SUCCESS, "granted read: %s", st >= 0 ? dto_status_name(st) : "no completion");
		CHECK(st != DAT_DTO_SUCCESS || memcmp(x.local.buf, x.block + SEG, 4096) == 0, "granted read: wrong bytes");
		for (size_t i = 0; i < SEG; i++)
			x.local.buf[i] = (unsigned char)(0x80 | (i & 0x7f));
		refused(&x, 1, x.taddr, 4096, x.trkey, DAT_DTO_ERR_REMOTE_ACCESS, "write to an LMR without REMOTE_WRITE");
	}
	prot_close(&x);
}

static void case_read_without_remote_read(void)
{
	struct prot x;

	if (prot_open(&x, DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG, 0))
		refused(&x, 0, x.taddr, 4096, x.trkey, DAT_DTO_ERR_REMOTE_ACCESS, "read from an LMR without REMOTE_READ");
	prot_close(&x);
}

static void case_wrong_rkey(void)
{
	struct prot x;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0))
		refused(&x, 1, x.taddr, 4096, x.trkey ^ 0x5a, DAT_DTO_ERR_REMOTE_ACCESS, "write with a wrong rkey (key byte)");
	prot_close(&x);
	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0))
		refused(&x, 0, x.taddr, 4096, x.trkey + 0x1000, DAT_DTO_ERR_REMOTE_ACCESS, "read with a wrong rkey (index)");
	prot_close(&x);
}

static void case_stale_rkey(void)
{
	struct prot x;
	DAT_RMR_CONTEXT old;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0)) {
		old = x.trkey;
		CHECK_RC(dat_lmr_free(x.tlmr), DAT_SUCCESS, "dat_lmr_free(target)");
		refused(&x, 1, x.taddr, 4096, old, DAT_DTO_ERR_REMOTE_ACCESS, "write with the rkey of a freed LMR");
	}
	prot_close(&x);
}

static void case_outside_lmr(void)
{
	struct prot x;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0))
		refused(&x, 1, x.taddr + SEG - 100, 200, x.trkey, DAT_DTO_ERR_REMOTE_ACCESS,
			"write straddling the LMR's end");
	prot_close(&x);
	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0))
		refused(&x, 1, x.taddr - 4096, 512, x.trkey, DAT_DTO_ERR_REMOTE_ACCESS, "write before the LMR's start");
	prot_close(&x);
	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0))
		refused(&x, 0, x.taddr + SEG, 64, x.trkey, DAT_DTO_ERR_REMOTE_ACCESS, "read just past the LMR's end");
	prot_close(&x);
}

static void case_other_pz(void)
{
	struct prot x;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 1))
		refused(&x, 1, x.taddr, 4096, x.trkey, DAT_DTO_ERR_REMOTE_ACCESS,
			"write to an LMR in another PZ than the target EP's");
	prot_close(&x);
}

/* A's own triplet names an LMR of another PZ: a local protection error. */
static void case_local_foreign_lmr(void)
{
	struct prot x;
	struct mem foreign;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0)) {
		DAT_PZ_HANDLE pz2 = make_pz(x.p.ia);
		if (pz2 && mem_reg(x.p.ia, pz2, SEG, DAT_MEM_PRIV_ALL_FLAG, &foreign)) {
			DAT_LMR_TRIPLET l = triplet(&foreign, 0, 4096);
			int st = rdma_op(&x, 1, x.taddr, 4096, x.trkey, &l, "write from an LMR of another PZ");
			/* rxe reports a local key of another PD as IBV_WC_LOC_QP_OP_ERR (LOCAL_EP),
			 * other devices as IBV_WC_LOC_PROT_ERR (LOCAL_PROTECTION): either is a local error */
			if (st == DAT_DTO_ERR_LOCAL_EP)
				printf("# device: rxe reports the foreign lkey as DAT_DTO_ERR_LOCAL_EP\n");
			else if (st >= 0 && st != DAT_DTO_ERR_LOCAL_PROTECTION)
				fail("write from an LMR of another PZ: %s, expected DAT_DTO_ERR_LOCAL_PROTECTION "
				     "(or DAT_DTO_ERR_LOCAL_EP on rxe)", dto_status_name(st));
			check_block(&x, "write from an LMR of another PZ");
			expect_broken(&x, "write from an LMR of another PZ");
		}
	}
	prot_close(&x);
}

/* The EP that got a DTO error leaves the CONNECTED state and says so. */
static void case_remote_error_breaks_ep(void)
{
	struct prot x;
	DAT_EVENT ev;
	DAT_EP_STATE st = DAT_EP_STATE_CONNECTED;

	if (prot_open(&x, DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG, 0)) {
		int s = rdma_op(&x, 1, x.taddr, 4096, x.trkey, NULL, "write without REMOTE_WRITE");
		CHECK(s == DAT_DTO_ERR_REMOTE_ACCESS, "completion %s", s >= 0 ? dto_status_name(s) : "none");
		DAT_RETURN r = wait_ev(x.p.a.conn, 10 * SEC, &ev);
		if (r != DAT_SUCCESS)
			fail("A's connection EVD: no event within 10 s of the error completion (%s); expected "
			     "CONNECTION_BROKEN or DISCONNECTED", describe(r));
		else if (ev.event_number != DAT_CONNECTION_EVENT_BROKEN && ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED)
			fail("A's connection EVD: %s, expected CONNECTION_BROKEN or DISCONNECTED", event_name(ev.event_number));
		else
			g_stats.errors++;
		CHECK_RC(dat_ep_get_status(x.p.a.ep, &st, NULL, NULL), DAT_SUCCESS, "dat_ep_get_status");
		CHECK(st != DAT_EP_STATE_CONNECTED, "A still in DAT_EP_STATE_CONNECTED after a remote access error");
		check_block(&x, "after the error");
	}
	prot_close(&x);
}

/* ------------------------------------------------------------------ */
/* RMRs                                                               */

/* Binds rmr on B over target[off, off+len) with priv; 1 and *ctx if done. */
static int bind_wait(struct prot *x, DAT_RMR_HANDLE rmr, size_t off, size_t len, DAT_MEM_PRIV_FLAGS priv,
		     DAT_RMR_CONTEXT *ctx)
{
	DAT_LMR_TRIPLET t;
	DAT_RMR_COOKIE ck = { .as_64 = ++x->cookie };
	DAT_EVENT ev;
	DAT_RETURN r;

	t.virtual_address = x->taddr + off;
	t.segment_length = len;
	t.lmr_context = x->tlkey;
	r = CALL(dat_rmr_bind(rmr, x->tlmr, &t, priv, DAT_VA_TYPE_VA, x->p.b.ep, ck, DAT_COMPLETION_DEFAULT_FLAG, ctx));
	if (r != DAT_SUCCESS) {
		fail("dat_rmr_bind(+%zu, %zu): %s", off, len, describe(r));
		return 0;
	}
	if (!expect_ev(x->p.b.req, WAIT_US, DAT_RMR_BIND_COMPLETION_EVENT, &ev, "bind completion"))
		return 0;
	CHECK_EQ(ev.event_data.rmr_completion_event_data.user_cookie.as_64, x->cookie, "bind cookie");
	if (ev.event_data.rmr_completion_event_data.status != DAT_DTO_SUCCESS) {
		fail("bind completion status %s", dto_status_name(ev.event_data.rmr_completion_event_data.status));
		return 0;
	}
	return 1;
}

static void case_rmr_read_only_write(void)
{
	struct prot x;
	DAT_RMR_HANDLE rmr = NULL;
	DAT_RMR_CONTEXT ctx;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0) && CALL(dat_rmr_create(x.p.pz, &rmr)) == DAT_SUCCESS &&
	    bind_wait(&x, rmr, 4096, 8192, DAT_MEM_PRIV_REMOTE_READ_FLAG, &ctx)) {
		int st = rdma_op(&x, 0, x.taddr + 4096, 8192, ctx, NULL, "read through a read-only window");
		CHECK(st == DAT_DTO_SUCCESS, "read through a read-only window: %s", st >= 0 ? dto_status_name(st) : "none");
		CHECK(st != DAT_DTO_SUCCESS || memcmp(x.local.buf, x.block + SEG + 4096, 8192) == 0, "read: wrong bytes");
		for (size_t i = 0; i < SEG; i++)
			x.local.buf[i] = (unsigned char)(0x80 | (i & 0x7f));
		refused(&x, 1, x.taddr + 4096, 8192, ctx, DAT_DTO_ERR_REMOTE_ACCESS, "write through a read-only window");
	}
	prot_close(&x);
}

static void case_rmr_after_unbind(void)
{
	struct prot x;
	DAT_RMR_HANDLE rmr = NULL;
	DAT_RMR_CONTEXT ctx, ctx2;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0) && CALL(dat_rmr_create(x.p.pz, &rmr)) == DAT_SUCCESS &&
	    bind_wait(&x, rmr, 4096, 8192, DAT_MEM_PRIV_REMOTE_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG, &ctx)) {
		int st = rdma_op(&x, 1, x.taddr + 4096, 8192, ctx, NULL, "write through the window");
		CHECK(st == DAT_DTO_SUCCESS, "write through the bound window: %s", st >= 0 ? dto_status_name(st) : "none");
		if (st == DAT_DTO_SUCCESS)
			memcpy(x.shadow + SEG + 4096, x.local.buf, 8192);
		check_block(&x, "after the granted write");
		if (bind_wait(&x, rmr, 0, 0, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &ctx2))
			refused(&x, 1, x.taddr + 4096, 8192, ctx, DAT_DTO_ERR_REMOTE_ACCESS, "write after the unbind");
	}
	prot_close(&x);
}

/* Outside the window but inside the LMR: rxe does not bound windows (its
 * responder checks the MR's range only): CONF_WINDOW_BOUNDS=unenforced makes
 * a write that lands exactly where addressed a known device limitation. */
static void case_rmr_outside_window(void)
{
	struct prot x;
	DAT_RMR_HANDLE rmr = NULL;
	DAT_RMR_CONTEXT ctx;

	if (prot_open(&x, DAT_MEM_PRIV_ALL_FLAG, 0) && CALL(dat_rmr_create(x.p.pz, &rmr)) == DAT_SUCCESS &&
	    bind_wait(&x, rmr, 4096, 8192, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, &ctx)) {
		int st = rdma_op(&x, 1, x.taddr + 16384, 512, ctx, NULL, "write outside the window, inside the LMR");
		if (st == DAT_DTO_SUCCESS && window_bounds_unenforced()) {
			printf("# device limitation: a write outside the window got through (rxe checks the MR's range)\n");
			memcpy(x.shadow + SEG + 16384, x.local.buf, 512);
			check_block(&x, "write outside the window (device-limited)");
		} else if (st >= 0) {
			if (st != DAT_DTO_ERR_REMOTE_ACCESS)
				fail("write outside the window: %s, expected DAT_DTO_ERR_REMOTE_ACCESS", dto_status_name(st));
			check_block(&x, "write outside the window");
			expect_broken(&x, "write outside the window");
		}
	}
	prot_close(&x);
}

const struct tcase protection_cases[] = {
	CASE("protection", write_without_remote_write, 1),
	CASE("protection", read_without_remote_read, 1),
	CASE("protection", wrong_rkey, 1),
	CASE("protection", stale_rkey, 1),
	CASE("protection", outside_lmr, 1),
	CASE("protection", other_pz, 1),
	CASE("protection", local_foreign_lmr, 1),
	CASE("protection", remote_error_breaks_ep, 1),
	CASE("protection", rmr_read_only_write, 0),
	CASE("protection", rmr_after_unbind, 0),
	CASE("protection", rmr_outside_window, 0),
};
const int protection_ncases = sizeof(protection_cases) / sizeof(protection_cases[0]);
