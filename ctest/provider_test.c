/*
 * provider_test.c - black-box tests of the verbs provider libdaplibv.so.2
 * through the public DAT API, on a real (Soft-RoCE) device.
 *
 * Runs where an RDMA device exists: inside the rxe guest (see
 * guest/provider.sh, which writes the dat.conf and sets DAT_OVERRIDE).  The
 * dat.conf is not written here: the reference registry reads DAT_OVERRIDE
 * when it is loaded, so it must be in the environment at exec time.
 *
 * Every case runs in its own fork()ed child (common/casefork.h), a crash or
 * a 120 s hang reported for that case.  Output: `ok <case>` or `FAIL <case>`
 * per case, then exactly one `<label>: N passed, M failed`.
 *
 * usage: provider_test [options] [case...]   (no case: all of the mode's cases)
 *   -i IA   IA whose ia_params are "<netdev> 0"        (env PT_IA,         default ibv-netdev)
 *   -d IA   IA whose ia_params are "<device> <port>"   (env PT_IA_DEV,     default ibv-devport)
 *   -a IA   IA whose ia_params are "<address> 0"       (env PT_IA_ADDR,    default ibv-addr)
 *   -b IA   IA naming a netdev that does not exist     (env PT_IA_BADNET,  default ibv-badnet)
 *   -p IA   IA naming a device port that does not exist (env PT_IA_BADPORT, default ibv-badport)
 *           (env PT_IA_LO, default ibv-lo: "lo 0", a netdev without RDMA device)
 *   -R      reference-registry mode: only the basic cases (env PT_REFERENCE=1)
 *   -l      list the cases and exit
 * env: PT_IA_DEVNAME: an IA named like the provider's device_name
 *      ("daplibv"), also closed by close_status; PT_PROVIDER (daplibv): the
 *      provider_name the IAs must report; PT_ADAPTER (rxe0), PT_ADDRESS (10.0.0.1), PT_NETDEV (dum0): what the
 *      IAs must report; PT_BADNET (eth9), PT_BADPORT (2): what the bad
 *      entries name, for the log checks; PT_VERBOSE=1: do not capture
 *      stderr; PT_KEEP=1: keep the temporary directory.
 */
#include "common/casefork.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#define UNREACHABLE       DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE)

#define SENTINEL_IA  ((DAT_IA_HANDLE)(uintptr_t)0x5a5a5a5a)
#define SENTINEL_EVD ((DAT_EVD_HANDLE)(uintptr_t)0xa5a5a5a5)
#define BUF_LEN      65536

/* ------------------------------------------------------------------ */
/* Configuration                                                      */

static const char *ia_netdev, *ia_dev, *ia_addr, *ia_badnet, *ia_badport, *ia_lo;
static const char *want_adapter, *want_address, *want_netdev, *bad_netdev, *bad_port;
static int g_ref;	/* running under the reference registry */

/* ------------------------------------------------------------------ */
/* DAT helpers                                                        */

static DAT_RETURN open_ia(const char *name, DAT_IA_HANDLE *ia)
{
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;

	*ia = SENTINEL_IA;
	return dat_ia_open((DAT_NAME_PTR)name, 8, &evd, ia);
}

static DAT_IA_HANDLE must_open(const char *name)
{
	DAT_IA_HANDLE ia;
	DAT_RETURN r = open_ia(name, &ia);

	CHECK_RC(r, DAT_SUCCESS, "dat_ia_open(\"%s\")", name);
	return r == DAT_SUCCESS ? ia : NULL;
}

/*
 * dat_ia_close expecting success.  The reference registry looks its entry
 * up again by provider->device_name at close (see close_status), so with it
 * a NAME_NOT_REGISTERED after the provider really closed is tolerated here
 * and reported once, by that case.
 */
static void close_ia(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags, const char *what)
{
	DAT_RETURN r;

	if (ia == NULL)
		return;
	r = dat_ia_close(ia, flags);
	if (g_ref && r == NOT_FOUND(DAT_NAME_NOT_REGISTERED)) {
		note("%s: reference registry returned %s (tolerated outside close_status)", what, describe(r));
		return;
	}
	CHECK_RC(r, DAT_SUCCESS, "%s", what);
}

static DAT_IA_HANDLE provider_ia_of(DAT_IA_HANDLE ia)
{
	DAT_IA_HANDLE p = NULL;

	CHECK_RC(dats_get_ia_handle(ia, &p), DAT_SUCCESS, "dats_get_ia_handle");
	return p;
}

static DAT_PZ_HANDLE must_pz(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;

	CHECK_RC(dat_pz_create(ia, &pz), DAT_SUCCESS, "dat_pz_create");
	return pz;
}

struct lmr_out {
	DAT_LMR_HANDLE lmr;
	DAT_LMR_CONTEXT lkey;
	DAT_RMR_CONTEXT rkey;
	DAT_VLEN reg_len;
	DAT_VADDR reg_addr;
};

static DAT_RETURN lmr_create_va(DAT_IA_HANDLE ia, void *addr, DAT_VLEN len, DAT_PZ_HANDLE pz,
				DAT_VA_TYPE va, struct lmr_out *o)
{
	DAT_REGION_DESCRIPTION region;

	memset(&region, 0, sizeof(region));
	region.for_va = addr;
	memset(o, 0, sizeof(*o));
	return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_ALL_FLAG, va,
			      &o->lmr, &o->lkey, &o->rkey, &o->reg_len, &o->reg_addr);
}

static DAT_RETURN lmr_create_shared(DAT_IA_HANDLE ia, DAT_LMR_HANDLE other, DAT_VLEN len, DAT_PZ_HANDLE pz,
				    struct lmr_out *o)
{
	DAT_REGION_DESCRIPTION region;

	memset(&region, 0, sizeof(region));
	region.for_lmr_handle = other;
	memset(o, 0, sizeof(*o));
	return dat_lmr_create(ia, DAT_MEM_TYPE_LMR, region, len, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
			      &o->lmr, &o->lkey, &o->rkey, &o->reg_len, &o->reg_addr);
}

static DAT_LMR_HANDLE must_lmr(DAT_IA_HANDLE ia, void *buf, DAT_VLEN len, DAT_PZ_HANDLE pz)
{
	struct lmr_out o;

	CHECK_RC(lmr_create_va(ia, buf, len, pz, DAT_VA_TYPE_VA, &o), DAT_SUCCESS,
		 "dat_lmr_create(VIRTUAL, %p, %llu)", buf, (unsigned long long)len);
	return o.lmr;
}

static void *must_malloc(size_t n)
{
	void *p = malloc(n);

	if (p == NULL) {
		fail("malloc(%zu) failed", n);
		exit(1);
	}
	memset(p, 0x5c, n);
	return p;
}

/* The captured stderr of this case so far (static buffer, "" if not captured). */
static const char *captured_log(void)
{
	static char text[65536];
	ssize_t n = 0;
	int fd;

	fflush(stderr);
	text[0] = 0;
	if (!g_errpath[0])
		return text;
	fd = open(g_errpath, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	text[n > 0 ? n : 0] = 0;
	return text;
}

/*
 * Verbs objects of this process that rdma-core's `rdma` tool lists
 * ("mr", "pd"), or -1 if the tool gives nothing usable.  Used to show that
 * freed handles also freed the device's resources.
 */
static int rdma_resources(const char *kind)
{
	char cmd[128], line[1024], want[32];
	int n = 0, any = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null", kind);
	snprintf(want, sizeof(want), " pid %d ", (int)getpid());
	fflush(stdout);
	fflush(stderr);
	p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		any = 1;
		if (strstr(line, want))
			n++;
	}
	if (pclose(p) != 0 && !any)
		return -1;
	return n;
}

