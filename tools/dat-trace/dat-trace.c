/*
 * dat-trace: an LD_PRELOAD library that logs the connection side of a DAT
 * program's life (IA open/close, PSP, EP create/connect/disconnect/reset/
 * free, CR query/accept/reject) and every event it takes (dat_evd_wait,
 * dat_evd_dequeue; DTO completions only when they failed), with its thread,
 * the handles and the return code, one line per call, to one file per
 * process. It sits in front of whichever libdat2.so.2 the program loads,
 * ours or the reference, so the same program's calls can be compared over
 * both. It found stop 25's hang: every rank of a hung MVAPICH2 run had
 * finished by the time its log was read, so the hang had ended when gdb
 * stopped the rank (tools/mpi/hunt-hangs.sh).
 *
 *   LD_PRELOAD=target/release/libdat-trace.so DAT_TRACE_DIR=/tmp/t prog
 *
 * Lines go to DAT_TRACE_DIR/dat-trace.PID (stderr without it):
 *   SEQ tTID call handle... -> RET [event ...]
 * Each line is one write(2) to a file opened O_APPEND, so the threads'
 * lines never mix and none is lost when the process is killed.
 */
#define _GNU_SOURCE
#include <dat2/udat.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

static atomic_int trace_fd = -1;
static atomic_long trace_seq;

static int out_fd(void)
{
	int fd = atomic_load(&trace_fd);
	if (fd >= 0)
		return fd;
	const char *dir = getenv("DAT_TRACE_DIR");
	if (!dir || !*dir) {
		fd = STDERR_FILENO;
	} else {
		char path[4096];
		snprintf(path, sizeof path, "%s/dat-trace.%d", dir, (int)getpid());
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0)
			fd = STDERR_FILENO;
	}
	int none = -1;
	/* Two threads' first lines race: the loser closes its file. */
	if (!atomic_compare_exchange_strong(&trace_fd, &none, fd)) {
		if (fd != STDERR_FILENO)
			close(fd);
		fd = none;
	}
	return fd;
}

__attribute__((format(printf, 1, 2))) static void line(const char *fmt, ...)
{
	char buf[512];
	int n = snprintf(buf, sizeof buf, "%ld t%ld ", atomic_fetch_add(&trace_seq, 1), (long)syscall(SYS_gettid));
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
	va_end(ap);
	n += m < (int)(sizeof buf - n - 1) ? m : (int)(sizeof buf - n - 2);
	buf[n++] = '\n';
	ssize_t w = write(out_fd(), buf, n);
	(void)w;
}

/* The next definition of NAME (the real library's, at DAT_2.0 where it has one). */
static void *next(const char *name)
{
	void *f = dlvsym(RTLD_NEXT, name, "DAT_2.0");
	return f ? f : dlsym(RTLD_NEXT, name);
}

#define REAL(name)                                                  \
	static typeof(&name) real;                                  \
	if (!real)                                                  \
		real = (typeof(&name))next(#name);                  \
	if (!real)                                                  \
		return DAT_INTERNAL_ERROR;

static int first_int(const void *p, DAT_COUNT size)
{
	return p && size >= (DAT_COUNT)sizeof(int) ? *(const int *)p : -1;
}

/* The line of a call whose only news is its handle and its return code. */
static DAT_RETURN said(const char *call, const void *handle, DAT_RETURN r)
{
	line("%s %p -> %#x", call, handle, (unsigned)r);
	return r;
}

static void event(const char *call, DAT_EVD_HANDLE evd, DAT_RETURN r, const DAT_EVENT *e)
{
	if (r != DAT_SUCCESS) {
		/* An empty queue is what a polling loop sees all the time. */
		if (DAT_GET_TYPE(r) != DAT_QUEUE_EMPTY)
			line("%s %p -> %#x", call, evd, (unsigned)r);
		return;
	}
	switch (e->event_number) {
	case DAT_DTO_COMPLETION_EVENT:
		if (e->event_data.dto_completion_event_data.status != DAT_DTO_SUCCESS)
			line("%s %p -> 0 DTO status %d cookie %#llx", call, evd, (int)e->event_data.dto_completion_event_data.status,
			     (unsigned long long)e->event_data.dto_completion_event_data.user_cookie.as_64);
		return;
	case DAT_CONNECTION_REQUEST_EVENT:
		line("%s %p -> 0 CONNECTION_REQUEST cr %p qual %llu", call, evd, e->event_data.cr_arrival_event_data.cr_handle,
		     (unsigned long long)e->event_data.cr_arrival_event_data.conn_qual);
		return;
	default:
		break;
	}
	if ((e->event_number & 0xff000) == 0x04000) {
		const DAT_CONNECTION_EVENT_DATA *c = &e->event_data.connect_event_data;
		line("%s %p -> 0 CONNECTION %#x ep %p pdata %d bytes, first int %d", call, evd, (unsigned)e->event_number, c->ep_handle,
		     (int)c->private_data_size, first_int(c->private_data, c->private_data_size));
		return;
	}
	line("%s %p -> 0 event %#x", call, evd, (unsigned)e->event_number);
}

DAT_RETURN DAT_API dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *async, DAT_IA_HANDLE *ia, DAT_UINT32 major,
				DAT_UINT32 minor, DAT_BOOLEAN ts)
{
	REAL(dat_ia_openv);
	DAT_RETURN r = real(name, qlen, async, ia, major, minor, ts);
	line("ia_open %s -> %#x ia %p", name ? name : "(null)", (unsigned)r, r == DAT_SUCCESS && ia ? *ia : NULL);
	return r;
}

