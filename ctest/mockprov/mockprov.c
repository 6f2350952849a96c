/*
 * mockprov.c - a test-fixture uDAPL provider (libdatmock.so.2).
 *
 * Not a product: it exists so ctest/registry_test can drive the registry
 * (libdat2) end to end without RDMA hardware.  Every object is a heap struct
 * whose first member is the DAT_PROVIDER pointer, as DAT requires, followed
 * by a magic word and a type tag.  Closed/freed objects are poisoned (first
 * word NULL, magic DEAD) and deliberately leaked, so a registry that forwards
 * a stale handle is detected (mock_dead_calls) instead of touching freed
 * memory.
 *
 * Behaviour chosen by the dat.conf ia_params string of an entry:
 *   "noregister"  dat_provider_init does not call dat_registry_add_provider
 *   "failopen"    ia_open fails with DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY
 *   anything else normal
 *
 * Counters are plain exported globals, read by the test with dlsym and
 * updated here with __atomic builtins.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#define EXPORT __attribute__((visibility("default")))

/* The public headers leave this to implementations; same layout as theirs. */
#ifndef DAT_ERROR
#define DAT_ERROR(type, subtype) ((DAT_RETURN)(DAT_CLASS_ERROR | (type) | (subtype)))
#endif

#define MOCK_MAGIC 0x4d4f434bu /* "MOCK" */
#define MOCK_DEAD  0xdeadbeefu

/* Extension operations understood by handle_extendedop_func. */
#define MOCK_OP_SUM        1 /* (int n, int v1..vn, int *sum)                    */
#define MOCK_OP_WHO        2 /* (DAT_HANDLE *out): writes the handle it received */
#define MOCK_OP_MIXED      3 /* (double, long long, const char *, char *buf, int len) */

EXPORT int mock_init_calls;
EXPORT int mock_fini_calls;
EXPORT int mock_registered;     /* registrations currently held */
EXPORT int mock_open_ias;
EXPORT int mock_open_pzs;
EXPORT int mock_dead_calls;     /* calls that arrived with a closed/freed object */
EXPORT int mock_bad_handle_calls; /* calls with a handle that is not ours at all */
EXPORT void *volatile mock_last_query_handle;
EXPORT int mock_add_failures;   /* dat_registry_add_provider returned an error */

struct mock_obj {
	const DAT_PROVIDER *provider; /* must stay first */
	uint32_t magic;
	DAT_HANDLE_TYPE type;
	DAT_CONTEXT context;
	struct mock_obj *ia;          /* owning IA for a PZ */
	char name[DAT_NAME_MAX_LENGTH];
};

static void inc(int *c) { __atomic_add_fetch(c, 1, __ATOMIC_SEQ_CST); }
static void dec(int *c) { __atomic_sub_fetch(c, 1, __ATOMIC_SEQ_CST); }

/* ia_params per dat.conf entry, recorded by dat_provider_init. */
#define MAX_ENTRIES 64
static struct {
	char name[DAT_NAME_MAX_LENGTH];
	char params[128];
	DAT_PROVIDER_INFO info;
} entries[MAX_ENTRIES];
static int n_entries;
static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember_params(const DAT_PROVIDER_INFO *info, const char *params)
{
	int i;

	const char *name = info->ia_name;

	pthread_mutex_lock(&entries_lock);
	for (i = 0; i < n_entries; i++)
		if (strcmp(entries[i].name, name) == 0)
			break;
	if (i == n_entries && n_entries < MAX_ENTRIES)
		n_entries++;
	if (i < MAX_ENTRIES) {
		snprintf(entries[i].name, sizeof(entries[i].name), "%s", name);
		snprintf(entries[i].params, sizeof(entries[i].params), "%s", params ? params : "");
		entries[i].info = *info;
	}
	pthread_mutex_unlock(&entries_lock);
}

/* The version and thread safety dat_provider_init was given for `name`. */
static void info_of(const char *name, DAT_PROVIDER_ATTR *attr)
{
	pthread_mutex_lock(&entries_lock);
	for (int i = 0; i < n_entries; i++)
		if (strcmp(entries[i].name, name) == 0) {
			attr->dapl_version_major = entries[i].info.dapl_version_major;
			attr->dapl_version_minor = entries[i].info.dapl_version_minor;
			attr->is_thread_safe = entries[i].info.is_thread_safe;
			break;
		}
	pthread_mutex_unlock(&entries_lock);
}