/* ------------------------------------------------------------------ */
/* Cases: opening                                                     */

static void check_ia_basics(DAT_IA_HANDLE ia, const char *name)
{
	DAT_IA_ATTR a;
	DAT_PROVIDER_ATTR p;
	DAT_EVD_HANDLE evd = SENTINEL_EVD;
	struct sockaddr_in *sin;
	char ip[64] = "?";

	memset(&a, 0, sizeof(a));
	memset(&p, 0, sizeof(p));
	CHECK_RC(dat_ia_query(ia, &evd, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p), DAT_SUCCESS,
		 "dat_ia_query(%s)", name);
	CHECK(strcmp(a.adapter_name, want_adapter) == 0, "%s: adapter_name expected \"%s\", got \"%.64s\"",
	      name, want_adapter, a.adapter_name);
	const char *want_provider = getenv("PT_PROVIDER") && *getenv("PT_PROVIDER") ? getenv("PT_PROVIDER") : "daplibv";
	CHECK(strcmp(p.provider_name, want_provider) == 0, "%s: provider_name expected \"%s\", got \"%.64s\"",
	      name, want_provider, p.provider_name);
	sin = (struct sockaddr_in *)a.ia_address_ptr;
	if (sin == NULL) {
		fail("%s: ia_address_ptr is NULL", name);
		return;
	}
	CHECK(sin->sin_family == AF_INET, "%s: ia_address_ptr family expected AF_INET, got %d", name, sin->sin_family);
	if (sin->sin_family == AF_INET)
		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
	CHECK(strcmp(ip, want_address) == 0, "%s: ia_address_ptr expected %s, got %s", name, want_address, ip);
}

static void case_open_styles(void)
{
	const char *names[3] = { ia_netdev, ia_dev, ia_addr };
	DAT_IA_HANDLE ia[3];
	char what[128];
	int i;

	for (i = 0; i < 3; i++) {
		ia[i] = must_open(names[i]);
		if (ia[i]) {
			check_ia_basics(ia[i], names[i]);
			snprintf(what, sizeof(what), "dat_ia_close(%s)", names[i]);
			close_ia(ia[i], DAT_CLOSE_GRACEFUL_FLAG, what);
		}
	}
	/* all three at once, and the same name twice */
	for (i = 0; i < 3; i++)
		ia[i] = must_open(names[i]);
	DAT_IA_HANDLE again = must_open(ia_netdev);
	CHECK(again == NULL || again != ia[0], "two opens of %s returned the same handle %p", ia_netdev, again);
	for (i = 0; i < 3; i++)
		if (ia[i])
			check_ia_basics(ia[i], names[i]);
	if (again)
		check_ia_basics(again, ia_netdev);
	for (i = 0; i < 3; i++) {
		snprintf(what, sizeof(what), "dat_ia_close(%s) with others open", names[i]);
		close_ia(ia[i], DAT_CLOSE_ABRUPT_FLAG, what);
	}
	close_ia(again, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(second open)");
}

static void expect_unreachable(const char *name, const char *need1, const char *need2, const char *need3)
{
	DAT_IA_HANDLE ia = SENTINEL_IA;
	DAT_EVD_HANDLE evd = SENTINEL_EVD;
	const char *log;

	CHECK_EQ(UNREACHABLE, 0x80120000u | DAT_INVALID_ADDRESS_UNREACHABLE, "DAT_INVALID_ADDRESS|UNREACHABLE value");
	CHECK_RC(dat_ia_open((DAT_NAME_PTR)name, 8, &evd, &ia), UNREACHABLE, "dat_ia_open(\"%s\")", name);
	CHECK(ia == SENTINEL_IA, "dat_ia_open(\"%s\") failed but changed *ia to %p", name, ia);
	if (ia != SENTINEL_IA && ia != NULL)
		dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
	if (!g_errpath[0]) {
		note("stderr not captured (PT_VERBOSE): log contents not checked");
		return;
	}
	log = captured_log();
	CHECK(strstr(log, need1) != NULL, "log for \"%s\" does not mention %s; log: %.600s", name, need1, log);
	if (need2)
		CHECK(strstr(log, need2) != NULL, "log for \"%s\" does not name %s, which exists; log: %.600s",
		      name, need2, log);
	if (need3)
		CHECK(strstr(log, need3) != NULL, "log for \"%s\" does not name %s, which exists; log: %.600s",
		      name, need3, log);
}

static void case_open_bad_netdev(void)
{
	expect_unreachable(ia_badnet, bad_netdev, want_netdev, want_adapter);
	/* a good IA still opens afterwards */
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close after a failed open");
}

/* A netdev that exists but carries no RDMA device (lo). */
static void case_open_netdev_without_rdma(void)
{
	expect_unreachable(ia_lo, "127.0.0.1", NULL, NULL);
}

static void case_open_bad_port(void)
{
	char port[64], good[64];

	snprintf(port, sizeof(port), "port %s", bad_port);
	/* it should say which ports there are: rxe has port 1 only */
	snprintf(good, sizeof(good), "port 1");
	expect_unreachable(ia_badport, port, want_adapter, NULL);
	{
		const char *log = captured_log();
		const char *p = log;
		int names_port1 = 0;

		/* "port 1" must appear other than as the prefix of the bad port */
		while (g_errpath[0] && (p = strstr(p, good)) != NULL) {
			if (p[6] < '0' || p[6] > '9')
				names_port1 = 1;
			p += 6;
		}
		CHECK(!g_errpath[0] || names_port1,
		      "log for \"%s\" does not name the port that exists (%s %s); log: %.600s",
		      ia_badport, want_adapter, good, log);
	}
	DAT_IA_HANDLE ia = must_open(ia_dev);
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close after a failed open");
}

static void case_reopen(void)
{
	for (int i = 0; i < 10; i++) {
		DAT_IA_HANDLE ia = must_open(ia_netdev);
		if (!ia)
			return;
		DAT_PZ_HANDLE pz = must_pz(ia);
		CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free (round %d)", i);
		close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close (open/close cycle)");
	}
}

static void case_close_status(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);

	if (ia)
		CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ia_close(%s, GRACEFUL)", ia_netdev);
	ia = must_open(ia_netdev);
	if (ia)
		CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ia_close(%s, ABRUPT)", ia_netdev);
	/* the closed handle is gone */
	if (ia)
		CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
			 "dat_ia_close(closed IA)");
	/* an IA whose dat.conf name is the provider's device_name ("daplibv") */
	const char *devname = getenv("PT_IA_DEVNAME");
	if (devname && *devname) {
		ia = must_open(devname);
		if (ia)
			CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ia_close(%s, GRACEFUL)", devname);
	}
}

static void case_close_bad_flags(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);

	if (!ia)
		return;
	CHECK_RC(dat_ia_close(ia, (DAT_CLOSE_FLAGS)7), BAD_ARG(DAT_INVALID_ARG2), "dat_ia_close(flags 7)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close after bad flags");
}

/* ------------------------------------------------------------------ */
/* Cases: ia_query                                                    */

