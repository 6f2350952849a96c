/*
 * input.c - input that is not a program's: private data at and over the
 * limits, IA names of absurd length, a dat.conf with a maximal IA name.
 * (The dat.conf parser itself is fuzzed by dat-registry/tests/conf_fuzz.rs.)
 */
#include "harness.h"

#include <limits.h>
#include <sys/mman.h>

/* The provider's limits (README): connect 56, accept 196, reject 144. */
#define PD_CONNECT 56
#define PD_ACCEPT  196
#define PD_REJECT  144

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

/* Connect with `csize` bytes; the CR must carry exactly them; then accept
 * with `asize` bytes (or reject with `rsize`, if >= 0). */
static void pdata_round(struct pair *p, int csize, int asize, int rsize)
{
	unsigned char cd[PD_CONNECT + 8], ad[PD_ACCEPT + 8], rd[PD_REJECT + 8];
	struct sockaddr_in self;
	DAT_EVENT ev;
	DAT_CR_PARAM cp;
	DAT_CR_HANDLE cr;

	pattern(cd, sizeof(cd), 0x11);
	pattern(ad, sizeof(ad), 0x22);
	pattern(rd, sizeof(rd), 0x33);
	if (!self_addr(p->ia, &self))
		return;
	CHECK_RC(dat_ep_connect(p->a.ep, (DAT_IA_ADDRESS_PTR)&self, p->qual, 20 * SEC, csize, cd, DAT_QOS_BEST_EFFORT, 0),
		 DAT_SUCCESS, "dat_ep_connect(%d bytes of private data)", csize);
	if (!expect_ev(p->cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "request"))
		return;
	cr = ev.event_data.cr_arrival_event_data.cr_handle;
	memset(&cp, 0, sizeof(cp));
	CHECK_RC(dat_cr_query(cr, DAT_CR_FIELD_ALL, &cp), DAT_SUCCESS, "dat_cr_query");
	/* the wire may pad the REQ's private data; the consumer's bytes come first, the rest are zero */
	CHECK(cp.private_data_size >= csize, "CR private data: %d bytes, %d sent", cp.private_data_size, csize);
	if (cp.private_data_size >= csize && csize > 0) {
		CHECK(cp.private_data && memcmp(cp.private_data, cd, (size_t)csize) == 0,
		      "CR private data differs from the %d bytes sent", csize);
		g_stats.bytes += csize;
	}
	if (rsize >= 0) {
		CHECK_RC(dat_cr_reject(cr, rsize, rd), DAT_SUCCESS, "dat_cr_reject(%d bytes)", rsize);
		if (expect_ev(p->a.conn, WAIT_US, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev, "rejected")) {
			DAT_CONNECTION_EVENT_DATA *d = &ev.event_data.connect_event_data;
			CHECK(d->private_data_size >= rsize, "reject private data: %d bytes, %d sent", d->private_data_size, rsize);
			if (d->private_data_size >= rsize && rsize > 0) {
				CHECK(d->private_data && memcmp(d->private_data, rd, (size_t)rsize) == 0,
				      "reject private data differs from the %d bytes sent", rsize);
				g_stats.bytes += rsize;
			}
		}
		return;
	}
	CHECK_RC(dat_cr_accept(cr, p->b.ep, asize, ad), DAT_SUCCESS, "dat_cr_accept(%d bytes)", asize);
	if (expect_ev(p->a.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "established")) {
		DAT_CONNECTION_EVENT_DATA *d = &ev.event_data.connect_event_data;
		CHECK(d->private_data_size >= asize, "accept private data: %d bytes, %d sent", d->private_data_size, asize);
		if (d->private_data_size >= asize && asize > 0) {
			CHECK(d->private_data && memcmp(d->private_data, ad, (size_t)asize) == 0,
			      "accept private data differs from the %d bytes sent", asize);
			g_stats.bytes += asize;
		}
	}
	expect_ev(p->b.conn, WAIT_US, DAT_CONNECTION_EVENT_ESTABLISHED, &ev, "B established");
}

