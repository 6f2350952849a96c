/*
 * errors.c - every dat_* call's error returns, per object group: NULL,
 * freed, wrong-type and other-IA handles; NULL out-parameters; bad counts,
 * lengths, flags; calls in the wrong state; with the exact minor codes.
 * After each misuse the objects involved must still work.
 */
#include "harness.h"

#include <dat2/dat_ib_extensions.h>

#include <sys/un.h>
#include <unistd.h>

#define BUF 65536

/* ------------------------------------------------------------------ */
/* Registry-level calls                                               */

static void case_registry_calls(void)
{
	DAT_PROVIDER_INFO infos[4], *list[4];
	DAT_COUNT n = -1;
	const char *ma = NULL, *mi = NULL;

	for (int i = 0; i < 4; i++)
		list[i] = &infos[i];
	CHECK_RC(dat_registry_list_providers(4, &n, list), DAT_SUCCESS, "dat_registry_list_providers(4)");
	CHECK(n >= 2, "dat_registry_list_providers: %d entries, dat.conf has at least 2", n);
	CHECK_RC(dat_registry_list_providers(-1, &n, list), BAD_ARG(DAT_INVALID_ARG1),
		 "dat_registry_list_providers(max -1)");
	CHECK_RC(dat_registry_list_providers(4, NULL, list), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_registry_list_providers(NULL count)");
	CHECK_RC(dat_registry_list_providers(4, &n, NULL), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_registry_list_providers(NULL list)");
	list[1] = NULL;
	CHECK_RC(dat_registry_list_providers(4, &n, list), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_registry_list_providers(list with a NULL slot)");

	CHECK_RC(dat_strerror(BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED), &ma, &mi), DAT_SUCCESS, "dat_strerror(known)");
	CHECK(ma && strcmp(ma, "DAT_INVALID_STATE") == 0, "dat_strerror major: %s", ma ? ma : "(null)");
	CHECK(mi && strcmp(mi, "DAT_INVALID_STATE_EP_CONNECTED") == 0, "dat_strerror minor: %s", mi ? mi : "(null)");
	CHECK_RC(dat_strerror(DAT_ERROR(0x00ff0000, 0), &ma, &mi), BAD_ARG(DAT_INVALID_ARG1),
		 "dat_strerror(unknown major 0x00ff0000)");
	CHECK_RC(dat_strerror(BAD_ARG(DAT_INVALID_ARG3), NULL, NULL), DAT_SUCCESS, "dat_strerror(NULL outs)");

	/* a provider table of our own: registered, found by dispatch, removed */
	static DAT_PROVIDER table;
	DAT_PROVIDER_INFO info;
	memset(&table, 0, sizeof(table));
	table.device_name = "conformance-fake";
	memset(&info, 0, sizeof(info));
	snprintf(info.ia_name, sizeof(info.ia_name), "conformance-fake");
	info.dapl_version_major = 2;
	CHECK_RC(dat_registry_add_provider(NULL, &info), BAD_ARG(DAT_INVALID_ARG1), "dat_registry_add_provider(NULL table)");
	CHECK_RC(dat_registry_add_provider(&table, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_registry_add_provider(NULL info)");
	CHECK_RC(dat_registry_add_provider(&table, &info), DAT_SUCCESS, "dat_registry_add_provider");
	CHECK_RC(dat_registry_add_provider(&table, &info), DAT_ERROR(DAT_PROVIDER_ALREADY_REGISTERED, 0),
		 "dat_registry_add_provider(same IA name again)");
	/* an object of that provider with empty slots: the registry answers */
	struct { DAT_PROVIDER *p; long pad[3]; } fake_obj = { &table, { 0, 0, 0 } };
	DAT_PZ_PARAM pq;
	CHECK_RC(dat_pz_query((DAT_PZ_HANDLE)&fake_obj, DAT_PZ_FIELD_ALL, &pq), NOT_IMPL,
		 "dat_pz_query(object of a provider with no pz_query)");
	CHECK_RC(dat_registry_remove_provider(NULL, &info), BAD_ARG(DAT_INVALID_ARG1), "dat_registry_remove_provider(NULL)");
	CHECK_RC(dat_registry_remove_provider(&table, NULL), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_registry_remove_provider(NULL info)");
	CHECK_RC(dat_registry_remove_provider(&table, &info), DAT_SUCCESS, "dat_registry_remove_provider");
	CHECK_RC(dat_registry_remove_provider(&table, &info), NOT_FOUND(DAT_NAME_NOT_REGISTERED),
		 "dat_registry_remove_provider(again)");
	CHECK_RC(dat_pz_query((DAT_PZ_HANDLE)&fake_obj, DAT_PZ_FIELD_ALL, &pq), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
		 "dat_pz_query(object of a removed provider)");
}

static void case_ia_open_close(void)
{
	DAT_IA_HANDLE ia = DAT_HANDLE_NULL, pia = NULL;
	DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
	DAT_IA_ATTR a;
	DAT_PROVIDER_ATTR pa;

	CHECK_RC(dat_ia_open(NULL, 8, &evd, &ia), BAD_ARG(DAT_INVALID_ARG1), "dat_ia_open(NULL name)");
	CHECK_RC(dat_ia_open((DAT_NAME_PTR)g_ia, 8, NULL, &ia), BAD_ARG(DAT_INVALID_ARG3), "dat_ia_open(NULL async_evd)");
	CHECK_RC(dat_ia_open((DAT_NAME_PTR)g_ia, 8, &evd, NULL), BAD_ARG(DAT_INVALID_ARG4), "dat_ia_open(NULL ia)");
	CHECK_RC(dat_ia_open((DAT_NAME_PTR)"no-such-ia", 8, &evd, &ia), NOT_FOUND(DAT_NAME_NOT_REGISTERED),
		 "dat_ia_open(unknown name)");
	CHECK_RC(dat_ia_openv((DAT_NAME_PTR)g_ia, 8, &evd, &ia, 3, 0, DAT_FALSE), NOT_FOUND(DAT_MAJOR_NOT_FOUND),
		 "dat_ia_openv(DAT 3.0)");
	CHECK_RC(dat_ia_openv((DAT_NAME_PTR)g_ia, 8, &evd, &ia, 2, 9, DAT_FALSE), NOT_FOUND(DAT_MINOR_NOT_FOUND),
		 "dat_ia_openv(DAT 2.9)");
	CHECK_RC(dat_ia_openv((DAT_NAME_PTR)g_ia, 8, &evd, &ia, 2, 0, DAT_TRUE), NOT_FOUND(DAT_THREAD_SAFETY_NOT_FOUND),
		 "dat_ia_openv(thread-safe, entry is not)");
	ia = open_ia(g_ia);
	if (!ia)
		return;
	CHECK_RC(dats_get_ia_handle(ia, &pia), DAT_SUCCESS, "dats_get_ia_handle");
	CHECK_RC(dats_get_ia_handle(ia, NULL), BAD_ARG(DAT_INVALID_ARG2), "dats_get_ia_handle(NULL out)");
	CHECK_RC(dats_get_ia_handle((DAT_IA_HANDLE)(uintptr_t)0xfff0, &pia), BAD_HANDLE(DAT_INVALID_HANDLE_IA),
		 "dats_get_ia_handle(never opened)");
	memset(&a, 0, sizeof(a));
	CHECK_RC(dat_ia_query(ia, &evd, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &pa), DAT_SUCCESS, "dat_ia_query");
	CHECK_RC(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, NULL, 0, NULL), BAD_ARG(DAT_INVALID_ARG4),
		 "dat_ia_query(NULL ia_attr)");
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, DAT_PROVIDER_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG6),
		 "dat_ia_query(NULL provider_attr)");
	CHECK_RC(dat_ia_query(NULL, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_query(NULL)");
	DAT_PZ_HANDLE pz = make_pz(ia);
	CHECK_RC(dat_ia_close(ia, (DAT_CLOSE_FLAGS)7), BAD_ARG(DAT_INVALID_ARG2), "dat_ia_close(flags 7)");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), BAD_STATE(DAT_INVALID_STATE_IA_IN_USE),
		 "dat_ia_close(GRACEFUL) with a PZ");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ia_close(GRACEFUL) once empty");
	CHECK_RC(dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_close(closed IA)");
	CHECK_RC(dat_ia_close(NULL, DAT_CLOSE_ABRUPT_FLAG), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_close(NULL)");
	CHECK_RC(dat_ia_query(ia, NULL, 0, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_ia_query(closed IA)");
}

/* ------------------------------------------------------------------ */
/* PZ, LMR                                                            */

static void case_pz_lmr_errors(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_PZ_HANDLE pz, pz2;
	DAT_PZ_PARAM pq;
	DAT_LMR_PARAM lq;
	DAT_REGION_DESCRIPTION r;
	DAT_LMR_HANDLE l = NULL;
	struct mem m;
	DAT_LMR_TRIPLET t;

	if (!ia)
		return;
	pz = make_pz(ia);
	pz2 = make_pz(ia);
	CHECK_RC(dat_pz_create(ia, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_pz_create(NULL out)");
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_pz_query(NULL param)");
	CHECK_RC(dat_pz_query(pz, DAT_PZ_FIELD_ALL, &pq), DAT_SUCCESS, "dat_pz_query");
	if (!mem_reg(ia, pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free(PZ with an LMR)");
	memset(&r, 0, sizeof(r));
	r.for_va = m.buf;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, 0, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &l, NULL, NULL,
				NULL, NULL), BAD_ARG(DAT_INVALID_ARG4), "dat_lmr_create(length 0)");
	CHECK_TYPE(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, (DAT_VLEN)1 << 40, pz, DAT_MEM_PRIV_ALL_FLAG,
				  DAT_VA_TYPE_VA, &l, NULL, NULL, NULL, NULL), DAT_INVALID_PARAMETER,
		   "dat_lmr_create(1 TiB over a 64 KiB buffer)");
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_ZB, &l, NULL, NULL,
				NULL, NULL), BAD_ARG(DAT_INVALID_ARG7), "dat_lmr_create(zero-based VA)");
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, r, BUF, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, NULL, NULL,
				NULL, NULL, NULL), BAD_ARG(DAT_INVALID_ARG8), "dat_lmr_create(NULL lmr out)");
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_SHARED_VIRTUAL, r, BUF, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &l,
				NULL, NULL, NULL, NULL), DAT_ERROR(DAT_MODEL_NOT_SUPPORTED, 0),
		 "dat_lmr_create(SHARED_VIRTUAL)");
	r.for_lmr_handle = m.lmr;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_LMR, r, BUF * 2, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &l, NULL,
				NULL, NULL, NULL), DAT_ERROR(DAT_LENGTH_ERROR, 0), "dat_lmr_create(LMR, longer than it)");
	r.for_lmr_handle = pz;
	CHECK_RC(dat_lmr_create(ia, DAT_MEM_TYPE_LMR, r, 4096, pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &l, NULL, NULL,
				NULL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_lmr_create(LMR, region is a PZ)");
	CHECK_RC(dat_lmr_query(m.lmr, DAT_LMR_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_lmr_query(NULL param)");
	CHECK_RC(dat_lmr_query(m.lmr, DAT_LMR_FIELD_ALL, &lq), DAT_SUCCESS, "dat_lmr_query");
	t = triplet(&m, 0, 4096);
	CHECK_RC(dat_lmr_sync_rdma_read(ia, &t, 1), DAT_SUCCESS, "dat_lmr_sync_rdma_read");
	CHECK_RC(dat_lmr_sync_rdma_write(ia, &t, 1), DAT_SUCCESS, "dat_lmr_sync_rdma_write");
	CHECK_RC(dat_lmr_sync_rdma_read(ia, NULL, 2), BAD_ARG(DAT_INVALID_ARG2), "dat_lmr_sync_rdma_read(NULL, 2)");
	CHECK_RC(dat_lmr_sync_rdma_write(ia, NULL, 2), BAD_ARG(DAT_INVALID_ARG2), "dat_lmr_sync_rdma_write(NULL, 2)");
	CHECK_RC(dat_lmr_sync_rdma_read(pz, &t, 1), BAD_HANDLE(DAT_INVALID_HANDLE_IA), "dat_lmr_sync_rdma_read(PZ as IA)");
	CHECK_RC(dat_lmr_free(m.lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_lmr_free(m.lmr), BAD_HANDLE(DAT_INVALID_HANDLE_LMR), "dat_lmr_free(freed)");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free once empty");
	CHECK_RC(dat_pz_free(pz), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_pz_free(freed)");
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(second)");
	free(m.buf);
out:
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* ------------------------------------------------------------------ */
/* EVD, CNO                                                           */

static void case_evd_errors(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_EVD_HANDLE evd = NULL, sw, dto, async = NULL;
	DAT_EVD_PARAM ep;
	DAT_EVENT ev, got;
	DAT_COUNT nmore;
	DAT_IA_ATTR attr;
	int queued = 0;

	if (!ia)
		return;
	memset(&attr, 0, sizeof(attr));
	CHECK_RC(dat_ia_query(ia, &async, DAT_IA_FIELD_ALL, &attr, 0, NULL), DAT_SUCCESS, "dat_ia_query");
	CHECK_RC(dat_evd_create(ia, 0, NULL, DAT_EVD_SOFTWARE_FLAG, &evd), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_create(qlen 0)");
	CHECK_RC(dat_evd_create(ia, -5, NULL, DAT_EVD_SOFTWARE_FLAG, &evd), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_evd_create(qlen -5)");
	CHECK_RC(dat_evd_create(ia, attr.max_evd_qlen + 1, NULL, DAT_EVD_DTO_FLAG, &evd), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_evd_create(qlen max_evd_qlen+1 = %d)", attr.max_evd_qlen + 1);
	CHECK_RC(dat_evd_create(ia, 8, NULL, 0, &evd), BAD_ARG(DAT_INVALID_ARG4), "dat_evd_create(flags 0)");
	CHECK_RC(dat_evd_create(ia, 8, NULL, (DAT_EVD_FLAGS)0x40000, &evd), BAD_ARG(DAT_INVALID_ARG4),
		 "dat_evd_create(unknown flag 0x40000)");
	CHECK_RC(dat_evd_create(ia, 8, NULL, DAT_EVD_SOFTWARE_FLAG, NULL), BAD_ARG(DAT_INVALID_ARG5),
		 "dat_evd_create(NULL out)");
	CHECK_RC(dat_evd_create(ia, 8, (DAT_CNO_HANDLE)async, DAT_EVD_SOFTWARE_FLAG, &evd), BAD_HANDLE(DAT_INVALID_HANDLE_CNO),
		 "dat_evd_create(an EVD as the CNO)");
	sw = make_evd(ia, 4, DAT_EVD_SOFTWARE_FLAG);
	dto = make_evd(ia, 8, DAT_EVD_DTO_FLAG);
	if (!sw || !dto)
		goto out;
	CHECK_RC(dat_evd_query(sw, DAT_EVD_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_evd_query(NULL param)");
	memset(&ep, 0, sizeof(ep));
	CHECK_RC(dat_evd_query(sw, DAT_EVD_FIELD_ALL, &ep), DAT_SUCCESS, "dat_evd_query");
	CHECK_EQ(ep.evd_qlen, 4, "evd_query qlen");
	CHECK_EQ(ep.evd_flags, DAT_EVD_SOFTWARE_FLAG, "evd_query flags");

	/* dequeue / wait argument checks on an empty EVD */
	CHECK_RC(dat_evd_dequeue(sw, &got), DAT_QUEUE_EMPTY, "dat_evd_dequeue(empty): the plain DAT_QUEUE_EMPTY");
	CHECK_RC(dat_evd_dequeue(sw, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_dequeue(NULL event)");
	CHECK_RC(dat_evd_wait(sw, 0, 0, &got, &nmore), BAD_ARG(DAT_INVALID_ARG3), "dat_evd_wait(threshold 0)");
	CHECK_RC(dat_evd_wait(sw, 0, 5, &got, &nmore), BAD_ARG(DAT_INVALID_ARG3), "dat_evd_wait(threshold > qlen)");
	CHECK_RC(dat_evd_wait(sw, 0, 1, NULL, &nmore), BAD_ARG(DAT_INVALID_ARG4), "dat_evd_wait(NULL event)");
	CHECK_RC(dat_evd_wait(sw, 200000, 1, &got, &nmore), DAT_ERROR(DAT_TIMEOUT_EXPIRED, 0), "dat_evd_wait(empty, 0.2 s)");

	/* software events: posted, overflowing, dequeued in order */
	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_SOFTWARE_EVENT;
	CHECK_RC(dat_evd_post_se(sw, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_post_se(NULL event)");
	ev.event_number = DAT_DTO_COMPLETION_EVENT;
	CHECK_RC(dat_evd_post_se(sw, &ev), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_post_se(a DTO event)");
	ev.event_number = DAT_SOFTWARE_EVENT;
	CHECK_RC(dat_evd_post_se(dto, &ev), BAD_ARG(DAT_INVALID_ARG1), "dat_evd_post_se(EVD without SOFTWARE_FLAG)");
	for (int i = 0; i < 4; i++) {
		ev.event_data.software_event_data.pointer = (DAT_PVOID)(uintptr_t)(0x1000 + i);
		DAT_RETURN r = CALL(dat_evd_post_se(sw, &ev));
		CHECK(r == DAT_SUCCESS, "dat_evd_post_se %d of qlen 4: %s", i, describe(r));
		queued += r == DAT_SUCCESS;
	}
	ev.event_data.software_event_data.pointer = (DAT_PVOID)(uintptr_t)0x2000;
	CHECK_RC(dat_evd_post_se(sw, &ev), DAT_ERROR(DAT_QUEUE_FULL, 0), "dat_evd_post_se(5th into qlen 4): overflow");
	CHECK_RC(dat_evd_resize(sw, 2), BAD_STATE(0), "dat_evd_resize(2) with 4 queued");
	CHECK_RC(dat_evd_resize(sw, 0), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_resize(0)");
	CHECK_RC(dat_evd_resize(sw, -1), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_resize(-1)");
	CHECK_RC(dat_evd_resize(sw, attr.max_evd_qlen + 1), BAD_ARG(DAT_INVALID_ARG2), "dat_evd_resize(max+1)");
	CHECK_RC(dat_evd_resize(sw, 16), DAT_SUCCESS, "dat_evd_resize(16)");
	CHECK_RC(dat_evd_resize(dto, 32), DAT_SUCCESS, "dat_evd_resize(DTO EVD, 32)");
	for (int i = 0; i < queued; i++) {
		memset(&got, 0, sizeof(got));
		CHECK_RC(dat_evd_dequeue(sw, &got), DAT_SUCCESS, "dat_evd_dequeue %d", i);
		CHECK_EQ(got.event_number, DAT_SOFTWARE_EVENT, "dequeued event number");
		CHECK_EQ((uintptr_t)got.event_data.software_event_data.pointer, 0x1000 + i, "software event pointer (order)");
		CHECK(got.evd_handle == sw, "dequeued evd_handle %p, expected %p", (void *)got.evd_handle, (void *)sw);
	}
	CHECK_RC(dat_evd_dequeue(sw, &got), DAT_QUEUE_EMPTY, "dat_evd_dequeue after draining (the overflowed event is gone)");

	/* unwaitable / enable / disable */
	CHECK_RC(dat_evd_set_unwaitable(sw), DAT_SUCCESS, "dat_evd_set_unwaitable");
	CHECK_RC(dat_evd_wait(sw, 100000, 1, &got, &nmore), BAD_STATE(DAT_INVALID_STATE_EVD_UNWAITABLE),
		 "dat_evd_wait(unwaitable EVD)");
	CHECK_RC(dat_evd_clear_unwaitable(sw), DAT_SUCCESS, "dat_evd_clear_unwaitable");
	CHECK_RC(dat_evd_post_se(sw, &ev), DAT_SUCCESS, "dat_evd_post_se after clear_unwaitable");
	CHECK_RC(dat_evd_wait(sw, WAIT_US, 1, &got, &nmore), DAT_SUCCESS, "dat_evd_wait after clear_unwaitable");
	CHECK_EQ((uintptr_t)got.event_data.software_event_data.pointer, 0x2000, "waited event pointer");
	CHECK_EQ(nmore, 0, "nmore");
	CHECK_RC(dat_evd_disable(sw), DAT_SUCCESS, "dat_evd_disable");
	memset(&ep, 0, sizeof(ep));
	CHECK_RC(dat_evd_query(sw, DAT_EVD_FIELD_ALL, &ep), DAT_SUCCESS, "dat_evd_query(disabled)");
	CHECK(ep.evd_state & DAT_EVD_STATE_DISABLED, "evd_state 0x%x lacks DISABLED", (unsigned)ep.evd_state);
	CHECK_RC(dat_evd_enable(sw), DAT_SUCCESS, "dat_evd_enable");

	/* the async EVD goes with the IA */
	CHECK_RC(dat_evd_free(async), BAD_STATE(DAT_INVALID_STATE_EVD_ASYNC), "dat_evd_free(the IA's async EVD)");
	CHECK_RC(dat_evd_free(sw), DAT_SUCCESS, "dat_evd_free");
	CHECK_RC(dat_evd_free(sw), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_REQUEST), "dat_evd_free(freed)");
	CHECK_RC(dat_evd_post_se(sw, &ev), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_REQUEST), "dat_evd_post_se(freed)");
	CHECK_RC(dat_evd_free(dto), DAT_SUCCESS, "dat_evd_free(DTO EVD)");
out:
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

static void case_cno_errors(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_CNO_HANDLE cno = NULL;
	DAT_CNO_PARAM cp;
	DAT_EVD_HANDLE evd = NULL, got = NULL;
	DAT_OS_WAIT_PROXY_AGENT agent = { (DAT_PVOID)(uintptr_t)0x77, NULL };
	DAT_EVENT ev;
	DAT_COUNT nmore;

	if (!ia)
		return;
	CHECK_RC(dat_cno_create(ia, agent, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_cno_create(NULL out)");
	CHECK_RC(dat_cno_create(ia, agent, &cno), DAT_SUCCESS, "dat_cno_create");
	if (!cno)
		goto out;
	CHECK_RC(dat_cno_query(cno, DAT_CNO_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_cno_query(NULL)");
	memset(&cp, 0, sizeof(cp));
	CHECK_RC(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cno_query");
	CHECK_EQ((uintptr_t)cp.proxy.agent.instance_data, 0x77, "cno_query agent instance_data");
	agent.instance_data = (DAT_PVOID)(uintptr_t)0x88;
	CHECK_RC(dat_cno_modify_agent(cno, agent), DAT_SUCCESS, "dat_cno_modify_agent");
	CHECK_RC(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cno_query after modify");
	CHECK_EQ((uintptr_t)cp.proxy.agent.instance_data, 0x88, "cno_query agent after modify");
	CHECK_RC(dat_cno_wait(cno, 100000, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_cno_wait(NULL out)");
	CHECK_RC(dat_cno_wait(cno, 200000, &got), DAT_ERROR(DAT_TIMEOUT_EXPIRED, 0), "dat_cno_wait(nothing attached)");
	CHECK_RC(dat_evd_create(ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &evd), DAT_SUCCESS, "dat_evd_create(with CNO)");
	CHECK_RC(dat_cno_free(cno), BAD_STATE(DAT_INVALID_STATE_CNO_IN_USE), "dat_cno_free(EVD attached)");
	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_SOFTWARE_EVENT;
	CHECK_RC(dat_evd_post_se(evd, &ev), DAT_SUCCESS, "dat_evd_post_se(EVD with CNO)");
	CHECK_RC(dat_evd_wait(evd, 0, 1, &ev, &nmore), BAD_STATE(DAT_INVALID_STATE_EVD_CONFIG_NOTIFY),
		 "dat_evd_wait on an EVD feeding an enabled CNO");
	CHECK_RC(dat_cno_wait(cno, WAIT_US, &got), DAT_SUCCESS, "dat_cno_wait(event queued)");
	CHECK(got == evd, "dat_cno_wait returned EVD %p, expected %p", (void *)got, (void *)evd);
	CHECK_RC(dat_evd_dequeue(evd, &ev), DAT_SUCCESS, "dat_evd_dequeue after the CNO");
	CHECK_RC(dat_evd_modify_cno(evd, (DAT_CNO_HANDLE)evd), BAD_HANDLE(DAT_INVALID_HANDLE_CNO),
		 "dat_evd_modify_cno(an EVD as the CNO)");
	CHECK_RC(dat_evd_modify_cno(evd, NULL), DAT_SUCCESS, "dat_evd_modify_cno(NULL): detach");
	CHECK_RC(dat_cno_free(cno), DAT_SUCCESS, "dat_cno_free once detached");
	CHECK_RC(dat_cno_free(cno), BAD_HANDLE(DAT_INVALID_HANDLE_CNO), "dat_cno_free(freed)");
	CHECK_RC(dat_cno_wait(cno, 0, &got), BAD_HANDLE(DAT_INVALID_HANDLE_CNO), "dat_cno_wait(freed)");
	CHECK_RC(dat_cno_modify_agent(cno, agent), BAD_HANDLE(DAT_INVALID_HANDLE_CNO), "dat_cno_modify_agent(freed)");
	CHECK_RC(dat_evd_free(evd), DAT_SUCCESS, "dat_evd_free");
out:
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* The CNO's proxy agent: called once with its instance data and the EVD
 * that triggered the CNO, then cleared (as DAPL does) until
 * dat_cno_modify_agent arms it again. A software event triggers it on the
 * consumer's thread, a connection request on the provider's. */
static volatile int agent_calls;
static volatile uintptr_t agent_data;
static DAT_EVD_HANDLE volatile agent_evd;

static void DAT_API record_agent(DAT_PVOID data, DAT_EVD_HANDLE evd)
{
	agent_data = (uintptr_t)data;
	agent_evd = evd;
	__sync_fetch_and_add(&agent_calls, 1);
}

static int agent_calls_reach(int n)
{
	for (double t0 = now_s(); now_s() - t0 < WAIT_US / 1e6; usleep(20000))
		if (agent_calls >= n)
			return 1;
	return agent_calls >= n;
}

static void case_cno_agent(void)
{
	struct pair p;
	struct sockaddr_in self;
	DAT_OS_WAIT_PROXY_AGENT agent = { (DAT_PVOID)(uintptr_t)0x5a, record_agent };
	DAT_CNO_HANDLE cno = NULL;
	DAT_EVD_HANDLE sw = NULL, got = NULL;
	DAT_CNO_PARAM cp;
	DAT_EVENT ev;

	agent_calls = 0;
	if (!pair_setup(&p, 16, NULL) || !self_addr(p.ia, &self))
		goto out;
	CHECK_RC(dat_cno_create(p.ia, agent, &cno), DAT_SUCCESS, "dat_cno_create(with an agent)");
	CHECK_RC(dat_evd_create(p.ia, 4, cno, DAT_EVD_SOFTWARE_FLAG, &sw), DAT_SUCCESS, "dat_evd_create(software, on the CNO)");
	if (!cno || !sw)
		goto out;
	memset(&ev, 0, sizeof(ev));
	ev.event_number = DAT_SOFTWARE_EVENT;
	CHECK_RC(dat_evd_post_se(sw, &ev), DAT_SUCCESS, "dat_evd_post_se");
	CHECK_EQ(agent_calls, 1, "agent calls after a software event");
	CHECK_EQ(agent_data, 0x5a, "the agent's instance data");
	CHECK(agent_evd == sw, "the agent was given EVD %p, expected %p", (void *)agent_evd, (void *)sw);
	memset(&cp, 0, sizeof(cp));
	CHECK_RC(dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cno_query after the agent fired");
	CHECK(cp.proxy.agent.proxy_agent_func == NULL, "the agent is still set after it fired");
	CHECK_RC(dat_evd_post_se(sw, &ev), DAT_SUCCESS, "dat_evd_post_se(second)");
	CHECK_EQ(agent_calls, 1, "agent calls after a second event (it fires once)");
	CHECK_RC(dat_cno_wait(cno, WAIT_US, &got), DAT_SUCCESS, "dat_cno_wait");
	CHECK(got == sw, "dat_cno_wait returned EVD %p, expected %p", (void *)got, (void *)sw);
	CHECK_RC(dat_evd_dequeue(sw, &ev), DAT_SUCCESS, "dat_evd_dequeue(first)");
	CHECK_RC(dat_evd_dequeue(sw, &ev), DAT_SUCCESS, "dat_evd_dequeue(second)");

	/* armed again, and triggered by the provider's connection thread */
	agent.instance_data = (DAT_PVOID)(uintptr_t)0x6b;
	CHECK_RC(dat_cno_modify_agent(cno, agent), DAT_SUCCESS, "dat_cno_modify_agent");
	CHECK_RC(dat_evd_modify_cno(p.cr, cno), DAT_SUCCESS, "dat_evd_modify_cno(CR EVD)");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp), DAT_SUCCESS, "dat_psp_create");
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect");
	if (!agent_calls_reach(2)) {
		fail("the agent was not called for the connection request (calls: %d)", agent_calls);
		goto out;
	}
	CHECK_EQ(agent_data, 0x6b, "the re-armed agent's instance data");
	CHECK(agent_evd == p.cr, "the agent was given EVD %p, expected the CR EVD %p", (void *)agent_evd, (void *)p.cr);
	CHECK_RC(dat_evd_dequeue(p.cr, &ev), DAT_SUCCESS, "dat_evd_dequeue(CR EVD)");
	if (ev.event_number == DAT_CONNECTION_REQUEST_EVENT) {
		CHECK_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p.b.ep, 0, NULL), DAT_SUCCESS,
			 "dat_cr_accept");
		expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "A established");
	} else {
		fail("the CR EVD held event %#x", (unsigned)ev.event_number);
	}
	CHECK_EQ(agent_calls, 2, "agent calls in all");
	CHECK_RC(dat_evd_modify_cno(p.cr, NULL), DAT_SUCCESS, "dat_evd_modify_cno(CR EVD, NULL)");
	CHECK_RC(dat_evd_modify_cno(sw, NULL), DAT_SUCCESS, "dat_evd_modify_cno(software EVD, NULL)");
	CHECK_RC(dat_evd_free(sw), DAT_SUCCESS, "dat_evd_free(software EVD)");
	CHECK_RC(dat_cno_free(cno), DAT_SUCCESS, "dat_cno_free");
out:
	pair_close(&p);
}

/* ------------------------------------------------------------------ */
/* EP                                                                 */

static void case_ep_errors(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE dto, conn, cr, sw;
	DAT_EP_HANDLE ep = NULL, ep2 = NULL, x = NULL;
	DAT_EP_ATTR attr;
	DAT_EP_PARAM param;
	DAT_EP_STATE st;
	DAT_BOOLEAN ri, qi;
	DAT_COUNT nb = -1, bs = 0;
	DAT_LMR_TRIPLET iov[40];
	DAT_RMR_TRIPLET rt;
	DAT_DTO_COOKIE ck;
	struct mem m;
	struct sockaddr_in self;
	struct sockaddr_un unaddr;
	char pdata[64];

	if (!ia)
		return;
	pz = make_pz(ia);
	dto = make_evd(ia, 16, DAT_EVD_DTO_FLAG);
	conn = make_evd(ia, 4, DAT_EVD_CONNECTION_FLAG);
	cr = make_evd(ia, 4, DAT_EVD_CR_FLAG);
	sw = make_evd(ia, 4, DAT_EVD_SOFTWARE_FLAG);
	if (!pz || !dto || !conn || !cr || !sw || !mem_reg(ia, pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m) || !self_addr(ia, &self))
		goto out;
	CHECK_RC(dat_ep_create(ia, pz, cr, dto, conn, NULL, &x), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_RECV),
		 "dat_ep_create(recv EVD is a CR EVD)");
	CHECK_RC(dat_ep_create(ia, pz, dto, sw, conn, NULL, &x), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_REQUEST),
		 "dat_ep_create(request EVD is a software EVD)");
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, dto, NULL, &x), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_CONN),
		 "dat_ep_create(connect EVD is a DTO EVD)");
	CHECK_RC(dat_ep_create(ia, dto, dto, dto, conn, NULL, &x), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
		 "dat_ep_create(an EVD as the PZ)");
	attr = small_attr(8, 2);
	attr.service_type = (DAT_SERVICE_TYPE)99;
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, conn, &attr, &x), BAD_ARG(DAT_INVALID_ARG6), "dat_ep_create(service type 99)");
	attr = small_attr(8, 1000);
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, conn, &attr, &x), BAD_ARG(DAT_INVALID_ARG6), "dat_ep_create(1000 IOVs)");
	attr = small_attr(-1, 2);
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, conn, &attr, &x), BAD_ARG(DAT_INVALID_ARG6), "dat_ep_create(-1 DTOs)");
	attr = small_attr(1 << 30, 2);
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, conn, &attr, &x), BAD_ARG(DAT_INVALID_ARG6), "dat_ep_create(2^30 DTOs)");
	attr = small_attr(8, 2);
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, conn, &attr, NULL), BAD_ARG(DAT_INVALID_ARG7), "dat_ep_create(NULL out)");
	CHECK_RC(dat_ep_create(ia, pz, dto, dto, conn, &attr, &ep), DAT_SUCCESS, "dat_ep_create");
	CHECK_RC(dat_ep_create(ia, NULL, NULL, NULL, NULL, NULL, &ep2), DAT_SUCCESS, "dat_ep_create(no PZ, no EVDs)");
	if (!ep || !ep2)
		goto out;
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free(PZ of an EP)");
	CHECK_RC(dat_evd_free(dto), BAD_STATE(DAT_INVALID_STATE_EVD_IN_USE), "dat_evd_free(EVD of an EP)");
	CHECK_RC(dat_evd_free(conn), BAD_STATE(DAT_INVALID_STATE_EVD_IN_USE), "dat_evd_free(connect EVD of an EP)");

	/* query / modify / status */
	CHECK_RC(dat_ep_query(ep, DAT_EP_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_ep_query(NULL)");
	memset(&param, 0, sizeof(param));
	CHECK_RC(dat_ep_query(ep, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS, "dat_ep_query");
	CHECK_EQ(param.ep_state, DAT_EP_STATE_UNCONNECTED, "ep_state of a configured EP");
	CHECK(param.pz_handle == pz && param.recv_evd_handle == dto && param.connect_evd_handle == conn,
	      "ep_query handles %p %p %p", (void *)param.pz_handle, (void *)param.recv_evd_handle,
	      (void *)param.connect_evd_handle);
	CHECK_EQ(param.ep_attr.max_recv_dtos, 8, "ep_query max_recv_dtos");
	CHECK_RC(dat_ep_query(ep2, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS, "dat_ep_query(unconfigured)");
	CHECK_EQ(param.ep_state, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED, "ep_state of an EP without PZ/EVDs");
	CHECK_RC(dat_ep_modify(ep, DAT_EP_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_ep_modify(NULL param)");
	CHECK_RC(dat_ep_modify(ep, DAT_EP_FIELD_EP_STATE, &param), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_ep_modify(mask: EP_STATE, not settable)");
	param.ep_attr = small_attr(8, 1000);
	CHECK_RC(dat_ep_modify(ep, DAT_EP_FIELD_EP_ATTR_ALL, &param), BAD_ARG(DAT_INVALID_ARG3),
		 "dat_ep_modify(1000 IOVs)");
	param.pz_handle = pz;
	param.recv_evd_handle = dto;
	param.request_evd_handle = dto;
	param.connect_evd_handle = conn;
	param.ep_attr = small_attr(8, 2);
	CHECK_RC(dat_ep_modify(ep2, DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE |
				    DAT_EP_FIELD_CONNECT_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_ALL, &param),
		 DAT_SUCCESS, "dat_ep_modify(unconfigured EP: PZ, EVDs, attributes)");
	CHECK_RC(dat_ep_query(ep2, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS, "dat_ep_query after modify");
	CHECK_EQ(param.ep_state, DAT_EP_STATE_UNCONNECTED, "ep_state after configuring by ep_modify");
	st = 99;
	CHECK_RC(dat_ep_get_status(ep, &st, &ri, &qi), DAT_SUCCESS, "dat_ep_get_status");
	CHECK_EQ(st, DAT_EP_STATE_UNCONNECTED, "get_status state");
	CHECK_RC(dat_ep_get_status(ep, NULL, NULL, NULL), DAT_SUCCESS, "dat_ep_get_status(all NULL)");

	/* posting on an unconnected EP */
	iov[0] = triplet(&m, 0, 64);
	ck.as_64 = 1;
	rt.virtual_address = m.addr;
	rt.segment_length = 64;
	rt.rmr_context = m.rkey;
	CHECK_RC(dat_ep_post_send(ep, 1, iov, ck, DAT_COMPLETION_DEFAULT_FLAG), BAD_STATE(DAT_INVALID_STATE_EP_UNCONNECTED),
		 "dat_ep_post_send(unconnected)");
	CHECK_RC(dat_ep_post_rdma_write(ep, 1, iov, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG),
		 BAD_STATE(DAT_INVALID_STATE_EP_UNCONNECTED), "dat_ep_post_rdma_write(unconnected)");
	CHECK_RC(dat_ep_post_rdma_read(ep, 1, iov, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG),
		 BAD_STATE(DAT_INVALID_STATE_EP_UNCONNECTED), "dat_ep_post_rdma_read(unconnected)");
	CHECK_RC(dat_ep_post_rdma_write(ep, 1, iov, ck, NULL, DAT_COMPLETION_DEFAULT_FLAG), BAD_ARG(DAT_INVALID_ARG5),
		 "dat_ep_post_rdma_write(NULL remote triplet)");
	CHECK_RC(dat_ep_post_rdma_read(ep, 1, iov, ck, NULL, DAT_COMPLETION_DEFAULT_FLAG), BAD_ARG(DAT_INVALID_ARG5),
		 "dat_ep_post_rdma_read(NULL remote triplet)");
	CHECK_RC(dat_ep_post_recv(ep2, 1, iov, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS,
		 "dat_ep_post_recv(unconnected: allowed)");
	CHECK_RC(dat_ep_recv_query(ep2, &nb, &bs), DAT_SUCCESS, "dat_ep_recv_query");
	CHECK_EQ(nb, 1, "recv_query: receives outstanding");
	CHECK_RC(dat_ep_modify(ep2, DAT_EP_FIELD_EP_ATTR_ALL, &param), BAD_STATE(DAT_INVALID_STATE_EP_UNCONNECTED),
		 "dat_ep_modify with a receive posted");
	CHECK_RC(dat_ep_post_recv(ep, -1, iov, ck, 0), BAD_ARG(DAT_INVALID_ARG2), "dat_ep_post_recv(count -1)");
	CHECK_RC(dat_ep_post_recv(ep, 1, NULL, ck, 0), BAD_ARG(DAT_INVALID_ARG2), "dat_ep_post_recv(NULL iov, count 1)");
	for (int i = 0; i < 40; i++)
		iov[i] = triplet(&m, (size_t)i * 64, 64);
	CHECK_RC(dat_ep_post_recv(ep, 33, iov, ck, 0), BAD_ARG(DAT_INVALID_ARG2), "dat_ep_post_recv(33 segments)");
	CHECK_RC(dat_ep_post_recv(ep, 3, iov, ck, 0), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_ep_post_recv(3 segments, EP max_recv_iov 2)");
	CHECK_RC(dat_ep_set_watermark(ep, 1, 1), BAD_STATE(DAT_INVALID_STATE_EP_RECV_WATERMARK),
		 "dat_ep_set_watermark(EP without SRQ)");

	/* connect argument checks */
	memset(pdata, 0x5a, sizeof(pdata));
	CHECK_RC(dat_ep_connect(ep, NULL, 1, SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_ep_connect(NULL address)");
	CHECK_RC(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&self, 1, SEC, -1, pdata, DAT_QOS_BEST_EFFORT, 0),
		 BAD_ARG(DAT_INVALID_ARG5), "dat_ep_connect(private data size -1)");
	CHECK_RC(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&self, 1, SEC, 4, NULL, DAT_QOS_BEST_EFFORT, 0),
		 BAD_ARG(DAT_INVALID_ARG6), "dat_ep_connect(4 bytes at NULL)");
	memset(&unaddr, 0, sizeof(unaddr));
	unaddr.sun_family = AF_UNIX;
	CHECK_RC(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&unaddr, 1, SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 DAT_ERROR(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_MALFORMED), "dat_ep_connect(AF_UNIX address)");
	CHECK_RC(dat_ep_connect(ep2, (DAT_IA_ADDRESS_PTR)&self, 1, SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS,
		 "dat_ep_connect(nobody listening: the failure is an event)");
	CHECK_RC(dat_ep_connect(ep2, (DAT_IA_ADDRESS_PTR)&self, 1, SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED), "dat_ep_connect(connection already pending)");
	CHECK_RC(dat_ep_reset(ep2), BAD_STATE(DAT_INVALID_STATE_EP_ACTCONNPENDING), "dat_ep_reset(connect pending)");
	CHECK_RC(dat_ep_dup_connect(ep, ep2, SEC, 0, NULL, DAT_QOS_BEST_EFFORT), BAD_STATE(DAT_INVALID_STATE_EP_UNCONNECTED),
		 "dat_ep_dup_connect(model EP not connected)");
	CHECK_RC(dat_ep_dup_connect(ep, pz, SEC, 0, NULL, DAT_QOS_BEST_EFFORT), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
		 "dat_ep_dup_connect(a PZ as the model EP)");
	CHECK_RC(dat_ep_disconnect(ep, (DAT_CLOSE_FLAGS)7), BAD_ARG(DAT_INVALID_ARG2), "dat_ep_disconnect(flags 7)");
	CHECK_RC(dat_ep_disconnect(ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(unconnected)");
	CHECK_RC(dat_ep_reset(ep), DAT_SUCCESS, "dat_ep_reset(unconnected)");

	CHECK_RC(dat_ep_free(ep), DAT_SUCCESS, "dat_ep_free");
	CHECK_RC(dat_ep_free(ep), BAD_HANDLE(DAT_INVALID_HANDLE_EP), "dat_ep_free(freed)");
	CHECK_RC(dat_ep_post_send(ep, 1, iov, ck, 0), BAD_HANDLE(DAT_INVALID_HANDLE_EP), "dat_ep_post_send(freed EP)");
	CHECK_RC(dat_ep_free(ep2), DAT_SUCCESS, "dat_ep_free(second, after its failed connect)");
	CHECK_RC(dat_evd_free(conn), DAT_SUCCESS, "dat_evd_free(connect EVD, its EPs freed)");
	CHECK_RC(dat_lmr_free(m.lmr), DAT_SUCCESS, "dat_lmr_free");
	CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free(its EPs freed)");
	CHECK_RC(dat_evd_free(dto), DAT_SUCCESS, "dat_evd_free(DTO EVD, its EPs freed)");
	CHECK_RC(dat_evd_free(cr), DAT_SUCCESS, "dat_evd_free(CR EVD)");
	CHECK_RC(dat_evd_free(sw), DAT_SUCCESS, "dat_evd_free(software EVD)");
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close(GRACEFUL): nothing left behind");
	return;
out:
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
}

/* Calls that need a connection, and what a connected EP refuses. */
static void case_ep_connected(void)
{
	struct pair p;
	struct mem m;
	DAT_EP_PARAM param;
	DAT_LMR_TRIPLET iov;
	DAT_DTO_COOKIE ck;
	DAT_EVENT ev;
	DAT_EP_HANDLE c = NULL, d = NULL;
	DAT_DTO_COMPLETION_EVENT_DATA dd;

	if (!pair_open(&p) || !mem_reg(p.ia, p.pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	memset(&param, 0, sizeof(param));
	CHECK_RC(dat_ep_query(p.a.ep, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS, "dat_ep_query(connected)");
	CHECK_EQ(param.ep_state, DAT_EP_STATE_CONNECTED, "ep_state");
	CHECK_EQ(param.remote_port_qual, p.qual, "remote_port_qual of the active side");
	CHECK_RC(dat_ep_connect(p.a.ep, param.remote_ia_address_ptr, p.qual, SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED), "dat_ep_connect(connected EP)");
	CHECK_RC(dat_ep_modify(p.a.ep, DAT_EP_FIELD_EP_ATTR_ALL, &param), BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED),
		 "dat_ep_modify(connected EP)");
	CHECK_RC(dat_ep_reset(p.a.ep), BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED), "dat_ep_reset(connected EP)");
	CHECK_RC(dat_pz_free(p.pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free(PZ of connected EPs)");
	CHECK_RC(dat_evd_free(p.a.req), BAD_STATE(DAT_INVALID_STATE_EVD_IN_USE), "dat_evd_free(request EVD in use)");
	CHECK_RC(dat_lmr_free(m.lmr), DAT_SUCCESS, "dat_lmr_free(LMR not in use by a window)");
	if (!mem_reg(p.ia, p.pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;

	/* a zero-length send and a receive with 0 segments: legal */
	ck.as_64 = 0x51;
	CHECK_RC(dat_ep_post_recv(p.b.ep, 0, NULL, ck, 0), DAT_SUCCESS, "dat_ep_post_recv(0 segments)");
	ck.as_64 = 0x52;
	CHECK_RC(dat_ep_post_send(p.a.ep, 0, NULL, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS,
		 "dat_ep_post_send(0 segments)");
	if (next_dto(p.a.req, WAIT_US, &dd, "zero-length send") == DAT_DTO_SUCCESS) {
		CHECK_EQ(dd.user_cookie.as_64, 0x52, "send cookie");
		CHECK_EQ(dd.transfered_length, 0, "send length");
	}
	if (next_dto(p.b.recv, WAIT_US, &dd, "zero-length receive") == DAT_DTO_SUCCESS) {
		CHECK_EQ(dd.user_cookie.as_64, 0x51, "receive cookie");
		CHECK_EQ(dd.transfered_length, 0, "receive length");
		CHECK_EQ(dd.operation, DAT_DTO_RECEIVE, "receive operation");
	}
	/* dup_connect: a third EP connects where A is connected */
	DAT_EP_ATTR attr = small_attr(8, 2);
	if (CALL(dat_ep_create(p.ia, p.pz, p.a.recv, p.a.req, p.a.conn, &attr, &c)) == DAT_SUCCESS &&
	    CALL(dat_ep_create(p.ia, p.pz, p.b.recv, p.b.req, p.b.conn, &attr, &d)) == DAT_SUCCESS) {
		CHECK_RC(dat_ep_dup_connect(c, p.a.ep, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT), DAT_SUCCESS,
			 "dat_ep_dup_connect(model: A)");
		if (expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "dup_connect's request")) {
			CHECK_EQ(ev.event_data.cr_arrival_event_data.conn_qual, p.qual, "dup_connect request conn_qual");
			CHECK_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, d, 0, NULL), DAT_SUCCESS,
				 "dat_cr_accept(dup_connect's request)");
			expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "dup-connected EP established");
			CHECK(ev.event_data.connect_event_data.ep_handle == c, "established event names EP %p, expected %p",
			      (void *)ev.event_data.connect_event_data.ep_handle, (void *)c);
			expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "its peer established");
		}
	} else {
		fail("dat_ep_create(C, D) failed");
	}
	/* disconnect: both sides see it; posting then is refused */
	CHECK_RC(dat_ep_disconnect(p.a.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ep_disconnect(GRACEFUL)");
	expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "A: disconnected");
	expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "B: disconnected by the peer");
	CHECK_RC(dat_ep_disconnect(p.a.ep, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS, "dat_ep_disconnect(already disconnected)");
	iov = triplet(&m, 0, 64);
	CHECK_TYPE(dat_ep_post_send(p.a.ep, 1, &iov, ck, 0), DAT_INVALID_STATE, "dat_ep_post_send(disconnected EP)");
	CHECK_RC(dat_ep_reset(p.a.ep), DAT_SUCCESS, "dat_ep_reset(disconnected)");
	CHECK_RC(dat_ep_query(p.a.ep, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS, "dat_ep_query after reset");
	CHECK_EQ(param.ep_state, DAT_EP_STATE_UNCONNECTED, "ep_state after reset");
	/* freeing a connected EP: its peer is told */
	if (c && d) {
		CHECK_RC(dat_ep_free(c), DAT_SUCCESS, "dat_ep_free(connected EP)");
		expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "peer of a freed EP");
		CHECK(ev.event_data.connect_event_data.ep_handle == d, "disconnect event names %p, expected %p",
		      (void *)ev.event_data.connect_event_data.ep_handle, (void *)d);
	}
out:
	pair_close(&p);
}

/* The minor code of a post on a disconnected EP (DAT: the state subtype). */
static void case_post_disconnected_minor(void)
{
	struct pair p;
	struct mem m;
	DAT_LMR_TRIPLET iov;
	DAT_DTO_COOKIE ck = { .as_64 = 1 };
	DAT_EVENT ev;

	if (!pair_open(&p) || !mem_reg(p.ia, p.pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	CHECK_RC(dat_ep_disconnect(p.a.ep, DAT_CLOSE_GRACEFUL_FLAG), DAT_SUCCESS, "dat_ep_disconnect");
	expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_DISCONNECTED, &ev, "A: disconnected");
	iov = triplet(&m, 0, 64);
	CHECK_RC(dat_ep_post_send(p.a.ep, 1, &iov, ck, 0), BAD_STATE(DAT_INVALID_STATE_EP_DISCONNECTED),
		 "dat_ep_post_send(disconnected EP)");
out:
	pair_close(&p);
}

/* The passive side may answer at once after dat_cr_accept: its EP is in
 * COMPLETION_PENDING (CONNECTED if the RTU was quick) and a send posted
 * there goes out. rdma_cm gives the passive side ESTABLISHED only on the
 * RTU, so a server replying to a first message can post before it. */
static void case_send_after_accept(void)
{
	struct pair p;
	struct mem m;
	struct sockaddr_in self;
	DAT_EVENT ev;
	DAT_EP_STATE st;
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_LMR_TRIPLET rt, st_iov;
	DAT_DTO_COOKIE rk = { .as_64 = 7 }, sk = { .as_64 = 8 };

	if (!pair_setup(&p, 16, NULL) || !self_addr(p.ia, &self) || !mem_reg(p.ia, p.pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	for (int i = 0; i < 64; i++) {
		m.buf[i] = (unsigned char)(0xA5 ^ i);
		m.buf[64 + i] = 0;
	}
	rt = triplet(&m, 64, 64);
	st_iov = triplet(&m, 0, 64);
	CHECK_RC(dat_ep_post_recv(p.a.ep, 1, &rt, rk, 0), DAT_SUCCESS, "dat_ep_post_recv(A, before connecting)");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp), DAT_SUCCESS, "dat_psp_create");
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect");
	if (!expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "request"))
		goto out;
	CHECK_RC(dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, p.b.ep, 0, NULL), DAT_SUCCESS,
		 "dat_cr_accept");
	CHECK_RC(dat_ep_get_status(p.b.ep, &st, NULL, NULL), DAT_SUCCESS, "dat_ep_get_status(B after the accept)");
	CHECK(st == DAT_EP_STATE_COMPLETION_PENDING || st == DAT_EP_STATE_CONNECTED,
	      "B's state after dat_cr_accept is %d, expected COMPLETION_PENDING or CONNECTED", (int)st);
	CHECK_RC(dat_ep_post_send(p.b.ep, 1, &st_iov, sk, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS,
		 "dat_ep_post_send(B, right after the accept)");
	expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "B established");
	expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "A established");
	if (next_dto(p.b.req, WAIT_US, &d, "B's send") == DAT_DTO_SUCCESS)
		CHECK_EQ(d.user_cookie.as_64, 8, "B's send cookie");
	if (next_dto(p.a.recv, WAIT_US, &d, "A's receive") == DAT_DTO_SUCCESS) {
		CHECK_EQ(d.transfered_length, 64, "A's receive length");
		CHECK(memcmp(m.buf, m.buf + 64, 64) == 0, "A received other bytes than B sent");
		g_stats.bytes += 64;
	}
	CHECK_RC(dat_ep_get_status(p.b.ep, &st, NULL, NULL), DAT_SUCCESS, "dat_ep_get_status(B after ESTABLISHED)");
	CHECK_EQ(st, DAT_EP_STATE_CONNECTED, "B's state after ESTABLISHED");
out:
	pair_close(&p);
}

/* ------------------------------------------------------------------ */
/* PSP, RSP, CR                                                       */

/* dat_cr_handoff: to a qualifier nobody listens on (refused, the CR stays),
 * then to a second PSP of the IA, whose EVD gets the request. */
static void case_cr_handoff(void)
{
	struct pair p;
	struct sockaddr_in self;
	DAT_PSP_HANDLE psp2 = NULL;
	DAT_EVD_HANDLE cr2 = NULL;
	DAT_EVENT ev;
	DAT_CR_HANDLE cr;
	DAT_CR_PARAM cp;

	if (!pair_setup(&p, 16, NULL) || !self_addr(p.ia, &self) || !(cr2 = make_evd(p.ia, 8, DAT_EVD_CR_FLAG)))
		goto out;
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp), DAT_SUCCESS, "dat_psp_create");
	CHECK_RC(dat_psp_create(p.ia, p.qual + 1, cr2, DAT_PSP_CONSUMER_FLAG, &psp2), DAT_SUCCESS, "dat_psp_create(second)");
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect");
	if (!expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "request"))
		goto out;
	cr = ev.event_data.cr_arrival_event_data.cr_handle;
	CHECK_RC(dat_cr_handoff(cr, p.qual + 2), BAD_ARG(DAT_INVALID_ARG2), "dat_cr_handoff(no PSP on that qualifier)");
	CHECK_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cr_query after a refused handoff");
	CHECK_RC(dat_cr_handoff(cr, p.qual + 1), DAT_SUCCESS, "dat_cr_handoff(to the second PSP)");
	if (expect_ev(cr2, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "handed-off request on the second PSP's EVD")) {
		CHECK(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle == psp2, "handed-off request names PSP %p, "
		      "expected %p", (void *)ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, (void *)psp2);
		CHECK_EQ(ev.event_data.cr_arrival_event_data.conn_qual, p.qual + 1, "handed-off request conn_qual");
		cr = ev.event_data.cr_arrival_event_data.cr_handle;
		CHECK_RC(dat_cr_accept(cr, p.b.ep, 0, NULL), DAT_SUCCESS, "dat_cr_accept(handed-off request)");
		expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "A established after the handoff");
		expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "B established after the handoff");
	}
	expect_quiet(p.cr, QUIET_US, "the first PSP's EVD after the handoff");
out:
	pair_close(&p);
}

static void case_cr_errors(void)
{
	struct pair p;
	struct sockaddr_in self;
	DAT_EVENT ev;
	DAT_CR_HANDLE cr;
	DAT_CR_PARAM cp;
	DAT_EP_HANDLE c = NULL;
	char pd[256];

	if (!pair_setup(&p, 16, NULL) || !self_addr(p.ia, &self))
		goto out;
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp), DAT_SUCCESS, "dat_psp_create");
	memset(pd, 0xc3, sizeof(pd));
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 8, pd, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect(8 bytes private data)");
	if (!expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "request"))
		goto out;
	cr = ev.event_data.cr_arrival_event_data.cr_handle;
	CHECK(ev.event_data.cr_arrival_event_data.sp_handle.psp_handle == p.psp, "request sp_handle %p, expected the PSP %p",
	      (void *)ev.event_data.cr_arrival_event_data.sp_handle.psp_handle, (void *)p.psp);
	CHECK_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_cr_query(NULL)");
	memset(&cp, 0, sizeof(cp));
	CHECK_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cr_query");
	CHECK(cp.private_data_size >= 8 && cp.private_data && memcmp(cp.private_data, pd, 8) == 0,
	      "cr_query private data: %d bytes, not the 8 sent", cp.private_data_size);
	CHECK_RC(dat_cr_accept(cr, p.b.ep, 197, pd), BAD_ARG(DAT_INVALID_ARG3), "dat_cr_accept(197 bytes private data)");
	CHECK_RC(dat_cr_accept(cr, p.b.ep, -1, pd), BAD_ARG(DAT_INVALID_ARG3), "dat_cr_accept(-1 bytes)");
	CHECK_RC(dat_cr_accept(cr, p.b.ep, 4, NULL), BAD_ARG(DAT_INVALID_ARG4), "dat_cr_accept(4 bytes at NULL)");
	CHECK_RC(dat_cr_accept(cr, (DAT_EP_HANDLE)p.pz, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
		 "dat_cr_accept(a PZ as the EP)");
	CHECK_RC(dat_cr_accept(cr, NULL, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
		 "dat_cr_accept(no EP, PSP is not PROVIDER_FLAG)");
	{
		/* A UD EP cannot take a connection: refused as the wrong kind of EP, the CR left to a right one. */
		DAT_EP_ATTR ua = small_attr(8, 1);
		DAT_EP_HANDLE u = NULL;

		ua.service_type = (DAT_SERVICE_TYPE)DAT_IB_SERVICE_TYPE_UD;
		ua.max_message_size = 512;
		ua.max_rdma_size = 0;
		ua.max_rdma_read_in = ua.max_rdma_read_out = 0;
		if (CALL(dat_ep_create(p.ia, p.pz, p.b.recv, p.b.req, p.b.conn, &ua, &u)) == DAT_SUCCESS) {
			CHECK_RC(dat_cr_accept(cr, u, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
				 "dat_cr_accept(a UD EP for a connection)");
			CHECK_RC(dat_ep_free(u), DAT_SUCCESS, "dat_ep_free(the UD EP)");
		}
	}
	if (!g_ref) {
		/* An EP of another IA cannot take the CR: the connection lives in the CR's IA, and the
		 * other IA's EP would never hear of its end (ours: dat-fuzz found one stuck disconnecting
		 * once the CR's IA closed). The CR is left to a right EP. */
		DAT_IA_HANDLE ia2 = open_ia(g_ia2);
		DAT_PZ_HANDLE pz2 = ia2 ? make_pz(ia2) : NULL;
		DAT_EVD_HANDLE dto2 = ia2 ? make_evd(ia2, 8, DAT_EVD_DTO_FLAG) : NULL;
		DAT_EVD_HANDLE conn2 = ia2 ? make_evd(ia2, 8, DAT_EVD_CONNECTION_FLAG) : NULL;
		DAT_EP_ATTR oa = small_attr(8, 1);
		DAT_EP_HANDLE o = NULL;

		if (pz2 && dto2 && conn2 && CALL(dat_ep_create(ia2, pz2, dto2, dto2, conn2, &oa, &o)) == DAT_SUCCESS)
			CHECK_RC(dat_cr_accept(cr, o, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
				 "dat_cr_accept(an EP of another IA)");
		if (ia2)
			close_ia(ia2, DAT_CLOSE_ABRUPT_FLAG, "the second IA");
	}
	CHECK_RC(dat_cr_reject(cr, 145, pd), BAD_ARG(DAT_INVALID_ARG2), "dat_cr_reject(145 bytes)");
	CHECK_RC(dat_cr_reject(cr, 4, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_cr_reject(4 bytes at NULL)");
	CHECK_RC(dat_cr_accept(cr, p.b.ep, 0, NULL), DAT_SUCCESS, "dat_cr_accept");
	/* the CR is consumed by the accept */
	CHECK_RC(dat_cr_accept(cr, p.b.ep, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_CR), "dat_cr_accept(same CR again)");
	CHECK_RC(dat_cr_reject(cr, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_CR), "dat_cr_reject(accepted CR)");
	CHECK_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), BAD_HANDLE(DAT_INVALID_HANDLE_CR), "dat_cr_query(accepted CR)");
	expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "A established");
	expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "B established");

	/* a second request: accepting it with an EP already connected is refused, rejecting works */
	DAT_EP_ATTR attr = small_attr(8, 2);
	if (CALL(dat_ep_create(p.ia, p.pz, p.a.recv, p.a.req, p.a.conn, &attr, &c)) != DAT_SUCCESS)
		goto out;
	CHECK_RC(dat_ep_connect(c, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0), DAT_SUCCESS,
		 "dat_ep_connect(C)");
	if (!expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "second request"))
		goto out;
	cr = ev.event_data.cr_arrival_event_data.cr_handle;
	CHECK_RC(dat_cr_accept(cr, p.b.ep, 0, NULL), BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED),
		 "dat_cr_accept(with an EP already connected)");
	CHECK_RC(dat_cr_reject(cr, 3, pd), DAT_SUCCESS, "dat_cr_reject(3 bytes)");
	if (expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev, "C rejected")) {
		CHECK(ev.event_data.connect_event_data.ep_handle == c, "rejected event names %p, expected C %p",
		      (void *)ev.event_data.connect_event_data.ep_handle, (void *)c);
	}
	CHECK_RC(dat_cr_reject(cr, 0, NULL), BAD_HANDLE(DAT_INVALID_HANDLE_CR), "dat_cr_reject(rejected CR)");
	CHECK_RC(dat_cr_query(NULL, DAT_CR_FIELD_ALL, &cp), BAD_HANDLE(DAT_INVALID_HANDLE_CR), "dat_cr_query(NULL)");
	CHECK_RC(dat_cr_handoff(NULL, 1), BAD_HANDLE(DAT_INVALID_HANDLE_CR), "dat_cr_handoff(NULL)");
out:
	pair_close(&p);
}

static void case_psp_rsp_errors(void)
{
	struct pair p;
	struct sockaddr_in self;
	DAT_PSP_HANDLE psp = NULL, psp2 = NULL, any = NULL;
	DAT_RSP_HANDLE rsp = NULL;
	DAT_PSP_PARAM pp;
	DAT_RSP_PARAM rp;
	DAT_EP_PARAM param;
	DAT_CONN_QUAL q = 0;
	DAT_EVENT ev;
	DAT_CR_PARAM cp;

	if (!pair_setup(&p, 16, NULL) || !self_addr(p.ia, &self))
		goto out;
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.a.req, DAT_PSP_CONSUMER_FLAG, &psp), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_CR),
		 "dat_psp_create(a DTO EVD)");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, (DAT_PSP_FLAGS)7, &psp), BAD_ARG(DAT_INVALID_ARG4),
		 "dat_psp_create(flags 7)");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, NULL), BAD_ARG(DAT_INVALID_ARG5),
		 "dat_psp_create(NULL out)");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &psp), DAT_SUCCESS, "dat_psp_create");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &psp2), DAT_ERROR(DAT_CONN_QUAL_IN_USE, 0),
		 "dat_psp_create(same conn_qual again)");
	CHECK_RC(dat_evd_free(p.cr), BAD_STATE(DAT_INVALID_STATE_EVD_IN_USE), "dat_evd_free(CR EVD of a PSP)");
	CHECK_RC(dat_psp_create_any(p.ia, NULL, p.cr, DAT_PSP_CONSUMER_FLAG, &any), BAD_ARG(DAT_INVALID_ARG2),
		 "dat_psp_create_any(NULL conn_qual out)");
	CHECK_RC(dat_psp_create_any(p.ia, &q, p.cr, DAT_PSP_CONSUMER_FLAG, NULL), BAD_ARG(DAT_INVALID_ARG5),
		 "dat_psp_create_any(NULL out)");
	CHECK_RC(dat_psp_create_any(p.ia, &q, p.cr, DAT_PSP_CONSUMER_FLAG, &any), DAT_SUCCESS, "dat_psp_create_any");
	CHECK(q != 0, "dat_psp_create_any gave conn_qual 0");
	memset(&pp, 0, sizeof(pp));
	CHECK_RC(dat_psp_query(any, DAT_PSP_FIELD_ALL, &pp), DAT_SUCCESS, "dat_psp_query");
	CHECK_EQ(pp.conn_qual, q, "psp_query conn_qual of create_any");
	CHECK(pp.evd_handle == p.cr, "psp_query evd_handle");
	CHECK_RC(dat_psp_query(any, DAT_PSP_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_psp_query(NULL)");
	CHECK_RC(dat_psp_free(any), DAT_SUCCESS, "dat_psp_free");
	CHECK_RC(dat_psp_free(any), BAD_HANDLE(DAT_INVALID_HANDLE_PSP), "dat_psp_free(freed)");
	CHECK_RC(dat_psp_query(any, DAT_PSP_FIELD_ALL, &pp), BAD_HANDLE(DAT_INVALID_HANDLE_PSP), "dat_psp_query(freed)");
	CHECK_RC(dat_psp_free(psp), DAT_SUCCESS, "dat_psp_free(first)");

	/* RSP: one connection to one EP */
	CHECK_RC(dat_rsp_create(p.ia, p.qual + 1, p.b.ep, p.a.req, &rsp), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_CR),
		 "dat_rsp_create(a DTO EVD)");
	CHECK_RC(dat_rsp_create(p.ia, p.qual + 1, (DAT_EP_HANDLE)p.pz, p.cr, &rsp), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
		 "dat_rsp_create(a PZ as the EP)");
	CHECK_RC(dat_rsp_create(p.ia, p.qual + 1, p.b.ep, p.cr, NULL), BAD_ARG(DAT_INVALID_ARG5), "dat_rsp_create(NULL out)");
	CHECK_RC(dat_rsp_create(p.ia, p.qual + 1, p.b.ep, p.cr, &rsp), DAT_SUCCESS, "dat_rsp_create");
	memset(&param, 0, sizeof(param));
	CHECK_RC(dat_ep_query(p.b.ep, DAT_EP_FIELD_ALL, &param), DAT_SUCCESS, "dat_ep_query(EP of an RSP)");
	CHECK_EQ(param.ep_state, DAT_EP_STATE_RESERVED, "state of an RSP's EP");
	memset(&rp, 0, sizeof(rp));
	CHECK_RC(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &rp), DAT_SUCCESS, "dat_rsp_query");
	CHECK(rp.ep_handle == p.b.ep && rp.conn_qual == p.qual + 1, "rsp_query ep %p qual %llu", (void *)rp.ep_handle,
	      (unsigned long long)rp.conn_qual);
	CHECK_RC(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_rsp_query(NULL)");
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual + 1, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect(to the RSP)");
	if (expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "request on the RSP")) {
		DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
		CHECK(ev.event_data.cr_arrival_event_data.sp_handle.rsp_handle == rsp, "request sp_handle is not the RSP");
		memset(&cp, 0, sizeof(cp));
		CHECK_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cr_query(RSP request)");
		CHECK(cp.local_ep_handle == p.b.ep, "cr_query local_ep_handle %p, expected the RSP's EP %p",
		      (void *)cp.local_ep_handle, (void *)p.b.ep);
		CHECK_RC(dat_cr_accept(cr, NULL, 0, NULL), DAT_SUCCESS, "dat_cr_accept(NULL EP: the RSP's)");
		expect_ev(p.b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "RSP's EP established");
		expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "A established");
	}
	CHECK_RC(dat_rsp_free(rsp), DAT_SUCCESS, "dat_rsp_free");
	CHECK_RC(dat_rsp_free(rsp), BAD_HANDLE(DAT_INVALID_HANDLE_RSP), "dat_rsp_free(freed)");
	CHECK_RC(dat_rsp_query(rsp, DAT_RSP_FIELD_ALL, &rp), BAD_HANDLE(DAT_INVALID_HANDLE_RSP), "dat_rsp_query(freed)");
	CHECK_RC(dat_rsp_create(p.ia, p.qual + 2, p.b.ep, p.cr, &rsp), BAD_STATE(DAT_INVALID_STATE_EP_CONNECTED),
		 "dat_rsp_create(connected EP)");