static void case_ia_query(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_IA_ATTR a;
	DAT_PROVIDER_ATTR p;
	DAT_EVD_HANDLE evd = SENTINEL_EVD;

	if (!ia)
		return;
	check_ia_basics(ia, ia_netdev);
	memset(&a, 0, sizeof(a));
	memset(&p, 0, sizeof(p));
	CHECK_RC(dat_ia_query(ia, &evd, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p), DAT_SUCCESS, "dat_ia_query");
	CHECK(evd != SENTINEL_EVD, "dat_ia_query left *async_evd unset");
#define POS(f) CHECK(a.f > 0, "ia_attr." #f " expected > 0, got %lld", (long long)a.f)
	POS(max_eps); POS(max_dto_per_ep); POS(max_rdma_read_per_ep_in); POS(max_rdma_read_per_ep_out);
	POS(max_evds); POS(max_evd_qlen); POS(max_iov_segments_per_dto); POS(max_lmrs);
	POS(max_lmr_block_size); POS(max_lmr_virtual_address); POS(max_pzs); POS(max_message_size);
	POS(max_rdma_size); POS(max_iov_segments_per_rdma_read); POS(max_iov_segments_per_rdma_write);
	POS(max_rdma_read_in); POS(max_rdma_read_out);
#undef POS
	CHECK(a.zb_supported == DAT_FALSE, "zb_supported expected FALSE (zero-based LMRs are refused), got %d",
	      (int)a.zb_supported);
	CHECK(a.vendor_name[0] != 0, "vendor_name is empty");
	CHECK_EQ(p.dapl_version_major, DAT_VERSION_MAJOR, "provider_attr.dapl_version_major");
	CHECK_EQ(p.dapl_version_minor, DAT_VERSION_MINOR, "provider_attr.dapl_version_minor");
	CHECK((p.lmr_mem_types_supported & (DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR)) ==
	      (DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR),
	      "lmr_mem_types_supported 0x%x lacks VIRTUAL|LMR", (unsigned)p.lmr_mem_types_supported);
	CHECK(p.optimal_buffer_alignment > 0, "optimal_buffer_alignment is 0");
	CHECK(p.is_thread_safe == DAT_FALSE, "is_thread_safe expected FALSE (dat.conf says nonthreadsafe), got %d",
	      (int)p.is_thread_safe);

	/* consistent with the device as verbs sees it */
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), want_adapter) == 0)
			ctx = ibv_open_device(list[i]);
	if (ctx == NULL) {
		fail("ibv_open_device(%s) failed; cannot compare with the device", want_adapter);
	} else {
		struct ibv_device_attr d;
		struct ibv_port_attr pa;
		if (ibv_query_device(ctx, &d) == 0 && ibv_query_port(ctx, 1, &pa) == 0) {
			CHECK_EQ(a.max_eps, d.max_qp, "max_eps vs ibv max_qp");
			CHECK_EQ(a.max_dto_per_ep, d.max_qp_wr, "max_dto_per_ep vs ibv max_qp_wr");
			CHECK_EQ(a.max_evds, d.max_cq, "max_evds vs ibv max_cq");
			CHECK_EQ(a.max_evd_qlen, d.max_cqe, "max_evd_qlen vs ibv max_cqe");
			CHECK_EQ(a.max_iov_segments_per_dto, d.max_sge, "max_iov_segments_per_dto vs ibv max_sge");
			CHECK_EQ(a.max_lmrs, d.max_mr, "max_lmrs vs ibv max_mr");
			CHECK_EQ(a.max_pzs, d.max_pd, "max_pzs vs ibv max_pd");
			CHECK_EQ(a.max_message_size, pa.max_msg_sz, "max_message_size vs ibv port max_msg_sz");
		} else {
			fail("ibv_query_device/port(%s) failed", want_adapter);
		}
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);

	/* NULL attribute pointers with zero masks are fine; with a mask they are not */
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), DAT_SUCCESS, "dat_ia_query(all NULL, masks 0)");
	CHECK_RC(dat_ia_query(ia, &evd, 0, NULL, DAT_PROVIDER_FIELD_ALL, &p), DAT_SUCCESS,
		 "dat_ia_query(provider attr only)");
	CHECK_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &a, 0, NULL), DAT_SUCCESS, "dat_ia_query(IA attr only)");
	CHECK_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, NULL, 0, NULL), BAD_ARG(DAT_INVALID_ARG4),
		 "dat_ia_query(IA mask, NULL ia_attr)");
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG6),
		 "dat_ia_query(provider mask, NULL provider_attr)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* Both handles of an IA (consumer and the provider's own) answer queries. */
static void case_ia_provider_handle(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), pia;
	DAT_IA_ATTR a;

	if (!ia)
		return;
	pia = provider_ia_of(ia);
	CHECK(pia != NULL && pia != ia, "provider IA handle %p (consumer %p)", pia, ia);
	memset(&a, 0, sizeof(a));
	CHECK_RC(dat_ia_query(pia, NULL, DAT_IA_FIELD_ALL, &a, 0, NULL), DAT_SUCCESS, "dat_ia_query(provider IA handle)");
	CHECK(strcmp(a.adapter_name, want_adapter) == 0, "adapter_name via provider handle: \"%.64s\"", a.adapter_name);
	DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
	CHECK_RC(dat_pz_create(pia, &pz), DAT_SUCCESS, "dat_pz_create(provider IA handle)");
	if (pz)
		CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* ------------------------------------------------------------------ */
/* Cases: PZ                                                          */