static int params_are(const char *name, const char *want)
{
	int i, r = 0;

	pthread_mutex_lock(&entries_lock);
	for (i = 0; i < n_entries; i++)
		if (strcmp(entries[i].name, name) == 0) {
			r = strcmp(entries[i].params, want) == 0;
			break;
		}
	pthread_mutex_unlock(&entries_lock);
	return r;
}

EXPORT DAT_PROVIDER mock_provider_table;

/* Our own live object of the given type, or NULL (counting why). */
static struct mock_obj *own(DAT_HANDLE h, DAT_HANDLE_TYPE type, int any_type)
{
	struct mock_obj *o = (struct mock_obj *)h;

	if (o == NULL || ((uintptr_t)o & 7) != 0 || (uintptr_t)o < 0x10000) {
		inc(&mock_bad_handle_calls);
		return NULL;
	}
	if (o->magic == MOCK_DEAD) {
		inc(&mock_dead_calls);
		return NULL;
	}
	if (o->magic != MOCK_MAGIC || o->provider != &mock_provider_table ||
	    (!any_type && o->type != type)) {
		inc(&mock_bad_handle_calls);
		return NULL;
	}
	return o;
}

static struct mock_obj *new_obj(DAT_HANDLE_TYPE type)
{
	struct mock_obj *o = calloc(1, sizeof(*o));

	if (o) {
		o->provider = &mock_provider_table;
		o->magic = MOCK_MAGIC;
		o->type = type;
	}
	return o;
}

static void kill_obj(struct mock_obj *o)
{
	/* leaked on purpose: see the file comment */
	o->magic = MOCK_DEAD;
	o->provider = NULL;
}

static DAT_RETURN mock_ia_open(const DAT_NAME_PTR name, DAT_COUNT qlen,
			       DAT_EVD_HANDLE *async_evd, DAT_IA_HANDLE *ia)
{
	struct mock_obj *o;

	(void)qlen;
	if (name == NULL || ia == NULL)
		return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
	if (params_are(name, "failopen"))
		return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
	o = new_obj(DAT_HANDLE_TYPE_IA);
	if (o == NULL)
		return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
	snprintf(o->name, sizeof(o->name), "%s", name);
	if (async_evd && *async_evd == DAT_HANDLE_NULL)
		*async_evd = DAT_HANDLE_NULL;
	*ia = (DAT_IA_HANDLE)o;
	inc(&mock_open_ias);
	return DAT_SUCCESS;
}

static DAT_RETURN mock_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags)
{
	struct mock_obj *o = own(ia, DAT_HANDLE_TYPE_IA, 0);

	(void)flags;
	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
	kill_obj(o);
	dec(&mock_open_ias);
	return DAT_SUCCESS;
}

static DAT_RETURN mock_ia_query(DAT_IA_HANDLE ia, DAT_EVD_HANDLE *async_evd,
				DAT_IA_ATTR_MASK ia_mask, DAT_IA_ATTR *ia_attr,
				DAT_PROVIDER_ATTR_MASK prov_mask, DAT_PROVIDER_ATTR *prov_attr)
{
	struct mock_obj *o = own(ia, DAT_HANDLE_TYPE_IA, 0);

	(void)ia_mask;
	(void)prov_mask;
	mock_last_query_handle = ia;
	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
	if (async_evd)
		*async_evd = DAT_HANDLE_NULL;
	if (ia_attr)
		snprintf(ia_attr->adapter_name, sizeof(ia_attr->adapter_name), "%s", o->name);
	if (prov_attr) {
		/* the IA name, as DAPL providers report it (the reference registry's
		 * dat_ia_close finds the dat.conf entry by this name) */
		snprintf(prov_attr->provider_name, sizeof(prov_attr->provider_name), "%s", o->name);
		prov_attr->provider_version_major = 2;
		prov_attr->provider_version_minor = 0;
		prov_attr->dapl_version_major = DAT_VERSION_MAJOR;
		prov_attr->dapl_version_minor = DAT_VERSION_MINOR;
		prov_attr->is_thread_safe = DAT_FALSE;
		info_of(o->name, prov_attr);
	}
	return DAT_SUCCESS;
}

static DAT_RETURN mock_set_context(DAT_HANDLE h, DAT_CONTEXT ctx)
{
	struct mock_obj *o = own(h, 0, 1);

	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
	o->context = ctx;
	return DAT_SUCCESS;
}

static DAT_RETURN mock_get_context(DAT_HANDLE h, DAT_CONTEXT *ctx)
{
	struct mock_obj *o = own(h, 0, 1);

	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
	if (ctx == NULL)
		return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
	*ctx = o->context;
	return DAT_SUCCESS;
}