static void case_private_data_limits(void)
{
	struct pair p;
	unsigned char big[512];
	struct sockaddr_in self;

	pattern(big, sizeof(big), 0x44);
	if (!pair_setup(&p, 16, NULL) || !self_addr(p.ia, &self))
		goto out;
	/* over the limits: refused before anything goes on the wire */
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, SEC, PD_CONNECT + 1, big, DAT_QOS_BEST_EFFORT, 0),
		 BAD_ARG(DAT_INVALID_ARG5), "dat_ep_connect(%d bytes)", PD_CONNECT + 1);
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, SEC, INT_MAX, big, DAT_QOS_BEST_EFFORT, 0),
		 BAD_ARG(DAT_INVALID_ARG5), "dat_ep_connect(INT_MAX bytes)");
	CHECK_RC(dat_ep_connect(p.a.ep, (DAT_IA_ADDRESS_PTR)&self, p.qual, SEC, INT_MIN, big, DAT_QOS_BEST_EFFORT, 0),
		 BAD_ARG(DAT_INVALID_ARG5), "dat_ep_connect(INT_MIN bytes)");
	CHECK_RC(dat_psp_create(p.ia, p.qual, p.cr, DAT_PSP_CONSUMER_FLAG, &p.psp), DAT_SUCCESS, "dat_psp_create");
	/* at the limits: every byte arrives */
	pdata_round(&p, PD_CONNECT, PD_ACCEPT, -1);
	/* over the accept and reject limits, on a live CR */
	{
		DAT_EP_HANDLE c = NULL;
		DAT_EP_ATTR attr = small_attr(8, 1);
		DAT_EVENT ev;
		if (CALL(dat_ep_create(p.ia, p.pz, p.a.recv, p.a.req, p.a.conn, &attr, &c)) == DAT_SUCCESS) {
			CHECK_RC(dat_ep_connect(c, (DAT_IA_ADDRESS_PTR)&self, p.qual, 20 * SEC, 0, NULL, DAT_QOS_BEST_EFFORT, 0),
				 DAT_SUCCESS, "dat_ep_connect(C)");
			if (expect_ev(p.cr, WAIT_US, DAT_CONNECTION_REQUEST_EVENT, &ev, "C's request")) {
				DAT_CR_HANDLE cr = ev.event_data.cr_arrival_event_data.cr_handle;
				CHECK_RC(dat_cr_accept(cr, c, PD_ACCEPT + 1, big), BAD_ARG(DAT_INVALID_ARG3),
					 "dat_cr_accept(%d bytes)", PD_ACCEPT + 1);
				CHECK_RC(dat_cr_accept(cr, c, INT_MAX, big), BAD_ARG(DAT_INVALID_ARG3), "dat_cr_accept(INT_MAX)");
				CHECK_RC(dat_cr_reject(cr, PD_REJECT + 1, big), BAD_ARG(DAT_INVALID_ARG2),
					 "dat_cr_reject(%d bytes)", PD_REJECT + 1);
				CHECK_RC(dat_cr_reject(cr, INT_MIN, big), BAD_ARG(DAT_INVALID_ARG2), "dat_cr_reject(INT_MIN)");
				/* at the reject limit */
				CHECK_RC(dat_cr_reject(cr, PD_REJECT, big), DAT_SUCCESS, "dat_cr_reject(%d bytes)", PD_REJECT);
				if (expect_ev(p.a.conn, WAIT_US, DAT_CONNECTION_EVENT_PEER_REJECTED, &ev, "C rejected")) {
					DAT_CONNECTION_EVENT_DATA *d = &ev.event_data.connect_event_data;
					CHECK(d->private_data_size >= PD_REJECT && d->private_data &&
					      memcmp(d->private_data, big, PD_REJECT) == 0,
					      "reject private data at the limit: %d bytes, not the %d sent", d->private_data_size,
					      PD_REJECT);
					g_stats.bytes += PD_REJECT;
				}
			}
		}
	}
out:
	pair_close(&p);
}