static void case_pz_basic(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), pia;
	DAT_PZ_HANDLE pz, pz2;
	DAT_PZ_PARAM param;

	if (!ia)
		return;
	pia = provider_ia_of(ia);
	pz = must_pz(ia);
	pz2 = must_pz(ia);
	CHECK(pz != pz2, "two PZs with the same handle %p", pz);
	memset(&param, 0, sizeof(param));
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS, "dat_pz_query");
	CHECK(param.ia_handle == ia || param.ia_handle == pia,
	      "dat_pz_query ia_handle %p is neither the consumer's %p nor the provider's %p", param.ia_handle, ia, pia);
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_pz_query(NULL param)");
	CHECK_RC(dat_pz_create(ia, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_pz_create(NULL out)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	CHECK_RC(dat_pz_free(pz), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(freed PZ)");
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_query(freed PZ)");
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(second)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* The IA handle dat_pz_query returns works as an IA handle (our registry). */
static void case_pz_query_ia_usable(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_PARAM param;
	DAT_PZ_HANDLE pz, pz2 = DAT_HANDLE_NULL;

	if (!ia)
		return;
	pz = must_pz(ia);
	memset(&param, 0, sizeof(param));
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &param), DAT_SUCCESS, "dat_pz_query");
	CHECK_RC(dat_pz_create(param.ia_handle, &pz2), DAT_SUCCESS, "dat_pz_create(ia_handle from dat_pz_query = %p)",
		 param.ia_handle);
	if (pz2) {
		DAT_PZ_PARAM p2;
		memset(&p2, 0, sizeof(p2));
		CHECK_RC(dat_pz_query(pz2, DAT_PZ_FIELD_ALL, &p2), DAT_SUCCESS, "dat_pz_query(second)");
		CHECK(p2.ia_handle == param.ia_handle, "PZs of one IA report different IAs: %p, %p", param.ia_handle,
		      p2.ia_handle);
		CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(second)");
	}
	CHECK_RC(dat_ia_query(param.ia_handle, NULL, 0, NULL, 0, NULL), DAT_SUCCESS, "dat_ia_query(pz's ia_handle)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* ------------------------------------------------------------------ */
/* Cases: LMR                                                         */

static void case_lmr_basic(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), pia;
	DAT_PZ_HANDLE pz;
	struct lmr_out o;
	DAT_LMR_PARAM q;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pia = provider_ia_of(ia);
	pz = must_pz(ia);
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, pz, DAT_VA_TYPE_VA, &o), DAT_SUCCESS, "dat_lmr_create(malloc'd %d bytes)",
		 BUF_LEN);
	CHECK(o.lmr != NULL, "dat_lmr_create returned a NULL handle");
	CHECK(o.lkey != 0, "lmr_context (lkey) is 0");
	CHECK(o.rkey != 0, "rmr_context (rkey) is 0");
	CHECK_EQ(o.reg_len, BUF_LEN, "registered_length");
	CHECK_EQ(o.reg_addr, (uintptr_t)buf, "registered_address vs buffer");

	memset(&q, 0, sizeof(q));
	CHECK_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, &q), DAT_SUCCESS, "dat_lmr_query");
	CHECK(q.ia_handle == ia || q.ia_handle == pia, "lmr_query ia_handle %p is neither %p nor %p", q.ia_handle, ia, pia);
	CHECK_EQ(q.mem_type, DAT_MEM_TYPE_VIRTUAL, "lmr_query mem_type");
	CHECK_EQ((uintptr_t)q.region_desc.for_va, (uintptr_t)buf, "lmr_query region_desc.for_va");
	CHECK_EQ(q.length, BUF_LEN, "lmr_query length");
	CHECK_EQ((uintptr_t)q.pz_handle, (uintptr_t)pz, "lmr_query pz_handle");
	CHECK_EQ(q.mem_priv, DAT_MEM_PRIV_ALL_FLAG, "lmr_query mem_priv");
	CHECK_EQ(q.va_type, DAT_VA_TYPE_VA, "lmr_query va_type");
	CHECK_EQ(q.lmr_context, o.lkey, "lmr_query lmr_context");
	CHECK_EQ(q.rmr_context, o.rkey, "lmr_query rmr_context");
	CHECK_EQ(q.registered_size, BUF_LEN, "lmr_query registered_size");
	CHECK_EQ(q.registered_address, (uintptr_t)buf, "lmr_query registered_address");
	CHECK_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_lmr_query(NULL param)");

	/* a second region in the middle of the buffer, optional outputs NULL, read-only privileges */
	DAT_REGION_DESCRIPTION r;
	DAT_LMR_HANDLE l2 = DAT_HANDLE_NULL;
	memset(&r, 0, sizeof(r));
	r.for_va = buf + 4096;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, 8192, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA,
				&l2, NULL, NULL, NULL, NULL), DAT_SUCCESS, "dat_lmr_create(NULL optional outputs)");
	if (l2) {
		memset(&q, 0, sizeof(q));
		CHECK_RC(dat_lmr_query(l2, DAT_LMR_FIELD_ALL, &q), DAT_SUCCESS, "dat_lmr_query(second)");
		CHECK_EQ(q.registered_address, (uintptr_t)(buf + 4096), "second LMR registered_address");
		CHECK_EQ(q.mem_priv, DAT_MEM_PRIV_LOCAL_READ_FLAG, "second LMR mem_priv");
		CHECK(q.lmr_context != o.lkey, "two LMRs with the same lkey 0x%x", (unsigned)q.lmr_context);
		CHECK_RC(dat_lmr_free(l2), DAT_SUCCESS, "dat_lmr_free(second)");
	}
	/* through the provider's IA handle as well */
	DAT_LMR_HANDLE l3 = DAT_HANDLE_NULL;
	if (!g_ref) {
		r.for_va = buf;
		CHECK_RC(dat_lmr_create(pia, DAT_MEM_TYPE_VIRTUAL, r, 512, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
					&l3, NULL, NULL, NULL, NULL), DAT_SUCCESS, "dat_lmr_create(provider IA handle)");
		if (l3)
			CHECK_RC(dat_lmr_free(l3), DAT_SUCCESS, "dat_lmr_free(third)");
	}

	CHECK_RC(dat_lmr_free(o.lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_lmr_free(o.lmr), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(freed LMR)");
	CHECK_RC(dat_lmr_query(o.lmr, DAT_LMR_FIELD_ALL, &q), BAD_HANDLE(DAT_INVALID_HANDLE_LMR),
		 "dat_lmr_query(freed LMR)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

static void case_lmr_errors(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), ia2 = must_open(ia_netdev);
	DAT_PZ_HANDLE pz, pz2, dead_pz;
	DAT_REGION_DESCRIPTION r;
	DAT_LMR_HANDLE l;
	struct lmr_out o;
	char *buf = must_malloc(BUF_LEN);

	if (!ia || !ia2)
		return;
	pz = must_pz(ia);
	pz2 = must_pz(ia2);
	dead_pz = must_pz(ia);
	CHECK_RC(dat_pz_free(dead_pz), DAT_SUCCESS, "dat_pz_free");

	CHECK_RC(lmr_create_va(ia, buf, 0, pz, DAT_VA_TYPE_VA, &o), BAD_ARG(DAT_INVALID_ARG4), "dat_lmr_create(length 0)");
	CHECK_RC(lmr_create_va(ia, NULL, BUF_LEN, pz, DAT_VA_TYPE_VA, &o), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_lmr_create(NULL address)");
	CHECK_RC(lmr_create_va(ia, NULL, 0, pz, DAT_VA_TYPE_VA, &o), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_lmr_create(NULL address, length 0)");
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, pz, DAT_VA_TYPE_ZB, &o), BAD_ARG(DAT_INVALID_ARG7),
		 "dat_lmr_create(DAT_VA_TYPE_ZB)");
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, pz2, DAT_VA_TYPE_VA, &o), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
		 "dat_lmr_create(PZ of another IA)");
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, dead_pz, DAT_VA_TYPE_VA, &o), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
		 "dat_lmr_create(freed PZ)");
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, NULL, DAT_VA_TYPE_VA, &o), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
		 "dat_lmr_create(NULL PZ)");
	CHECK_RC(lmr_create_va(pz, buf, BUF_LEN, pz, DAT_VA_TYPE_VA, &o), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dat_lmr_create(a PZ handle as the IA)");

	memset(&r, 0, sizeof(r));
	r.for_va = buf;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF_LEN, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
				NULL, NULL, NULL, NULL, NULL), BAD_ARG(DAT_INVALID_ARG8), "dat_lmr_create(NULL lmr out)");
	l = DAT_HANDLE_NULL;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, r, BUF_LEN, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA,
				&l, NULL, NULL, NULL, NULL), DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0),
		 "dat_lmr_create(DAT_MEM_TYPE_SHARED_VIRTUAL)");

	/* memory that is not mapped: the kernel refuses to pin it */
	void *gone = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (gone != MAP_FAILED) {
		munmap(gone, BUF_LEN);
		CHECK_RC(lmr_create_va(ia, gone, BUF_LEN, pz, DAT_VA_TYPE_VA, &o), BAD_ARG(DAT_INVALID_ARG3),
			 "dat_lmr_create(unmapped address)");
		if (o.lmr)
			dat_lmr_free(o.lmr);
	}

	/* none of the failures left anything behind: the PZs free */
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free after failed creates");
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(other IA's PZ)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	close_ia(ia2, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close(second)");
	free(buf);
}