static DAT_RETURN mock_get_handle_type(DAT_HANDLE h, DAT_HANDLE_TYPE *type)
{
	struct mock_obj *o = own(h, 0, 1);

	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
	if (type == NULL)
		return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
	*type = o->type;
	return DAT_SUCCESS;
}

static DAT_RETURN mock_pz_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE *pz)
{
	struct mock_obj *o = own(ia, DAT_HANDLE_TYPE_IA, 0), *p;

	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
	if (pz == NULL)
		return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
	p = new_obj(DAT_HANDLE_TYPE_PZ);
	if (p == NULL)
		return DAT_ERROR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
	p->ia = o;
	*pz = (DAT_PZ_HANDLE)p;
	inc(&mock_open_pzs);
	return DAT_SUCCESS;
}

static DAT_RETURN mock_pz_query(DAT_PZ_HANDLE pz, DAT_PZ_PARAM_MASK mask, DAT_PZ_PARAM *param)
{
	struct mock_obj *p = own(pz, DAT_HANDLE_TYPE_PZ, 0);

	(void)mask;
	if (p == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
	if (param == NULL)
		return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
	param->ia_handle = (DAT_IA_HANDLE)p->ia;
	return DAT_SUCCESS;
}

static DAT_RETURN mock_pz_free(DAT_PZ_HANDLE pz)
{
	struct mock_obj *p = own(pz, DAT_HANDLE_TYPE_PZ, 0);

	if (p == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_PZ);
	kill_obj(p);
	dec(&mock_open_pzs);
	return DAT_SUCCESS;
}

static DAT_RETURN mock_extendedop(DAT_HANDLE h, DAT_EXTENDED_OP op, va_list args)
{
	struct mock_obj *o = own(h, 0, 1);

	if (o == NULL)
		return DAT_ERROR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE1);
	switch (op) {
	case MOCK_OP_SUM: {
		int n = va_arg(args, int), sum = 0, i, *out;

		for (i = 0; i < n; i++)
			sum += va_arg(args, int);
		out = va_arg(args, int *);
		if (out == NULL)
			return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
		*out = sum;
		return DAT_SUCCESS;
	}
	case MOCK_OP_WHO: {
		DAT_HANDLE *out = va_arg(args, DAT_HANDLE *);

		if (out == NULL)
			return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
		*out = h;
		return DAT_SUCCESS;
	}
	case MOCK_OP_MIXED: {
		double d = va_arg(args, double);
		long long l = va_arg(args, long long);
		const char *s = va_arg(args, const char *);
		char *buf = va_arg(args, char *);
		int len = va_arg(args, int);

		if (buf == NULL || len <= 0)
			return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
		snprintf(buf, (size_t)len, "%.3f/%lld/%s", d, l, s ? s : "(null)");
		return DAT_SUCCESS;
	}
	default:
		return DAT_ERROR(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
	}
}

/*
 * Everything not listed stays NULL, e.g. srq_create_func: the registry must
 * answer DAT_NOT_IMPLEMENTED for those without calling through.
 */
EXPORT DAT_PROVIDER mock_provider_table = {
	.device_name = "mockprov",
	.extension = NULL,
	.ia_open_func = mock_ia_open,
	.ia_query_func = mock_ia_query,
	.ia_close_func = mock_ia_close,
	.set_consumer_context_func = mock_set_context,
	.get_consumer_context_func = mock_get_context,
	.get_handle_type_func = mock_get_handle_type,
	.pz_create_func = mock_pz_create,
	.pz_query_func = mock_pz_query,
	.pz_free_func = mock_pz_free,
	.handle_extendedop_func = mock_extendedop,
};

EXPORT void dat_provider_init(const DAT_PROVIDER_INFO *info, const char *ia_params)
{
	inc(&mock_init_calls);
	if (info == NULL)
		return;
	remember_params(info, ia_params);
	if (ia_params && strcmp(ia_params, "noregister") == 0)
		return;
	if (dat_registry_add_provider(&mock_provider_table, info) == DAT_SUCCESS)
		inc(&mock_registered);
	else
		inc(&mock_add_failures);
}

EXPORT void dat_provider_fini(const DAT_PROVIDER_INFO *info)
{
	inc(&mock_fini_calls);
	if (info == NULL)
		return;
	if (dat_registry_remove_provider(&mock_provider_table, info) == DAT_SUCCESS)
		dec(&mock_registered);
}