/* IA names of every absurd length: never a crash, never a wrong IA. */
static void case_ia_name_lengths(void)
{
	static const size_t lens[] = { 0, 1, 255, 256, 257, 4096, 1 << 20 };
	DAT_IA_HANDLE ia = (DAT_IA_HANDLE)(uintptr_t)0x5a5a;
	DAT_EVD_HANDLE evd = NULL;
	char *name;

	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		name = malloc(lens[k] + 1);
		memset(name, 'x', lens[k]);
		name[lens[k]] = 0;
		CHECK_RC(dat_ia_open((DAT_NAME_PTR)name, 8, &evd, &ia), NOT_FOUND(DAT_NAME_NOT_REGISTERED),
			 "dat_ia_open(name of %zu bytes)", lens[k]);
		/* the real name with junk after it */
		if (lens[k] > 20) {
			memcpy(name, g_ia, strlen(g_ia));
			CHECK_RC(dat_ia_open((DAT_NAME_PTR)name, 8, &evd, &ia), NOT_FOUND(DAT_NAME_NOT_REGISTERED),
				 "dat_ia_open(\"%s\" + %zu bytes of junk)", g_ia, lens[k] - strlen(g_ia));
		}
		free(name);
	}
	CHECK(ia == (DAT_IA_HANDLE)(uintptr_t)0x5a5a, "a failed dat_ia_open wrote *ia (%p)", (void *)ia);
	if (!g_ref) {
		/* a name with no NUL before an unmapped page: the registry reads at most 256 bytes */
		long pg = sysconf(_SC_PAGESIZE);
		char *two = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (two != MAP_FAILED) {
			munmap(two + pg, (size_t)pg);
			memset(two, 'y', (size_t)pg);
			CHECK_RC(dat_ia_open((DAT_NAME_PTR)(two + pg - 300), 8, &evd, &ia), NOT_FOUND(DAT_NAME_NOT_REGISTERED),
				 "dat_ia_open(300 bytes without NUL before an unmapped page)");
			munmap(two, (size_t)pg);
		}
		/* not UTF-8 */
		CHECK_RC(dat_ia_open((DAT_NAME_PTR)"\xff\xfe\x80ia", 8, &evd, &ia), NOT_FOUND(DAT_NAME_NOT_REGISTERED),
			 "dat_ia_open(invalid UTF-8)");
	}
	/* the real one still opens */
	ia = open_ia(g_ia);
	close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
}

/* A dat.conf whose IA name has the most bytes the format allows (255):
 * it opens and works.  Our registry reads DAT_OVERRIDE at its first call. */
static void case_longest_ia_name(void)
{
	char path[PATH_MAX], name[256], lib[PATH_MAX];
	const char *conf = getenv("DAT_OVERRIDE");
	FILE *in, *out;
	char line[2048];
	DAT_IA_HANDLE ia;

	if (!conf || !(in = fopen(conf, "r"))) {
		fail("DAT_OVERRIDE not readable");
		return;
	}
	lib[0] = 0;
	while (fgets(line, sizeof(line), in)) {
		char n[256], l[PATH_MAX];
		if (sscanf(line, "%255s %*s %*s %*s %4095s", n, l) == 2 && strcmp(n, g_ia) == 0)
			snprintf(lib, sizeof(lib), "%s", l);
	}
	fclose(in);
	if (!lib[0]) {
		fail("no entry for %s in %s", g_ia, conf);
		return;
	}
	memset(name, 'L', 255);
	name[255] = 0;
	snprintf(path, sizeof(path), "/tmp/conformance-longname-%d.conf", (int)getpid());
	out = fopen(path, "w");
	if (!out) {
		fail("cannot write %s", path);
		return;
	}
	fprintf(out, "# 255-byte IA name\n%s u2.0 nonthreadsafe default %s dapl.2.0 \"10.0.0.1 0\" \"\"\n", name, lib);
	fprintf(out, "%sX u2.0 nonthreadsafe default %s dapl.2.0 \"10.0.0.1 0\" \"\"\n", name, lib);
	fclose(out);
	setenv("DAT_OVERRIDE", path, 1);
	ia = open_ia(name);
	if (ia) {
		DAT_PZ_HANDLE pz = make_pz(ia);
		if (pz)
			CHECK_RC(dat_pz_free(pz), DAT_SUCCESS, "dat_pz_free on the 255-byte-named IA");
		close_ia(ia, DAT_CLOSE_GRACEFUL_FLAG, "dat_ia_close");
	}
	{
		DAT_PROVIDER_INFO infos[4], *list[4];
		DAT_COUNT n = 0;
		for (int i = 0; i < 4; i++)
			list[i] = &infos[i];
		CHECK_RC(dat_registry_list_providers(4, &n, list), DAT_SUCCESS, "dat_registry_list_providers");
		CHECK(n == 1, "dat_registry_list_providers: %d entries, expected 1 (the 256-byte name is refused)", n);
		CHECK(n < 1 || strcmp(infos[0].ia_name, name) == 0, "listed IA name is not the 255-byte one");
	}
	unlink(path);
}

const struct tcase input_cases[] = {
	CASE("input", private_data_limits, 1),
	CASE("input", ia_name_lengths, 1),
	CASE("input", longest_ia_name, 0),
};
const int input_ncases = sizeof(input_cases) / sizeof(input_cases[0]);