static void case_lmr_shared(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_HANDLE pz;
	struct lmr_out base, sh, small, x;
	DAT_LMR_PARAM q;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pz = must_pz(ia);
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, pz, DAT_VA_TYPE_VA, &base), DAT_SUCCESS, "dat_lmr_create(base)");
	if (!base.lmr)
		return;
	CHECK_RC(lmr_create_shared(ia, base.lmr, BUF_LEN, pz, &sh), DAT_SUCCESS, "dat_lmr_create(DAT_MEM_TYPE_LMR)");
	CHECK(sh.lkey != 0 && sh.rkey != 0, "shared LMR keys 0x%x/0x%x", (unsigned)sh.lkey, (unsigned)sh.rkey);
	CHECK_EQ(sh.reg_addr, (uintptr_t)buf, "shared LMR registered_address");
	CHECK_EQ(sh.reg_len, BUF_LEN, "shared LMR registered_length");
	memset(&q, 0, sizeof(q));
	CHECK_RC(dat_lmr_query(sh.lmr, DAT_LMR_FIELD_ALL, &q), DAT_SUCCESS, "dat_lmr_query(shared)");
	CHECK_EQ(q.mem_type, DAT_MEM_TYPE_LMR, "shared lmr_query mem_type");
	CHECK_EQ((uintptr_t)q.region_desc.for_lmr_handle, (uintptr_t)base.lmr, "shared lmr_query region_desc.for_lmr_handle");
	CHECK_EQ(q.registered_address, (uintptr_t)buf, "shared lmr_query registered_address");

	CHECK_RC(lmr_create_shared(ia, base.lmr, 4096, pz, &small), DAT_SUCCESS, "dat_lmr_create(LMR, shorter)");
	CHECK_EQ(small.reg_len, 4096, "shorter shared LMR registered_length");
	CHECK_RC(lmr_create_shared(ia, base.lmr, BUF_LEN + 1, pz, &x), DAT_ERROR(DAT_LENGTH_ERROR, 0),
		 "dat_lmr_create(LMR, longer than the original)");
	if (x.lmr)
		dat_lmr_free(x.lmr);
	CHECK_RC(lmr_create_shared(ia, pz, 4096, pz, &x), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_lmr_create(LMR, region is a PZ handle)");
	if (x.lmr)
		dat_lmr_free(x.lmr);
	CHECK_RC(lmr_create_shared(ia, NULL, 4096, pz, &x), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_lmr_create(LMR, NULL region handle)");
	if (x.lmr)
		dat_lmr_free(x.lmr);

	/* the original may go first; the sharer keeps working */
	CHECK_RC(dat_lmr_free(base.lmr), DAT_SUCCESS, "dat_lmr_free(base)");
	CHECK_RC(dat_lmr_query(sh.lmr, DAT_LMR_FIELD_ALL, &q), DAT_SUCCESS, "dat_lmr_query(shared, after base freed)");
	CHECK_RC(lmr_create_shared(ia, base.lmr, 4096, pz, &x), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_lmr_create(LMR, freed original)");
	if (x.lmr)
		dat_lmr_free(x.lmr);
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free with two shared LMRs");
	CHECK_RC(dat_lmr_free(sh.lmr), DAT_SUCCESS, "dat_lmr_free(shared)");
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free with one shared LMR");
	CHECK_RC(dat_lmr_free(small.lmr), DAT_SUCCESS, "dat_lmr_free(shorter)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

/*
 * Memory the process may only read (a PROT_READ mapping: a mapped file, a
 * constant table) registered with local-read privilege only, as a send
 * source.  Verbs pins such pages only when no write access is asked for.
 */
static void case_lmr_readonly_memory(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_HANDLE pz;
	DAT_REGION_DESCRIPTION r;
	DAT_LMR_HANDLE l = DAT_HANDLE_NULL;
	void *ro;

	if (!ia)
		return;
	pz = must_pz(ia);
	ro = mmap(NULL, BUF_LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (ro == MAP_FAILED) {
		fail("mmap(PROT_READ): %s", strerror(errno));
		return;
	}
	memset(&r, 0, sizeof(r));
	r.for_va = ro;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF_LEN, pz, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_VA_TYPE_VA,
				&l, NULL, NULL, NULL, NULL), DAT_SUCCESS,
		 "dat_lmr_create(PROT_READ mapping, DAT_MEM_PRIV_LOCAL_READ_FLAG only)");
	if (l)
		CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	munmap(ro, BUF_LEN);
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

static void case_pz_in_use(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE l;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pz = must_pz(ia);
	l = must_lmr(ia, buf, BUF_LEN, pz);
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free with an LMR");
	/* still fully usable */
	DAT_PZ_PARAM p;
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &p), DAT_SUCCESS, "dat_pz_query after refused free");
	DAT_LMR_HANDLE l2 = must_lmr(ia, buf, 4096, pz);
	CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free with one LMR left");
	CHECK_RC(dat_lmr_free(l2), DAT_SUCCESS, "dat_lmr_free(second)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free after the LMRs");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

/* Freed, wrong-type, NULL and misaligned handles. */
static void case_bad_handles(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), pia;
	DAT_PZ_HANDLE pz, pz_keep;
	DAT_LMR_HANDLE l, l_keep;
	DAT_LMR_PARAM lq;
	DAT_PZ_PARAM pq;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pia = provider_ia_of(ia);
	pz_keep = must_pz(ia);
	pz = must_pz(ia);
	l_keep = must_lmr(ia, buf, BUF_LEN, pz_keep);
	l = must_lmr(ia, buf, BUF_LEN, pz);
	CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	/* (no PZ or LMR is created from here on, so the freed slots stay free) */
	CHECK_RC(dat_lmr_query(l, DAT_LMR_FIELD_ALL, &lq), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_query(stale LMR)");
	CHECK_RC(dat_lmr_free(l), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(stale LMR)");
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pq), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_query(stale PZ)");

	/* wrong type */
	CHECK_RC(dat_pz_free(l_keep), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(an LMR handle)");
	CHECK_RC(dat_pz_query(l_keep, DAT_PZ_FIELD_ALL, &pq), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_query(an LMR handle)");
	CHECK_RC(dat_lmr_free(pz_keep), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(a PZ handle)");
	CHECK_RC(dat_lmr_query(pz_keep, DAT_LMR_FIELD_ALL, &lq), BAD_HANDLE(DAT_INVALID_HANDLE_LMR),
		 "dat_lmr_query(a PZ handle)");
	CHECK_RC(dat_pz_free(pia), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(the provider's IA handle)");
	CHECK_RC(dat_lmr_free(pia), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(the provider's IA handle)");
	CHECK_RC(dat_ia_query(pz_keep, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dat_ia_query(a PZ handle)");
	CHECK_RC(dat_pz_create(l_keep, &pz), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_pz_create(an LMR handle as the IA)");
	CHECK_RC(dat_ia_close(pz_keep, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dat_ia_close(a PZ handle)");
	if (!g_ref) {
		/* registry-side: the consumer IA handle range, NULL, misaligned */
		CHECK_RC(dat_pz_free(ia), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(the consumer IA handle)");
		CHECK_RC(dat_pz_free(NULL), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(NULL)");
		CHECK_RC(dat_lmr_free(NULL), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(NULL)");
		CHECK_RC(dat_pz_free((char *)pz_keep + 1), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(misaligned)");
		CHECK_RC(dat_lmr_free((char *)l_keep + 4), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(misaligned)");
		/* aligned pointer into the middle of a slot: its first word is not a table */
		CHECK_RC(dat_pz_free((char *)pz_keep + 16), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(pz + 16)");
		/* a malloc'd block whose first word is not a provider table */
		CHECK_RC(dat_lmr_free(buf), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(a data buffer)");
	}
	/* the kept objects are untouched by all that */
	CHECK_RC(dat_lmr_query(l_keep, DAT_LMR_FIELD_ALL, &lq), DAT_SUCCESS, "dat_lmr_query(kept LMR)");
	CHECK_RC(dat_pz_query(pz_keep, DAT_PZ_FIELD_ALL, &pq), DAT_SUCCESS, "dat_pz_query(kept PZ)");
	CHECK_RC(dat_lmr_free(l_keep), DAT_SUCCESS, "dat_lmr_free(kept)");
	CHECK_RC(dat_pz_free(pz_keep), DAT_SUCCESS, "dat_pz_free(kept)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Cases: closing with children                                       */

static void case_graceful_close_in_use(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE l, l2;
	DAT_LMR_PARAM lq;
	DAT_PZ_PARAM pq;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pz = must_pz(ia);
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), BAD_STATE(DAT_INVALID_STATE_IA_IN_USE),
		 "dat_ia_close(GRACEFUL) with a PZ");
	l = must_lmr(ia, buf, BUF_LEN, pz);
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), BAD_STATE(DAT_INVALID_STATE_IA_IN_USE),
		 "dat_ia_close(GRACEFUL) with a PZ and an LMR");
	/* everything still usable */
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), DAT_SUCCESS, "dat_ia_query after refused close");
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pq), DAT_SUCCESS, "dat_pz_query after refused close");
	CHECK_RC(dat_lmr_query(l, DAT_LMR_FIELD_ALL, &lq), DAT_SUCCESS, "dat_lmr_query after refused close");
	l2 = must_lmr(ia, buf, 4096, pz);
	DAT_PZ_HANDLE pz2 = must_pz(ia);
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(new PZ after refused close)");
	CHECK_RC(dat_lmr_free(l2), DAT_SUCCESS, "dat_lmr_free(new LMR)");
	CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), BAD_STATE(DAT_INVALID_STATE_IA_IN_USE),
		 "dat_ia_close(GRACEFUL) with a PZ only");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close(GRACEFUL) once empty");
	free(buf);
}

/*
 * Abrupt close frees every child; their handles then give INVALID_HANDLE.
 * With keep_other, a second IA stays open so the provider stays registered
 * and the check is the provider's own (tag); without, the registry has
 * unregistered the provider and refuses the handles itself.
 */
static void abrupt_close(int keep_other)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), other = NULL, pia;
	DAT_PZ_HANDLE pz[2];
	struct lmr_out lm[4];
	DAT_LMR_PARAM lq;
	DAT_PZ_PARAM pq;
	DAT_CONTEXT ctx;
	DAT_HANDLE_TYPE t;
	char *buf = must_malloc(BUF_LEN);
	int mr_base, mr_live, i;

	if (!ia)
		return;
	if (keep_other)
		other = must_open(ia_dev);
	pia = provider_ia_of(ia);
	mr_base = rdma_resources("mr");
	pz[0] = must_pz(ia);
	pz[1] = must_pz(ia);
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, pz[0], DAT_VA_TYPE_VA, &lm[0]), DAT_SUCCESS, "dat_lmr_create 0");
	CHECK_RC(lmr_create_va(ia, buf, 4096, pz[1], DAT_VA_TYPE_VA, &lm[1]), DAT_SUCCESS, "dat_lmr_create 1");
	CHECK_RC(lmr_create_va(ia, buf + 8192, 4096, pz[1], DAT_VA_TYPE_VA, &lm[2]), DAT_SUCCESS, "dat_lmr_create 2");
	CHECK_RC(lmr_create_shared(ia, lm[0].lmr, 8192, pz[0], &lm[3]), DAT_SUCCESS, "dat_lmr_create 3 (shared)");
	mr_live = rdma_resources("mr");
	note("MRs of this process: %d before, %d with 4 LMRs", mr_base, mr_live);
	if (mr_base >= 0 && mr_live >= 0)
		CHECK(mr_live - mr_base == 4, "rdma resource show mr: %d MRs of this process with 4 LMRs (%d before)",
		      mr_live, mr_base);

	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ia_close(ABRUPT) with 2 PZs and 4 LMRs");

	for (i = 0; i < 4; i++) {
		CHECK_RC(dat_lmr_query(lm[i].lmr, DAT_LMR_FIELD_ALL, &lq), BAD_HANDLE(DAT_INVALID_HANDLE_LMR),
			 "dat_lmr_query(LMR %d of the closed IA)", i);
		CHECK_RC(dat_lmr_free(lm[i].lmr), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(LMR %d of the closed IA)", i);
		CHECK_RC(dat_get_consumer_context(lm[i].lmr, &ctx), BAD_HANDLE(DAT_INVALID_HANDLE1),
			 "dat_get_consumer_context(LMR %d of the closed IA)", i);
	}
	for (i = 0; i < 2; i++) {
		CHECK_RC(dat_pz_query(pz[i], DAT_PZ_FIELD_ALL, &pq), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
			 "dat_pz_query(PZ %d of the closed IA)", i);
		CHECK_RC(dat_pz_free(pz[i]), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(PZ %d of the closed IA)", i);
		CHECK_RC(dat_get_handle_type(pz[i], &t), BAD_HANDLE(DAT_INVALID_HANDLE1),
			 "dat_get_handle_type(PZ %d of the closed IA)", i);
	}
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_query(closed IA)");
	CHECK_RC(dat_pz_create(ia, &pz[0]), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_pz_create(closed IA)");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_close(closed IA)");
	CHECK_RC(dat_ia_query(pia, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dat_ia_query(closed IA's provider handle)");
	CHECK_RC(dat_pz_create(pia, &pz[0]), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dat_pz_create(closed IA's provider handle)");
	{
		struct lmr_out o;
		CHECK_RC(lmr_create_va(pia, buf, 4096, pz[1], DAT_VA_TYPE_VA, &o), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
			 "dat_lmr_create(closed IA's provider handle)");
	}
	if (mr_base >= 0) {
		int after = rdma_resources("mr");
		CHECK(after == mr_base, "rdma resource show mr: %d MRs of this process after the abrupt close, %d before",
		      after, mr_base);
	}
	if (other) {
		/* the other IA is unaffected */
		DAT_PZ_HANDLE p = must_pz(other);
		DAT_LMR_HANDLE l = must_lmr(other, buf, BUF_LEN, p);
		CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free(other IA)");
		CHECK_RC(dat_pz_free(p), DAT_SUCCESS, "dat_pz_free(other IA)");
		close_ia(other, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close(other IA)");
	} else {
		/* the provider comes back for the next open */
		DAT_IA_HANDLE again = must_open(ia_netdev);
		if (again) {
			DAT_PZ_HANDLE p = must_pz(again);
			DAT_LMR_HANDLE l = must_lmr(again, buf, BUF_LEN, p);
			CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free(after reopen)");
			CHECK_RC(dat_pz_free(p), DAT_SUCCESS, "dat_pz_free(after reopen)");
			close_ia(again, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close(reopened)");
		}
	}
	free(buf);
}

static void case_abrupt_close_other_open(void) { abrupt_close(1); }
static void case_abrupt_close_last(void) { abrupt_close(0); }

/* ------------------------------------------------------------------ */
/* Cases: generic calls, sync, cycles                                 */

static void case_consumer_context(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), pia;
	DAT_PZ_HANDLE pz, pz2;
	DAT_LMR_HANDLE l;
	DAT_CONTEXT c, got;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pia = provider_ia_of(ia);
	pz = must_pz(ia);
	pz2 = must_pz(ia);
	l = must_lmr(ia, buf, BUF_LEN, pz);

	got.as_64 = 0x1234;
	CHECK_RC(dat_get_consumer_context(pz, &got), DAT_SUCCESS, "dat_get_consumer_context(fresh PZ)");
	CHECK_EQ(got.as_64, 0, "context of a fresh PZ");

	c.as_64 = 0xfeedface12345678ull;
	CHECK_RC(dat_set_consumer_context(pz, c), DAT_SUCCESS, "dat_set_consumer_context(PZ)");
	c.as_ptr = buf;
	CHECK_RC(dat_set_consumer_context(l, c), DAT_SUCCESS, "dat_set_consumer_context(LMR)");
	c.as_64 = 7;
	CHECK_RC(dat_set_consumer_context(pz2, c), DAT_SUCCESS, "dat_set_consumer_context(PZ 2)");
	c.as_64 = 0x1a1a1a1a1a1a1a1aull;
	CHECK_RC(dat_set_consumer_context(ia, c), DAT_SUCCESS, "dat_set_consumer_context(consumer IA handle)");

	memset(&got, 0, sizeof(got));
	CHECK_RC(dat_get_consumer_context(pz, &got), DAT_SUCCESS, "dat_get_consumer_context(PZ)");
	CHECK_EQ(got.as_64, 0xfeedface12345678ull, "PZ context round trip");
	memset(&got, 0, sizeof(got));
	CHECK_RC(dat_get_consumer_context(l, &got), DAT_SUCCESS, "dat_get_consumer_context(LMR)");
	CHECK_EQ((uintptr_t)got.as_ptr, (uintptr_t)buf, "LMR context round trip");
	memset(&got, 0, sizeof(got));
	CHECK_RC(dat_get_consumer_context(pz2, &got), DAT_SUCCESS, "dat_get_consumer_context(PZ 2)");
	CHECK_EQ(got.as_64, 7, "PZ 2 context round trip");
	memset(&got, 0, sizeof(got));
	CHECK_RC(dat_get_consumer_context(ia, &got), DAT_SUCCESS, "dat_get_consumer_context(consumer IA)");
	CHECK_EQ(got.as_64, 0x1a1a1a1a1a1a1a1aull, "IA context round trip");
	memset(&got, 0, sizeof(got));
	CHECK_RC(dat_get_consumer_context(pia, &got), DAT_SUCCESS, "dat_get_consumer_context(provider IA handle)");
	CHECK_EQ(got.as_64, 0x1a1a1a1a1a1a1a1aull, "IA context via the provider's handle");

	CHECK_RC(dat_get_consumer_context(pz, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_get_consumer_context(NULL out)");

	/* a freed object's context is gone; a recycled slot starts from 0 */
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(PZ 2)");
	CHECK_RC(dat_get_consumer_context(pz2, &got), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_get_consumer_context(freed PZ)");
	CHECK_RC(dat_set_consumer_context(pz2, c), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_set_consumer_context(freed PZ)");
	pz2 = must_pz(ia);
	got.as_64 = 0x1234;
	CHECK_RC(dat_get_consumer_context(pz2, &got), DAT_SUCCESS, "dat_get_consumer_context(new PZ)");
	CHECK_EQ(got.as_64, 0, "context of a new PZ (maybe in a recycled slot)");

	if (!g_ref) {
		CHECK_RC(dat_set_consumer_context(NULL, c), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_set_consumer_context(NULL)");
		CHECK_RC(dat_get_consumer_context(buf, &got), BAD_HANDLE(DAT_INVALID_HANDLE1),
			 "dat_get_consumer_context(a data buffer)");
	}
	CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(new PZ)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

static void case_handle_type(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev), pia;
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE l;
	DAT_HANDLE_TYPE t;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pia = provider_ia_of(ia);
	pz = must_pz(ia);
	l = must_lmr(ia, buf, BUF_LEN, pz);
	t = (DAT_HANDLE_TYPE)99;
	CHECK_RC(dat_get_handle_type(pz, &t), DAT_SUCCESS, "dat_get_handle_type(PZ)");
	CHECK_EQ(t, DAT_HANDLE_TYPE_PZ, "handle type of a PZ");
	t = (DAT_HANDLE_TYPE)99;
	CHECK_RC(dat_get_handle_type(l, &t), DAT_SUCCESS, "dat_get_handle_type(LMR)");
	CHECK_EQ(t, DAT_HANDLE_TYPE_LMR, "handle type of an LMR");
	t = (DAT_HANDLE_TYPE)99;
	CHECK_RC(dat_get_handle_type(ia, &t), DAT_SUCCESS, "dat_get_handle_type(consumer IA handle)");
	CHECK_EQ(t, DAT_HANDLE_TYPE_IA, "handle type of the consumer IA handle");
	t = (DAT_HANDLE_TYPE)99;
	CHECK_RC(dat_get_handle_type(pia, &t), DAT_SUCCESS, "dat_get_handle_type(provider IA handle)");
	CHECK_EQ(t, DAT_HANDLE_TYPE_IA, "handle type of the provider IA handle");
	CHECK_RC(dat_get_handle_type(pz, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_get_handle_type(NULL out)");
	CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_get_handle_type(l, &t), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_get_handle_type(freed LMR)");
	if (!g_ref)
		CHECK_RC(dat_get_handle_type(NULL, &t), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_get_handle_type(NULL)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

static void case_lmr_sync(void)
{
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_HANDLE pz;
	struct lmr_out o;
	DAT_LMR_TRIPLET iov[2];
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	pz = must_pz(ia);
	CHECK_RC(lmr_create_va(ia, buf, BUF_LEN, pz, DAT_VA_TYPE_VA, &o), DAT_SUCCESS, "dat_lmr_create");
	iov[0].virtual_address = (uintptr_t)buf;
	iov[0].segment_length = 4096;
	iov[0].lmr_context = o.lkey;
	iov[1].virtual_address = (uintptr_t)buf + 8192;
	iov[1].segment_length = BUF_LEN - 8192;
	iov[1].lmr_context = o.lkey;
	CHECK_RC(dat_lmr_sync_rdma_read(ia, iov, 2), DAT_SUCCESS, "dat_lmr_sync_rdma_read(2 triplets)");
	CHECK_RC(dat_lmr_sync_rdma_write(ia, iov, 2), DAT_SUCCESS, "dat_lmr_sync_rdma_write(2 triplets)");
	CHECK_RC(dat_lmr_sync_rdma_read(ia, iov, 1), DAT_SUCCESS, "dat_lmr_sync_rdma_read(1 triplet)");
	CHECK_RC(dat_lmr_sync_rdma_read(ia, NULL, 1), BAD_ARG(DAT_INVALID_ARG2), "dat_lmr_sync_rdma_read(NULL, 1)");
	CHECK_RC(dat_lmr_sync_rdma_write(ia, NULL, 3), BAD_ARG(DAT_INVALID_ARG2), "dat_lmr_sync_rdma_write(NULL, 3)");
	CHECK_RC(dat_lmr_sync_rdma_read(ia, NULL, 0), DAT_SUCCESS, "dat_lmr_sync_rdma_read(NULL, 0)");
	CHECK_RC(dat_lmr_sync_rdma_write(ia, NULL, 0), DAT_SUCCESS, "dat_lmr_sync_rdma_write(NULL, 0)");
	CHECK_RC(dat_lmr_sync_rdma_read(pz, iov, 1), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dat_lmr_sync_rdma_read(a PZ handle as the IA)");
	CHECK_RC(dat_lmr_free(o.lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	free(buf);
}

/* Many create/free cycles: slots are reused, nothing accumulates. */
static void case_cycles(void)
{
	enum { LMR_CYCLES = 200, PZ_CYCLES = 50, BATCH = 8, BATCH_ROUNDS = 25 };
	DAT_IA_HANDLE ia = must_open(ia_netdev);
	DAT_PZ_HANDLE pz;
	DAT_LMR_HANDLE seen[BATCH * 2];
	int nseen = 0, i, j, mr0, pd0, bad = 0;
	char *buf = must_malloc(BUF_LEN);

	if (!ia)
		return;
	mr0 = rdma_resources("mr");
	pd0 = rdma_resources("pd");
	pz = must_pz(ia);
	for (i = 0; i < LMR_CYCLES && !bad; i++) {
		struct lmr_out o;
		DAT_RETURN r = lmr_create_va(ia, buf + (i % 16) * 64, BUF_LEN - 1024, pz, DAT_VA_TYPE_VA, &o);
		if (r != DAT_SUCCESS) {
			fail("dat_lmr_create, cycle %d: %s", i, describe(r));
			bad = 1;
			break;
		}
		for (j = 0; j < nseen && seen[j] != o.lmr; j++)
			;
		if (j == nseen && nseen < (int)(sizeof(seen) / sizeof(seen[0])))
			seen[nseen++] = o.lmr;
		r = dat_lmr_free(o.lmr);
		if (r != DAT_SUCCESS) {
			fail("dat_lmr_free, cycle %d: %s", i, describe(r));
			bad = 1;
		}
	}
	CHECK(nseen <= 2, "%d LMR create/free cycles used %d distinct handles (slots not reused)", LMR_CYCLES, nseen);

	/* batches of live LMRs */
	nseen = 0;
	for (i = 0; i < BATCH_ROUNDS && !bad; i++) {
		DAT_LMR_HANDLE l[BATCH];
		for (j = 0; j < BATCH; j++) {
			l[j] = must_lmr(ia, buf + j * 4096, 4096, pz);
			int k;
			for (k = 0; k < nseen && seen[k] != l[j]; k++)
				;
			if (k == nseen && nseen < (int)(sizeof(seen) / sizeof(seen[0])))
				seen[nseen++] = l[j];
		}
		for (j = 0; j < BATCH; j++)
			if (dat_lmr_free(l[j]) != DAT_SUCCESS) {
				fail("dat_lmr_free, batch %d item %d", i, j);
				bad = 1;
			}
	}
	CHECK(nseen <= BATCH + 2, "%d rounds of %d live LMRs used %d+ distinct handles", BATCH_ROUNDS, BATCH, nseen);
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free after the LMR cycles (use count back to 0)");

	DAT_PZ_HANDLE pzs[2] = { NULL, NULL };
	int npz = 0;
	for (i = 0; i < PZ_CYCLES && !bad; i++) {
		DAT_PZ_HANDLE p = DAT_HANDLE_NULL;
		DAT_RETURN r = dat_pz_create(ia, &p);
		if (r != DAT_SUCCESS) {
			fail("dat_pz_create, cycle %d: %s", i, describe(r));
			bad = 1;
			break;
		}
		if (p != pzs[0] && p != pzs[1]) {
			if (npz < 2)
				pzs[npz] = p;
			npz++;
		}
		DAT_LMR_HANDLE l = must_lmr(ia, buf, 4096, p);
		CHECK_RC(dat_lmr_free(l), DAT_SUCCESS, "dat_lmr_free (PZ cycle %d)", i);
		r = dat_pz_free(p);
		if (r != DAT_SUCCESS) {
			fail("dat_pz_free, cycle %d: %s", i, describe(r));
			bad = 1;
		}
	}
	CHECK(npz <= 2, "%d PZ create/free cycles used %d distinct handles (slots not reused)", PZ_CYCLES, npz);
	if (mr0 >= 0 && pd0 >= 0) {
		int mr1 = rdma_resources("mr"), pd1 = rdma_resources("pd");
		note("verbs objects of this process before/after the cycles: MRs %d/%d, PDs %d/%d", mr0, mr1, pd0, pd1);
		CHECK(mr1 == mr0, "rdma resource show mr: %d MRs of this process after the cycles, %d before", mr1, mr0);
		CHECK(pd1 == pd0, "rdma resource show pd: %d PDs of this process after the cycles, %d before", pd1, pd0);
	} else {
		note("rdma resource show gives nothing; verbs-level leak check skipped");
	}
	/* nothing left behind in the IA either */
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close(GRACEFUL) after the cycles");
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Driver                                                             */

#define CASE(n, basic) { #n, NULL, case_##n, basic }
static const struct tcase cases[] = {
	CASE(open_styles, 1),
	CASE(open_bad_netdev, 1),
	CASE(open_bad_port, 0),
	CASE(open_netdev_without_rdma, 0),
	CASE(close_status, 1),
	CASE(close_bad_flags, 0),
	CASE(reopen, 0),
	CASE(ia_query, 1),
	CASE(ia_provider_handle, 0),
	CASE(pz_basic, 1),
	CASE(pz_query_ia_usable, 0),
	CASE(lmr_basic, 1),
	CASE(lmr_errors, 1),
	CASE(lmr_shared, 1),
	CASE(lmr_readonly_memory, 1),
	CASE(pz_in_use, 1),
	CASE(bad_handles, 0),
	CASE(graceful_close_in_use, 1),
	CASE(abrupt_close_other_open, 0),
	CASE(abrupt_close_last, 0),
	CASE(consumer_context, 0),
	CASE(handle_type, 0),
	CASE(lmr_sync, 1),
	CASE(cycles, 0),
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void header(void)
{
	printf("# provider_test%s: IAs %s (netdev), %s (device port), %s (address); bad: %s, %s; DAT_OVERRIDE=%s\n",
	       g_ref ? " (reference registry)" : "", ia_netdev, ia_dev, ia_addr, ia_badnet, ia_badport,
	       env_or("DAT_OVERRIDE", "(unset)"));
}

int main(int argc, char **argv)
{
	int opt, list = 0;

	ia_netdev = env_or("PT_IA", "ibv-netdev");
	ia_dev = env_or("PT_IA_DEV", "ibv-devport");
	ia_addr = env_or("PT_IA_ADDR", "ibv-addr");
	ia_badnet = env_or("PT_IA_BADNET", "ibv-badnet");
	ia_badport = env_or("PT_IA_BADPORT", "ibv-badport");
	ia_lo = env_or("PT_IA_LO", "ibv-lo");
	want_adapter = env_or("PT_ADAPTER", "rxe0");
	want_address = env_or("PT_ADDRESS", "10.0.0.1");
	want_netdev = env_or("PT_NETDEV", "dum0");
	bad_netdev = env_or("PT_BADNET", "eth9");
	bad_port = env_or("PT_BADPORT", "2");
	g_ref = getenv("PT_REFERENCE") && strcmp(getenv("PT_REFERENCE"), "1") == 0;

	while ((opt = getopt(argc, argv, "i:d:a:b:p:Rl")) != -1) {
		switch (opt) {
		case 'i': ia_netdev = optarg; break;
		case 'd': ia_dev = optarg; break;
		case 'a': ia_addr = optarg; break;
		case 'b': ia_badnet = optarg; break;
		case 'p': ia_badport = optarg; break;
		case 'R': g_ref = 1; break;
		case 'l': list = 1; break;
		default:
			fprintf(stderr, "usage: %s [-i IA] [-d IA] [-a IA] [-b IA] [-p IA] [-R] [-l] [case...]\n", argv[0]);
			return 2;
		}
	}
	if (list) {
		for (size_t i = 0; i < NCASES; i++)
			printf("%s%s\n", cases[i].name, cases[i].ref ? " (basic: also under the reference registry)" : "");
		return 0;
	}
	/* Untimed ok lines: provider.sh takes the rest of the line as the case's name. */
	struct casefork cf = {
		.prog = "provider_test", .env = "PT", .label = "ctest-provider", .ref = g_ref,
		.timeout_s = 120, .timeout_says_secs = 1, .header = header,
	};
	return casefork_main(&cf, cases, (int)NCASES, argc, argv, optind);
}