out:
	pair_close(&p);
}

/* ------------------------------------------------------------------ */
/* SRQ, RMR                                                           */

static void case_srq_errors(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia), ia2 = open_ia(g_ia2);
	DAT_PZ_HANDLE pz, pz2;
	DAT_EVD_HANDLE dto, conn;
	DAT_SRQ_HANDLE srq = NULL;
	DAT_SRQ_ATTR sa;
	DAT_SRQ_PARAM sp;
	DAT_EP_HANDLE ep = NULL, x = NULL;
	DAT_LMR_TRIPLET iov[2];
	DAT_DTO_COOKIE ck = { .as_64 = 3 };
	struct mem m;

	if (!ia || !ia2)
		goto out;
	pz = make_pz(ia);
	pz2 = make_pz(ia2);
	dto = make_evd(ia, 16, DAT_EVD_DTO_FLAG);
	conn = make_evd(ia, 4, DAT_EVD_CONNECTION_FLAG);
	if (!pz || !pz2 || !dto || !conn || !mem_reg(ia, pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	memset(&sa, 0, sizeof(sa));
	sa.max_recv_dtos = 16;
	sa.max_recv_iov = 2;
	sa.low_watermark = 0;
	CHECK_RC(dat_srq_create(ia, pz, NULL, &srq), BAD_ARG(DAT_INVALID_ARG3), "dat_srq_create(NULL attr)");
	sa.max_recv_dtos = 0;
	CHECK_RC(dat_srq_create(ia, pz, &sa, &srq), BAD_ARG(DAT_INVALID_ARG3), "dat_srq_create(0 DTOs)");
	sa.max_recv_dtos = 16;
	sa.low_watermark = 17;
	CHECK_RC(dat_srq_create(ia, pz, &sa, &srq), BAD_ARG(DAT_INVALID_ARG3), "dat_srq_create(low watermark > DTOs)");
	sa.low_watermark = 0;
	sa.max_recv_iov = 1000;
	CHECK_RC(dat_srq_create(ia, pz, &sa, &srq), BAD_ARG(DAT_INVALID_ARG3), "dat_srq_create(1000 IOVs)");
	sa.max_recv_iov = 2;
	CHECK_RC(dat_srq_create(ia, pz, &sa, NULL), BAD_ARG(DAT_INVALID_ARG4), "dat_srq_create(NULL out)");
	CHECK_RC(dat_srq_create(ia, pz2, &sa, &srq), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_srq_create(PZ of another IA)");
	CHECK_RC(dat_srq_create(ia, pz, &sa, &srq), DAT_SUCCESS, "dat_srq_create");
	if (!srq)
		goto out;
	CHECK_RC(dat_pz_free(pz2), DAT_SUCCESS, "dat_pz_free(other IA's PZ)");
	CHECK_RC(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_srq_query(NULL)");
	memset(&sp, 0, sizeof(sp));
	CHECK_RC(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &sp), DAT_SUCCESS, "dat_srq_query");
	CHECK_EQ(sp.max_recv_dtos, 16, "srq_query max_recv_dtos");
	CHECK(sp.pz_handle == pz, "srq_query pz_handle");
	iov[0] = triplet(&m, 0, 128);
	iov[1] = triplet(&m, 128, 128);
	CHECK_RC(dat_srq_post_recv(srq, -1, iov, ck), BAD_ARG(DAT_INVALID_ARG2), "dat_srq_post_recv(count -1)");
	CHECK_RC(dat_srq_post_recv(srq, 1, NULL, ck), BAD_ARG(DAT_INVALID_ARG2), "dat_srq_post_recv(NULL iov)");
	CHECK_RC(dat_srq_post_recv(srq, 2, iov, ck), DAT_SUCCESS, "dat_srq_post_recv(2 segments)");
	CHECK_RC(dat_srq_query(srq, DAT_SRQ_FIELD_ALL, &sp), DAT_SUCCESS, "dat_srq_query after a post");
	CHECK_EQ(sp.outstanding_dto_count, 1, "srq_query outstanding_dto_count");
	CHECK_RC(dat_srq_resize(srq, 0), BAD_ARG(DAT_INVALID_ARG2), "dat_srq_resize(0)");
	CHECK_RC(dat_srq_resize(srq, -3), BAD_ARG(DAT_INVALID_ARG2), "dat_srq_resize(-3)");
	CHECK_RC(dat_srq_set_lw(srq, 17), BAD_ARG(DAT_INVALID_ARG2), "dat_srq_set_lw(above max_recv_dtos)");
	CHECK_RC(dat_srq_set_lw(srq, -1), BAD_ARG(DAT_INVALID_ARG2), "dat_srq_set_lw(-1)");
	CHECK_RC(dat_srq_set_lw(srq, 4), DAT_SUCCESS, "dat_srq_set_lw(4)");
	CHECK_RC(dat_ep_create_with_srq(ia, pz, dto, dto, conn, NULL, NULL, &x), BAD_HANDLE(DAT_INVALID_HANDLE_SRQ),
		 "dat_ep_create_with_srq(NULL SRQ)");
	CHECK_RC(dat_ep_create_with_srq(ia, pz, dto, dto, conn, (DAT_SRQ_HANDLE)pz, NULL, &x),
		 BAD_HANDLE(DAT_INVALID_HANDLE_SRQ), "dat_ep_create_with_srq(a PZ as the SRQ)");
	CHECK_RC(dat_ep_create_with_srq(ia, pz, dto, dto, conn, srq, NULL, NULL), BAD_ARG(DAT_INVALID_ARG8),
		 "dat_ep_create_with_srq(NULL out)");
	CHECK_RC(dat_ep_create_with_srq(ia, pz, dto, dto, conn, srq, NULL, &ep), DAT_SUCCESS, "dat_ep_create_with_srq");
	if (ep) {
		CHECK_RC(dat_ep_post_recv(ep, 1, iov, ck, 0), BAD_STATE(DAT_INVALID_STATE_SRQ_IN_USE),
			 "dat_ep_post_recv(EP on an SRQ)");
		CHECK_RC(dat_ep_set_watermark(ep, 2, 4), DAT_SUCCESS, "dat_ep_set_watermark(EP on an SRQ)");
		CHECK_RC(dat_ep_set_watermark(ep, -1, 4), BAD_ARG(DAT_INVALID_ARG2), "dat_ep_set_watermark(-1)");
		CHECK_RC(dat_srq_free(srq), BAD_STATE(DAT_INVALID_STATE_SRQ_IN_USE), "dat_srq_free(SRQ of an EP)");
		CHECK_RC(dat_ep_free(ep), DAT_SUCCESS, "dat_ep_free(EP on an SRQ)");
	}
	CHECK_RC(dat_pz_free(pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free(PZ of an SRQ and LMR)");
	CHECK_RC(dat_srq_free(srq), DAT_SUCCESS, "dat_srq_free");
	CHECK_RC(dat_srq_free(srq), BAD_HANDLE(DAT_INVALID_HANDLE_SRQ), "dat_srq_free(freed)");
	CHECK_RC(dat_srq_post_recv(srq, 1, iov, ck), BAD_HANDLE(DAT_INVALID_HANDLE_SRQ), "dat_srq_post_recv(freed)");
out:
	close_ia(ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close");
	close_ia(ia2, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(second)");
}

static void case_rmr_errors(void)
{
	struct pair p;
	struct mem m;
	DAT_RMR_HANDLE rmr = NULL;
	DAT_RMR_PARAM rp;
	DAT_LMR_TRIPLET t;
	DAT_RMR_COOKIE ck = { .as_64 = 9 };
	DAT_RMR_CONTEXT ctx;

	if (!pair_open(&p) || !mem_reg(p.ia, p.pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &m))
		goto out;
	CHECK_RC(dat_rmr_create(p.pz, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_rmr_create(NULL out)");
	CHECK_RC(dat_rmr_create(p.pz, &rmr), DAT_SUCCESS, "dat_rmr_create");
	if (!rmr)
		goto out;
	CHECK_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, NULL), BAD_ARG(DAT_INVALID_ARG3), "dat_rmr_query(NULL)");
	CHECK_RC(dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp), DAT_SUCCESS, "dat_rmr_query");
	t = triplet(&m, 0, 4096);
	CHECK_RC(dat_rmr_bind(rmr, m.lmr, NULL, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, p.b.ep, ck, 0, &ctx),
		 BAD_ARG(DAT_INVALID_ARG3), "dat_rmr_bind(NULL triplet)");
	CHECK_RC(dat_rmr_bind(rmr, m.lmr, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_ZB, p.b.ep, ck, 0, &ctx),
		 BAD_ARG(DAT_INVALID_ARG5), "dat_rmr_bind(zero-based VA)");
	t.lmr_context ^= 0x5a5a00;
	CHECK_RC(dat_rmr_bind(rmr, m.lmr, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, p.b.ep, ck, 0, &ctx),
		 BAD_ARG(DAT_INVALID_ARG3), "dat_rmr_bind(triplet's lmr_context is not the LMR's)");
	t = triplet(&m, BUF - 100, 200);
	CHECK_RC(dat_rmr_bind(rmr, m.lmr, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, p.b.ep, ck, 0, &ctx),
		 DAT_ERROR(DAT_LENGTH_ERROR, 0), "dat_rmr_bind(range past the LMR)");
	CHECK_RC(dat_pz_free(p.pz), BAD_STATE(DAT_INVALID_STATE_PZ_IN_USE), "dat_pz_free(PZ of an RMR)");
	CHECK_RC(dat_rmr_free(rmr), DAT_SUCCESS, "dat_rmr_free");
	CHECK_RC(dat_rmr_free(rmr), BAD_HANDLE(DAT_INVALID_HANDLE_RMR), "dat_rmr_free(freed)");
	t = triplet(&m, 0, 4096);
	CHECK_RC(dat_rmr_bind(rmr, m.lmr, &t, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_VA_TYPE_VA, p.b.ep, ck, 0, &ctx),
		 BAD_HANDLE(DAT_INVALID_HANDLE_RMR), "dat_rmr_bind(freed RMR)");
	expect_quiet(p.b.req, QUIET_US, "B's request EVD after the refused binds");
out:
	pair_close(&p);
}

/* ------------------------------------------------------------------ */
/* Handles: NULL, freed, wrong type, not a handle, on every call        */

struct zoo {
	DAT_IA_HANDLE ia;
	DAT_PZ_HANDLE pz, dead_pz;
	DAT_LMR_HANDLE lmr, dead_lmr;
	DAT_EVD_HANDLE evd, cr_evd, conn_evd, dead_evd;
	DAT_CNO_HANDLE cno, dead_cno;
	DAT_EP_HANDLE ep, dead_ep;
	DAT_PSP_HANDLE psp, dead_psp;
	DAT_RSP_HANDLE dead_rsp;
	DAT_SRQ_HANDLE srq, dead_srq;
	DAT_RMR_HANDLE rmr, dead_rmr;
	struct mem m;
};

/* A zoo object that could not be made names its call and its code: the
 * case's one failure line says which of twenty calls it was. */
static int made(DAT_RETURN r, const char *call)
{
	if (r != DAT_SUCCESS)
		fail("%s: %s", call, describe(r));
	return r == DAT_SUCCESS;
}

static int zoo_make(struct zoo *z)
{
	DAT_OS_WAIT_PROXY_AGENT agent = { NULL, NULL };
	DAT_SRQ_ATTR sa = { 8, 1, 0 };
	DAT_EP_HANDLE rsp_ep = NULL;
	int ok = 1;

	memset(z, 0, sizeof(*z));
	z->ia = open_ia(g_ia);
	if (!z->ia)
		return 0;
	z->pz = make_pz(z->ia);
	z->dead_pz = make_pz(z->ia);
	z->evd = make_evd(z->ia, 8, DAT_EVD_DTO_FLAG | DAT_EVD_SOFTWARE_FLAG);
	z->cr_evd = make_evd(z->ia, 8, DAT_EVD_CR_FLAG);
	z->conn_evd = make_evd(z->ia, 8, DAT_EVD_CONNECTION_FLAG);
	z->dead_evd = make_evd(z->ia, 8, DAT_EVD_SOFTWARE_FLAG);
	ok &= z->pz && z->dead_pz && z->evd && z->cr_evd && z->conn_evd && z->dead_evd;
	if (!ok)
		return 0;
	ok &= mem_reg(z->ia, z->pz, BUF, DAT_MEM_PRIV_ALL_FLAG, &z->m);
	z->lmr = z->m.lmr;
	ok &= made(CALL(dat_lmr_create(z->ia, DAT_MEM_TYPE_LMR, (DAT_REGION_DESCRIPTION){ .for_lmr_handle = z->lmr }, 4096,
				  z->pz, DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &z->dead_lmr, NULL, NULL, NULL, NULL)), "dat_lmr_create");
	ok &= made(CALL(dat_cno_create(z->ia, agent, &z->cno)), "dat_cno_create");
	ok &= made(CALL(dat_cno_create(z->ia, agent, &z->dead_cno)), "dat_cno_create");
	ok &= made(CALL(dat_ep_create(z->ia, z->pz, z->evd, z->evd, z->conn_evd, NULL, &z->ep)), "dat_ep_create");
	ok &= made(CALL(dat_ep_create(z->ia, z->pz, z->evd, z->evd, z->conn_evd, NULL, &z->dead_ep)), "dat_ep_create");
	ok &= made(CALL(dat_ep_create(z->ia, z->pz, z->evd, z->evd, z->conn_evd, NULL, &rsp_ep)), "dat_ep_create");
	ok &= made(CALL(dat_psp_create(z->ia, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8), z->cr_evd, DAT_PSP_CONSUMER_FLAG,
				  &z->psp)), "dat_psp_create");
	ok &= made(CALL(dat_psp_create(z->ia, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8 + 1), z->cr_evd,
				  DAT_PSP_CONSUMER_FLAG, &z->dead_psp)), "dat_psp_create");
	ok &= made(CALL(dat_rsp_create(z->ia, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8 + 2), rsp_ep, z->cr_evd,
				  &z->dead_rsp)), "dat_rsp_create");
	ok &= made(CALL(dat_srq_create(z->ia, z->pz, &sa, &z->srq)), "dat_srq_create");
	ok &= made(CALL(dat_srq_create(z->ia, z->pz, &sa, &z->dead_srq)), "dat_srq_create");
	ok &= made(CALL(dat_rmr_create(z->pz, &z->rmr)), "dat_rmr_create");
	ok &= made(CALL(dat_rmr_create(z->pz, &z->dead_rmr)), "dat_rmr_create");
	if (!ok) {
		fail("creating one object of every kind failed");
		return 0;
	}
	ok &= CALL(dat_pz_free(z->dead_pz)) == DAT_SUCCESS;
	ok &= CALL(dat_lmr_free(z->dead_lmr)) == DAT_SUCCESS;
	ok &= CALL(dat_evd_free(z->dead_evd)) == DAT_SUCCESS;
	ok &= CALL(dat_cno_free(z->dead_cno)) == DAT_SUCCESS;
	ok &= CALL(dat_ep_free(z->dead_ep)) == DAT_SUCCESS;
	ok &= CALL(dat_psp_free(z->dead_psp)) == DAT_SUCCESS;
	ok &= CALL(dat_rsp_free(z->dead_rsp)) == DAT_SUCCESS;
	ok &= CALL(dat_srq_free(z->dead_srq)) == DAT_SUCCESS;
	ok &= CALL(dat_rmr_free(z->dead_rmr)) == DAT_SUCCESS;
	if (!ok)
		fail("freeing one object of every kind failed");
	return ok;
}

/* The live objects still work after all the misuse. */
static void zoo_check(struct zoo *z)
{
	DAT_PZ_PARAM pq;
	DAT_LMR_PARAM lq;
	DAT_EVD_PARAM eq;
	DAT_CNO_PARAM cq;
	DAT_EP_PARAM epq;
	DAT_PSP_PARAM ppq;
	DAT_SRQ_PARAM sq;
	DAT_RMR_PARAM rq;

	CHECK_RC(dat_pz_query(z->pz, DAT_PZ_FIELD_ALL, &pq), DAT_SUCCESS, "dat_pz_query(live PZ after the misuse)");
	CHECK_RC(dat_lmr_query(z->lmr, DAT_LMR_FIELD_ALL, &lq), DAT_SUCCESS, "dat_lmr_query(live LMR)");
	CHECK_EQ(lq.lmr_context, z->m.lkey, "live LMR's lkey unchanged");
	CHECK_RC(dat_evd_query(z->evd, DAT_EVD_FIELD_ALL, &eq), DAT_SUCCESS, "dat_evd_query(live EVD)");
	CHECK_EQ(eq.evd_qlen, 8, "live EVD's qlen unchanged");
	CHECK_RC(dat_cno_query(z->cno, DAT_CNO_FIELD_ALL, &cq), DAT_SUCCESS, "dat_cno_query(live CNO)");
	CHECK_RC(dat_ep_query(z->ep, DAT_EP_FIELD_ALL, &epq), DAT_SUCCESS, "dat_ep_query(live EP)");
	CHECK_EQ(epq.ep_state, DAT_EP_STATE_UNCONNECTED, "live EP's state unchanged");
	CHECK_RC(dat_psp_query(z->psp, DAT_PSP_FIELD_ALL, &ppq), DAT_SUCCESS, "dat_psp_query(live PSP)");
	CHECK_RC(dat_srq_query(z->srq, DAT_SRQ_FIELD_ALL, &sq), DAT_SUCCESS, "dat_srq_query(live SRQ)");
	CHECK_RC(dat_rmr_query(z->rmr, DAT_RMR_FIELD_ALL, &rq), DAT_SUCCESS, "dat_rmr_query(live RMR)");
}

/*
 * Every call that takes an object handle, with a handle of the wrong kind
 * (w), a freed one of its own kind (d), and NULL: DAT_INVALID_HANDLE with
 * the call's minor.  BH(call-with-H, minor) expands the call three times.
 */
static void case_bad_handles(void)
{
	struct zoo z;
	DAT_PZ_PARAM pq;
	DAT_LMR_PARAM lq;
	DAT_EVD_PARAM eq;
	DAT_CNO_PARAM cq;
	DAT_EP_PARAM epq;
	DAT_PSP_PARAM ppq;
	DAT_RSP_PARAM rq;
	DAT_SRQ_PARAM sq;
	DAT_RMR_PARAM mq;
	DAT_CR_PARAM crq;
	DAT_EVENT ev;
	DAT_COUNT n;
	DAT_EVD_HANDLE evo;
	DAT_EP_STATE st;
	DAT_LMR_TRIPLET t;
	DAT_RMR_TRIPLET rt = { 0, 0, 0 };
	DAT_DTO_COOKIE ck = { .as_64 = 0 };
	DAT_RMR_COOKIE rck = { .as_64 = 0 };
	DAT_RMR_CONTEXT rctx;
	DAT_OS_WAIT_PROXY_AGENT agent = { NULL, NULL };
	DAT_CONTEXT ctx = { .as_64 = 0 };
	DAT_HANDLE_TYPE ht;
	DAT_PZ_HANDLE opz;
	DAT_LMR_HANDLE olmr;
	DAT_RMR_HANDLE ormr;
	DAT_SRQ_ATTR sa = { 8, 1, 0 };
	DAT_SRQ_HANDLE osrq;
	DAT_EP_HANDLE oep;
	DAT_PSP_HANDLE opsp;
	DAT_RSP_HANDLE orsp;
	DAT_CONN_QUAL q;
	struct sockaddr_in self;
	void *data;

	if (!zoo_make(&z) || !self_addr(z.ia, &self))
		goto out;
	t = triplet(&z.m, 0, 64);
	data = z.m.buf;	/* a data buffer: not a handle of anything */
#define BH3(H, W, D, call, minor) do { \
	{ void *H = (W); CHECK_RC(call, BAD_HANDLE(minor), "%s (wrong type)", #call); } \
	{ void *H = (D); CHECK_RC(call, BAD_HANDLE(minor), "%s (freed)", #call); } \
	{ void *H = NULL; CHECK_RC(call, BAD_HANDLE(minor), "%s (NULL)", #call); } \
	if (!g_ref) { void *H = data; CHECK_RC(call, BAD_HANDLE(minor), "%s (a data buffer)", #call); } \
} while (0)
	/* PZ calls */
	BH3(h, z.lmr, z.dead_pz, dat_pz_query(h, DAT_PZ_FIELD_ALL, &pq), DAT_INVALID_HANDLE_PZ);
	BH3(h, z.evd, z.dead_pz, dat_pz_free(h), DAT_INVALID_HANDLE_PZ);
	BH3(h, z.ep, z.dead_pz, dat_rmr_create(h, &ormr), DAT_INVALID_HANDLE_PZ);
	BH3(h, z.cno, z.dead_pz, dat_srq_create(z.ia, h, &sa, &osrq), DAT_INVALID_HANDLE_PZ);
	BH3(h, z.rmr, z.dead_pz, dat_lmr_create(z.ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){ .for_va = data }, 64, h,
						DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &olmr, NULL, NULL, NULL, NULL),
	    DAT_INVALID_HANDLE_PZ);
	/* LMR */
	BH3(h, z.pz, z.dead_lmr, dat_lmr_query(h, DAT_LMR_FIELD_ALL, &lq), DAT_INVALID_HANDLE_LMR);
	BH3(h, z.rmr, z.dead_lmr, dat_lmr_free(h), DAT_INVALID_HANDLE_LMR);
	/* EVD */
	BH3(h, z.cno, z.dead_evd, dat_evd_query(h, DAT_EVD_FIELD_ALL, &eq), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.ep, z.dead_evd, dat_evd_free(h), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.pz, z.dead_evd, dat_evd_dequeue(h, &ev), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.lmr, z.dead_evd, dat_evd_wait(h, 0, 1, &ev, &n), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.srq, z.dead_evd, dat_evd_post_se(h, &ev), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.psp, z.dead_evd, dat_evd_resize(h, 4), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.rmr, z.dead_evd, dat_evd_enable(h), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.cno, z.dead_evd, dat_evd_disable(h), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.ep, z.dead_evd, dat_evd_set_unwaitable(h), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.pz, z.dead_evd, dat_evd_clear_unwaitable(h), DAT_INVALID_HANDLE_EVD_REQUEST);
	BH3(h, z.lmr, z.dead_evd, dat_evd_modify_cno(h, z.cno), DAT_INVALID_HANDLE_EVD_REQUEST);
	/* CNO */
	BH3(h, z.evd, z.dead_cno, dat_cno_query(h, DAT_CNO_FIELD_ALL, &cq), DAT_INVALID_HANDLE_CNO);
	BH3(h, z.pz, z.dead_cno, dat_cno_free(h), DAT_INVALID_HANDLE_CNO);
	BH3(h, z.ep, z.dead_cno, dat_cno_wait(h, 0, &evo), DAT_INVALID_HANDLE_CNO);
	BH3(h, z.lmr, z.dead_cno, dat_cno_modify_agent(h, agent), DAT_INVALID_HANDLE_CNO);
	/* EP */
	BH3(h, z.evd, z.dead_ep, dat_ep_query(h, DAT_EP_FIELD_ALL, &epq), DAT_INVALID_HANDLE_EP);
	BH3(h, z.pz, z.dead_ep, dat_ep_modify(h, DAT_EP_FIELD_EP_ATTR_ALL, &epq), DAT_INVALID_HANDLE_EP);
	BH3(h, z.lmr, z.dead_ep, dat_ep_free(h), DAT_INVALID_HANDLE_EP);
	BH3(h, z.cno, z.dead_ep, dat_ep_connect(h, (DAT_IA_ADDRESS_PTR)&self, 1, SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
	    DAT_INVALID_HANDLE_EP);
	BH3(h, z.psp, z.dead_ep, dat_ep_disconnect(h, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE_EP);
	BH3(h, z.rmr, z.dead_ep, dat_ep_post_send(h, 1, &t, ck, 0), DAT_INVALID_HANDLE_EP);
	BH3(h, z.evd, z.dead_ep, dat_ep_post_recv(h, 1, &t, ck, 0), DAT_INVALID_HANDLE_EP);
	BH3(h, z.pz, z.dead_ep, dat_ep_post_rdma_read(h, 1, &t, ck, &rt, 0), DAT_INVALID_HANDLE_EP);
	BH3(h, z.lmr, z.dead_ep, dat_ep_post_rdma_write(h, 1, &t, ck, &rt, 0), DAT_INVALID_HANDLE_EP);
	BH3(h, z.cno, z.dead_ep, dat_ep_get_status(h, &st, NULL, NULL), DAT_INVALID_HANDLE_EP);
	BH3(h, z.srq, z.dead_ep, dat_ep_reset(h), DAT_INVALID_HANDLE_EP);
	BH3(h, z.psp, z.dead_ep, dat_ep_recv_query(h, &n, &n), DAT_INVALID_HANDLE_EP);
	BH3(h, z.rmr, z.dead_ep, dat_ep_set_watermark(h, 1, 1), DAT_INVALID_HANDLE_EP);
	BH3(h, z.evd, z.dead_ep, dat_rsp_create(z.ia, 1, h, z.cr_evd, &orsp), DAT_INVALID_HANDLE_EP);
	BH3(h, z.pz, z.dead_ep, dat_rmr_bind(z.rmr, z.lmr, &t, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, h, rck, 0,
					     &rctx), DAT_INVALID_HANDLE_EP);
	/* PSP, RSP, CR */
	BH3(h, z.ep, z.dead_psp, dat_psp_query(h, DAT_PSP_FIELD_ALL, &ppq), DAT_INVALID_HANDLE_PSP);
	BH3(h, z.evd, z.dead_psp, dat_psp_free(h), DAT_INVALID_HANDLE_PSP);
	BH3(h, z.psp, z.dead_rsp, dat_rsp_query(h, DAT_RSP_FIELD_ALL, &rq), DAT_INVALID_HANDLE_RSP);
	BH3(h, z.pz, z.dead_rsp, dat_rsp_free(h), DAT_INVALID_HANDLE_RSP);
	BH3(h, z.ep, z.dead_rsp, dat_cr_query(h, DAT_CR_FIELD_ALL, &crq), DAT_INVALID_HANDLE_CR);
	BH3(h, z.psp, z.dead_psp, dat_cr_accept(h, z.ep, 0, NULL), DAT_INVALID_HANDLE_CR);
	BH3(h, z.evd, z.dead_rsp, dat_cr_reject(h, 0, NULL), DAT_INVALID_HANDLE_CR);
	BH3(h, z.lmr, z.dead_ep, dat_cr_handoff(h, 1), DAT_INVALID_HANDLE_CR);
	/* SRQ */
	BH3(h, z.pz, z.dead_srq, dat_srq_query(h, DAT_SRQ_FIELD_ALL, &sq), DAT_INVALID_HANDLE_SRQ);
	BH3(h, z.ep, z.dead_srq, dat_srq_free(h), DAT_INVALID_HANDLE_SRQ);
	BH3(h, z.evd, z.dead_srq, dat_srq_post_recv(h, 1, &t, ck), DAT_INVALID_HANDLE_SRQ);
	BH3(h, z.lmr, z.dead_srq, dat_srq_resize(h, 4), DAT_INVALID_HANDLE_SRQ);
	BH3(h, z.cno, z.dead_srq, dat_srq_set_lw(h, 1), DAT_INVALID_HANDLE_SRQ);
	/* RMR */
	BH3(h, z.lmr, z.dead_rmr, dat_rmr_query(h, DAT_RMR_FIELD_ALL, &mq), DAT_INVALID_HANDLE_RMR);
	BH3(h, z.pz, z.dead_rmr, dat_rmr_free(h), DAT_INVALID_HANDLE_RMR);
	BH3(h, z.lmr, z.dead_rmr, dat_rmr_bind(h, z.lmr, &t, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, z.ep, rck, 0,
					       &rctx), DAT_INVALID_HANDLE_RMR);
	/* calls that take an IA: an object of another kind, or a freed object */
	BH3(h, z.pz, z.dead_pz, dat_pz_create(h, &opz), DAT_INVALID_HANDLE_IA);
	BH3(h, z.evd, z.dead_evd, dat_evd_create(h, 4, NULL, DAT_EVD_SOFTWARE_FLAG, &evo), DAT_INVALID_HANDLE_IA);
	BH3(h, z.cno, z.dead_cno, dat_cno_create(h, agent, (DAT_CNO_HANDLE *)&evo), DAT_INVALID_HANDLE_IA);
	BH3(h, z.ep, z.dead_ep, dat_ep_create(h, z.pz, z.evd, z.evd, z.conn_evd, NULL, &oep), DAT_INVALID_HANDLE_IA);
	BH3(h, z.srq, z.dead_srq, dat_ep_create_with_srq(h, z.pz, z.evd, z.evd, z.conn_evd, z.srq, NULL, &oep),
	    DAT_INVALID_HANDLE_IA);
	BH3(h, z.psp, z.dead_psp, dat_psp_create(h, 7, z.cr_evd, DAT_PSP_CONSUMER_FLAG, &opsp), DAT_INVALID_HANDLE_IA);
	BH3(h, z.psp, z.dead_psp, dat_psp_create_any(h, &q, z.cr_evd, DAT_PSP_CONSUMER_FLAG, &opsp), DAT_INVALID_HANDLE_IA);
	BH3(h, z.rmr, z.dead_rsp, dat_rsp_create(h, 7, z.ep, z.cr_evd, &orsp), DAT_INVALID_HANDLE_IA);
	BH3(h, z.lmr, z.dead_lmr, dat_srq_create(h, z.pz, &sa, &osrq), DAT_INVALID_HANDLE_IA);
	BH3(h, z.rmr, z.dead_rmr, dat_ia_query(h, NULL, 0, NULL, 0, NULL), DAT_INVALID_HANDLE_IA);
	BH3(h, z.lmr, z.dead_lmr, dat_lmr_sync_rdma_read(h, &t, 1), DAT_INVALID_HANDLE_IA);
	BH3(h, z.cno, z.dead_cno, dat_lmr_sync_rdma_write(h, &t, 1), DAT_INVALID_HANDLE_IA);
	BH3(h, z.pz, z.dead_pz, dat_ia_close(h, DAT_CLOSE_ABRUPT_FLAG), DAT_INVALID_HANDLE_IA);
	/* calls that take any handle */
	BH3(h, (void *)((uintptr_t)z.pz + 8), z.dead_pz, dat_get_consumer_context(h, &ctx), DAT_INVALID_HANDLE1);
	BH3(h, (void *)((uintptr_t)z.ep + 8), z.dead_ep, dat_set_consumer_context(h, ctx), DAT_INVALID_HANDLE1);
	BH3(h, (void *)((uintptr_t)z.evd + 8), z.dead_evd, dat_get_handle_type(h, &ht), DAT_INVALID_HANDLE1);
#undef BH3
	zoo_check(&z);
out:
	close_ia(z.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(ABRUPT) of the zoo");
}

/* dat_ep_dup_connect checks its own EP before the model EP's state. */
static void case_dup_connect_bad_handle(void)
{
	struct zoo z;

	if (!zoo_make(&z))
		goto out;
	/* an unconnected model EP */
	CHECK_RC(dat_ep_dup_connect(z.pz, z.ep, SEC, 0, NULL, DAT_QOS_BEST_EFFORT), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
		 "dat_ep_dup_connect(a PZ as the EP, model unconnected)");
	CHECK_RC(dat_ep_dup_connect(NULL, z.ep, SEC, 0, NULL, DAT_QOS_BEST_EFFORT), BAD_HANDLE(DAT_INVALID_HANDLE_EP),
		 "dat_ep_dup_connect(NULL EP)");
	zoo_check(&z);
out:
	close_ia(z.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(zoo)");
}

/* Handles of one IA given to calls on another. */
static void case_other_ia_handles(void)
{
	struct zoo z;
	DAT_IA_HANDLE ia2 = NULL;
	DAT_EP_HANDLE ep = NULL;
	DAT_LMR_HANDLE l = NULL;
	DAT_SRQ_HANDLE s = NULL;
	DAT_SRQ_ATTR sa = { 8, 1, 0 };
	DAT_RMR_CONTEXT rctx;
	DAT_RMR_COOKIE rck = { .as_64 = 1 };
	DAT_LMR_TRIPLET t;

	if (!zoo_make(&z))
		goto out;
	ia2 = open_ia(g_ia2);
	if (!ia2)
		goto out;
	DAT_PZ_HANDLE pz2 = make_pz(ia2);
	DAT_EVD_HANDLE evd2 = make_evd(ia2, 8, DAT_EVD_DTO_FLAG);
	DAT_EVD_HANDLE conn2 = make_evd(ia2, 8, DAT_EVD_CONNECTION_FLAG);
	if (!pz2 || !evd2 || !conn2)
		goto out;
	CHECK_RC(dat_ep_create(z.ia, pz2, z.evd, z.evd, z.conn_evd, NULL, &ep), BAD_HANDLE(DAT_INVALID_HANDLE_PZ),
		 "dat_ep_create(PZ of another IA)");
	CHECK_RC(dat_lmr_create(z.ia, DAT_MEM_TYPE_VIRTUAL, (DAT_REGION_DESCRIPTION){ .for_va = z.m.buf }, 4096, pz2,
				DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &l, NULL, NULL, NULL, NULL),
		 BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_lmr_create(PZ of another IA)");
	CHECK_RC(dat_srq_create(z.ia, pz2, &sa, &s), BAD_HANDLE(DAT_INVALID_HANDLE_PZ), "dat_srq_create(PZ of another IA)");
	CHECK_RC(dat_ep_create_with_srq(ia2, pz2, evd2, evd2, conn2, z.srq, NULL, &ep), BAD_HANDLE(DAT_INVALID_HANDLE_SRQ),
		 "dat_ep_create_with_srq(SRQ of another IA)");
	t = triplet(&z.m, 0, 64);
	CHECK_RC(dat_rmr_bind(z.rmr, z.lmr, &t, DAT_MEM_PRIV_REMOTE_READ_FLAG, DAT_VA_TYPE_VA, z.ep, rck, 0, &rctx),
		 BAD_STATE(DAT_INVALID_STATE_EP_UNCONNECTED), "dat_rmr_bind(unconnected EP; same IA)");
	/* the other IA and its objects are unharmed */
	CHECK_RC(dat_ep_create(ia2, pz2, evd2, evd2, conn2, NULL, &ep), DAT_SUCCESS, "dat_ep_create on the other IA");
	zoo_check(&z);
out:
	close_ia(ia2, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(second IA)");
	close_ia(z.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(zoo)");
}

/* EVDs, EPs and CNOs of another IA (each IA is its own verbs context). */
static void other_ia_objects(int ep_evd)
{
	struct zoo z;
	DAT_IA_HANDLE ia2 = NULL;
	DAT_EP_HANDLE ep = NULL;
	DAT_EVD_HANDLE e = NULL;
	DAT_PSP_HANDLE psp = NULL;
	DAT_RSP_HANDLE rsp = NULL;
	DAT_CNO_HANDLE cno2 = NULL;
	DAT_OS_WAIT_PROXY_AGENT agent = { NULL, NULL };

	if (!zoo_make(&z))
		goto out;
	ia2 = open_ia(g_ia2);
	if (!ia2)
		goto out;
	DAT_PZ_HANDLE pz2 = make_pz(ia2);
	DAT_EVD_HANDLE evd2 = make_evd(ia2, 8, DAT_EVD_DTO_FLAG);
	DAT_EVD_HANDLE conn2 = make_evd(ia2, 8, DAT_EVD_CONNECTION_FLAG);
	DAT_EVD_HANDLE cr2 = make_evd(ia2, 8, DAT_EVD_CR_FLAG);
	DAT_EP_HANDLE ep2 = NULL;
	if (!pz2 || !evd2 || !conn2 || !cr2 || CALL(dat_cno_create(ia2, agent, &cno2)) != DAT_SUCCESS ||
	    CALL(dat_ep_create(ia2, pz2, evd2, evd2, conn2, NULL, &ep2)) != DAT_SUCCESS)
		goto out;
	if (ep_evd) {
		CHECK_RC(dat_ep_create(z.ia, z.pz, evd2, z.evd, z.conn_evd, NULL, &ep), BAD_HANDLE(DAT_INVALID_HANDLE_EVD_RECV),
			 "dat_ep_create(recv EVD of another IA)");
		CHECK_RC(dat_ep_create(z.ia, z.pz, z.evd, evd2, z.conn_evd, NULL, &ep),
			 BAD_HANDLE(DAT_INVALID_HANDLE_EVD_REQUEST), "dat_ep_create(request EVD of another IA)");
		/* A connection EVD is a software queue: DAPL takes one of another
		 * IA, and dapltest's limit test shares one across IAs. */
		CHECK_RC(dat_ep_create(z.ia, z.pz, z.evd, z.evd, conn2, NULL, &ep), DAT_SUCCESS,
			 "dat_ep_create(connect EVD of another IA)");
		if (ep)
			CHECK_RC(dat_ep_free(ep), DAT_SUCCESS, "dat_ep_free");
		ep = NULL;
		CHECK_RC(dat_evd_create(z.ia, 4, cno2, DAT_EVD_SOFTWARE_FLAG, &e), BAD_HANDLE(DAT_INVALID_HANDLE_CNO),
			 "dat_evd_create(CNO of another IA)");
		zoo_check(&z);
		goto out;
	}
	CHECK_RC(dat_psp_create(z.ia, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8 + 3), cr2, DAT_PSP_CONSUMER_FLAG, &psp),
		 BAD_HANDLE(DAT_INVALID_HANDLE_EVD_CR), "dat_psp_create(CR EVD of another IA)");
	CHECK_RC(dat_rsp_create(z.ia, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8 + 4), ep2, z.cr_evd, &rsp),
		 BAD_HANDLE(DAT_INVALID_HANDLE_EP), "dat_rsp_create(EP of another IA)");
	CHECK_RC(dat_rsp_create(z.ia, (DAT_CONN_QUAL)(g_qual_base + g_case_index * 8 + 5), z.ep, cr2, &rsp),
		 BAD_HANDLE(DAT_INVALID_HANDLE_EVD_CR), "dat_rsp_create(CR EVD of another IA)");
	zoo_check(&z);
out:
	close_ia(ia2, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(second IA)");
	close_ia(z.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(zoo)");
}

static void case_other_ia_psp_rsp(void) { other_ia_objects(0); }
static void case_other_ia_ep_evd(void) { other_ia_objects(1); }

/* Context and handle type on every kind of object (success paths). */
static void case_generic_calls(void)
{
	struct zoo z;
	struct { void *h; DAT_HANDLE_TYPE t; } kinds[9];
	DAT_CONTEXT c, got;
	DAT_HANDLE_TYPE ht;
	int n = 0;

	if (!zoo_make(&z))
		goto out;
	kinds[n].h = z.ia; kinds[n++].t = DAT_HANDLE_TYPE_IA;
	kinds[n].h = z.pz; kinds[n++].t = DAT_HANDLE_TYPE_PZ;
	kinds[n].h = z.lmr; kinds[n++].t = DAT_HANDLE_TYPE_LMR;
	kinds[n].h = z.evd; kinds[n++].t = DAT_HANDLE_TYPE_EVD;
	kinds[n].h = z.cno; kinds[n++].t = DAT_HANDLE_TYPE_CNO;
	kinds[n].h = z.ep; kinds[n++].t = DAT_HANDLE_TYPE_EP;
	kinds[n].h = z.psp; kinds[n++].t = DAT_HANDLE_TYPE_PSP;
	kinds[n].h = z.srq; kinds[n++].t = DAT_HANDLE_TYPE_SRQ;
	kinds[n].h = z.rmr; kinds[n++].t = DAT_HANDLE_TYPE_RMR;
	for (int i = 0; i < n; i++) {
		c.as_64 = 0xabc000 + (uint64_t)i;
		CHECK_RC(dat_set_consumer_context(kinds[i].h, c), DAT_SUCCESS, "dat_set_consumer_context(kind %d)", (int)kinds[i].t);
		ht = (DAT_HANDLE_TYPE)99;
		CHECK_RC(dat_get_handle_type(kinds[i].h, &ht), DAT_SUCCESS, "dat_get_handle_type(kind %d)", (int)kinds[i].t);
		CHECK_EQ(ht, kinds[i].t, "handle type");
	}
	for (int i = 0; i < n; i++) {
		got.as_64 = 0;
		CHECK_RC(dat_get_consumer_context(kinds[i].h, &got), DAT_SUCCESS, "dat_get_consumer_context(kind %d)",
			 (int)kinds[i].t);
		CHECK_EQ(got.as_64, 0xabc000 + (uint64_t)i, "context round trip (no object overwrote another's)");
	}
	CHECK_RC(dat_get_consumer_context(z.ep, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_get_consumer_context(NULL out)");
	CHECK_RC(dat_get_handle_type(z.ep, NULL), BAD_ARG(DAT_INVALID_ARG2), "dat_get_handle_type(NULL out)");
out:
	close_ia(z.ia, DAT_CLOSE_ABRUPT_FLAG, "dat_ia_close(zoo)");
}

static void case_extension_op(void)
{
	DAT_IA_HANDLE ia = open_ia(g_ia);
	DAT_RETURN r;

	if (!ia)
		return;
	CHECK_RC(dat_extension_op(NULL, 0), BAD_HANDLE(DAT_INVALID_HANDLE1), "dat_extension_op(NULL handle)");
	/* an operation number no extension defines */
	r = dat_extension_op(ia, 0x7ffe);
	if (DAT_GET_TYPE(r) != DAT_NOT_IMPLEMENTED && DAT_GET_TYPE(r) != DAT_INVALID_PARAMETER)
		fail("dat_extension_op(IA, op 0x7ffe): expected DAT_NOT_IMPLEMENTED or DAT_INVALID_PARAMETER, got %s",
		     describe(r));
	else {
		cover("dat_extension_op");
		g_stats.errors++;
	}
	/* dat-fuzz finding: a freed handle is refused before the op is looked at
	 * (not asked of the reference, which would read the freed object). */
	if (!g_ref) {
		DAT_PZ_HANDLE pz = NULL;

		if (CALL(dat_pz_create(ia, &pz)) == DAT_SUCCESS && CALL(dat_pz_free(pz)) == DAT_SUCCESS) {
			CHECK_RC(dat_extension_op(pz, 0x7ffe), BAD_HANDLE(DAT_INVALID_HANDLE1),
				 "dat_extension_op(freed PZ, unknown op)");
			CHECK_RC(dat_extension_op(pz, DAT_IB_COLLECTIVE_BARRIER_OP), BAD_HANDLE(DAT_INVALID_HANDLE1),
				 "dat_extension_op(freed PZ, collective barrier)");
		}
	}
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* ep_idle_status: dat_ep_get_status says a queue is idle once what it
 * will report has been dequeued: a receive until its completion is taken,
 * a signaled send likewise; an unsignaled send, which never reports, does
 * not keep the request queue busy once a later signaled one is reaped (it
 * did for good before stop 41); dat_ep_recv_query counts the same receives. */
static void case_ep_idle_status(void)
{
	DAT_EP_ATTR attr = small_attr(8, 2);
	DAT_DTO_COMPLETION_EVENT_DATA dd;
	DAT_BOOLEAN ri = 7, qi = 7;
	DAT_COUNT nb = -1, bs = 0;
	struct pair p;
	struct mem a, b;
	DAT_LMR_TRIPLET t;
	DAT_DTO_COOKIE ck = { .as_64 = 1 };

	if (!pair_setup(&p, 16, &attr) || !pair_connect(&p) || !mem_reg(p.ia, p.pz, 4096, DAT_MEM_PRIV_ALL_FLAG, &a) ||
	    !mem_reg(p.ib, p.pzb, 4096, DAT_MEM_PRIV_ALL_FLAG, &b))
		goto out;
	t = triplet(&b, 0, 64);
	CHECK_RC(dat_ep_get_status(p.b.ep, NULL, &ri, &qi), DAT_SUCCESS, "dat_ep_get_status(B, nothing posted)");
	CHECK(ri == DAT_TRUE && qi == DAT_TRUE, "nothing posted: recv_idle %d, request_idle %d, expected 1 1", ri, qi);
	CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_post_recv");
	CHECK_RC(dat_ep_get_status(p.b.ep, NULL, &ri, NULL), DAT_SUCCESS, "dat_ep_get_status(B, a receive posted)");
	CHECK_EQ(ri, DAT_FALSE, "recv_idle with a receive posted");
	CHECK_RC(dat_ep_recv_query(p.b.ep, &nb, &bs), DAT_SUCCESS, "dat_ep_recv_query(one posted)");
	CHECK_EQ(nb, 1, "recv_query with a receive posted");
	t = triplet(&a, 0, 64);
	CHECK_RC(dat_ep_post_send(p.a.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_post_send");
	/* The receive completes; until B dequeues it, it is still B's. */
	if (!want_dto(p.a.req, WAIT_US, &dd, "the signaled send"))
		goto out;
	CHECK_RC(dat_ep_get_status(p.a.ep, NULL, NULL, &qi), DAT_SUCCESS, "dat_ep_get_status(A, send reaped)");
	CHECK_EQ(qi, DAT_TRUE, "request_idle once the send's completion is dequeued");
	CHECK_RC(dat_ep_get_status(p.b.ep, NULL, &ri, NULL), DAT_SUCCESS, "dat_ep_get_status(B, receive not yet dequeued)");
	CHECK_EQ(ri, DAT_FALSE, "recv_idle before the receive's completion is dequeued");
	if (!want_dto(p.b.recv, WAIT_US, &dd, "the receive"))
		goto out;
	CHECK_RC(dat_ep_get_status(p.b.ep, NULL, &ri, NULL), DAT_SUCCESS, "dat_ep_get_status(B, receive dequeued)");
	CHECK_EQ(ri, DAT_TRUE, "recv_idle once the receive's completion is dequeued");
	CHECK_RC(dat_ep_recv_query(p.b.ep, &nb, &bs), DAT_SUCCESS, "dat_ep_recv_query(none posted)");
	CHECK_EQ(nb, 0, "recv_query after the receive was dequeued");
	/* An unsignaled send, then a signaled one, into two receives. */
	t = triplet(&b, 0, 64);
	ck.as_64 = 2;
	CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_post_recv 2");
	t = triplet(&b, 64, 64);
	ck.as_64 = 3;
	CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_post_recv 3");
	t = triplet(&a, 0, 64);
	CHECK_RC(dat_ep_post_send(p.a.ep, 1, &t, ck, DAT_COMPLETION_SUPPRESS_FLAG), DAT_SUCCESS, "dat_ep_post_send(unsignaled)");
	ck.as_64 = 4;
	CHECK_RC(dat_ep_post_send(p.a.ep, 1, &t, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "dat_ep_post_send(signaled)");
	if (!want_dto(p.a.req, WAIT_US, &dd, "the signaled send after an unsignaled one"))
		goto out;
	CHECK_EQ(dd.user_cookie.as_64, 4, "the signaled send's cookie");
	CHECK_RC(dat_ep_get_status(p.a.ep, NULL, NULL, &qi), DAT_SUCCESS, "dat_ep_get_status(A, both sends done)");
	CHECK_EQ(qi, DAT_TRUE, "request_idle after an unsignaled send and a later signaled one, reaped");
	if (!want_dto(p.b.recv, WAIT_US, &dd, "receive 2") || !want_dto(p.b.recv, WAIT_US, &dd, "receive 3"))
		goto out;
	CHECK_RC(dat_ep_recv_query(p.b.ep, &nb, &bs), DAT_SUCCESS, "dat_ep_recv_query(both dequeued)");
	CHECK_EQ(nb, 0, "recv_query after both receives were dequeued");
	g_stats.ops += 3;
out:
	pair_close(&p);
}

const struct tcase errors_cases[] = {
	CASE("errors", registry_calls, 1),
	CASE("errors", ia_open_close, 1),
	CASE("errors", pz_lmr_errors, 1),
	CASE("errors", evd_errors, 1),
	CASE("errors", cno_errors, 1),
	CASE("errors", cno_agent, 1),
	CASE("errors", ep_errors, 1),
	CASE("errors", ep_connected, 1),
	CASE("errors", post_disconnected_minor, 1),
	CASE("errors", send_after_accept, 1),
	CASE("errors", cr_errors, 1),
	CASE("errors", cr_handoff, 1),
	CASE("errors", psp_rsp_errors, 1),
	CASE("errors", srq_errors, 1),
	CASE("errors", rmr_errors, 1),
	CASE("errors", bad_handles, 1),
	CASE("errors", dup_connect_bad_handle, 1),
	CASE("errors", other_ia_handles, 1),
	CASE("errors", other_ia_psp_rsp, 1),
	CASE("errors", other_ia_ep_evd, 1),
	CASE("errors", generic_calls, 1),
	CASE("errors", extension_op, 1),
	CASE("errors", ep_idle_status, 0),
};
const int errors_ncases = sizeof(errors_cases) / sizeof(errors_cases[0]);