DAT_RETURN DAT_API dat_ia_close(DAT_IA_HANDLE ia, DAT_CLOSE_FLAGS flags)
{
	REAL(dat_ia_close);
	return said("ia_close", ia, real(ia, flags));
}

DAT_RETURN DAT_API dat_psp_create(DAT_IA_HANDLE ia, DAT_CONN_QUAL qual, DAT_EVD_HANDLE evd, DAT_PSP_FLAGS flags, DAT_PSP_HANDLE *psp)
{
	REAL(dat_psp_create);
	DAT_RETURN r = real(ia, qual, evd, flags, psp);
	line("psp_create qual %llu evd %p -> %#x psp %p", (unsigned long long)qual, evd, (unsigned)r, r == DAT_SUCCESS && psp ? *psp : NULL);
	return r;
}

DAT_RETURN DAT_API dat_ep_create(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, DAT_EVD_HANDLE recv_evd, DAT_EVD_HANDLE req_evd,
				 DAT_EVD_HANDLE conn_evd, const DAT_EP_ATTR *attr, DAT_EP_HANDLE *ep)
{
	REAL(dat_ep_create);
	DAT_RETURN r = real(ia, pz, recv_evd, req_evd, conn_evd, attr, ep);
	line("ep_create conn_evd %p -> %#x ep %p", conn_evd, (unsigned)r, r == DAT_SUCCESS && ep ? *ep : NULL);
	return r;
}

DAT_RETURN DAT_API dat_ep_connect(DAT_EP_HANDLE ep, DAT_IA_ADDRESS_PTR addr, DAT_CONN_QUAL qual, DAT_TIMEOUT timeout, DAT_COUNT size,
				  const DAT_PVOID pdata, DAT_QOS qos, DAT_CONNECT_FLAGS flags)
{
	REAL(dat_ep_connect);
	DAT_RETURN r = real(ep, addr, qual, timeout, size, pdata, qos, flags);
	line("ep_connect %p qual %llu pdata %d bytes, first int %d -> %#x", ep, (unsigned long long)qual, (int)size, first_int(pdata, size),
	     (unsigned)r);
	return r;
}

DAT_RETURN DAT_API dat_ep_disconnect(DAT_EP_HANDLE ep, DAT_CLOSE_FLAGS flags)
{
	REAL(dat_ep_disconnect);
	return said("ep_disconnect", ep, real(ep, flags));
}

DAT_RETURN DAT_API dat_ep_reset(DAT_EP_HANDLE ep)
{
	REAL(dat_ep_reset);
	return said("ep_reset", ep, real(ep));
}

DAT_RETURN DAT_API dat_ep_free(DAT_EP_HANDLE ep)
{
	REAL(dat_ep_free);
	return said("ep_free", ep, real(ep));
}

DAT_RETURN DAT_API dat_cr_query(DAT_CR_HANDLE cr, DAT_CR_PARAM_MASK mask, DAT_CR_PARAM *param)
{
	REAL(dat_cr_query);
	DAT_RETURN r = real(cr, mask, param);
	int first = r == DAT_SUCCESS && param && (mask & DAT_CR_FIELD_PRIVATE_DATA) ? first_int(param->private_data, param->private_data_size) : -1;
	line("cr_query %p -> %#x first int %d", cr, (unsigned)r, first);
	return r;
}

DAT_RETURN DAT_API dat_cr_accept(DAT_CR_HANDLE cr, DAT_EP_HANDLE ep, DAT_COUNT size, const DAT_PVOID pdata)
{
	REAL(dat_cr_accept);
	DAT_RETURN r = real(cr, ep, size, pdata);
	line("cr_accept %p ep %p -> %#x", cr, ep, (unsigned)r);
	return r;
}

DAT_RETURN DAT_API dat_cr_reject(DAT_CR_HANDLE cr, DAT_COUNT size, const DAT_PVOID pdata)
{
	REAL(dat_cr_reject);
	return said("cr_reject", cr, real(cr, size, pdata));
}

DAT_RETURN DAT_API dat_evd_wait(DAT_EVD_HANDLE evd, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT *e, DAT_COUNT *nmore)
{
	REAL(dat_evd_wait);
	DAT_RETURN r = real(evd, timeout, threshold, e, nmore);
	event("wait", evd, r, e);
	return r;
}

DAT_RETURN DAT_API dat_evd_dequeue(DAT_EVD_HANDLE evd, DAT_EVENT *e)
{
	REAL(dat_evd_dequeue);
	DAT_RETURN r = real(evd, e);
	event("dequeue", evd, r, e);
	return r;
}
