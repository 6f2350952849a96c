/*
 * countalloc.c - libcountalloc.so, preloaded under the conformance suite
 * (ctest/host/sock.sh, ctest/guest/conformance.sh): counts every heap
 * allocation the process makes, per thread and in all, so that the case
 * fastpath_allocates_nothing can show that posts, dequeues and waits (and
 * the provider's threads meanwhile) allocate nothing once connected.
 *
 * Each call goes on to glibc's own allocator (__libc_malloc and friends),
 * unchanged; free is not counted.  The counts are read through
 * countalloc_made(), which the case looks up with dlsym: without the
 * preload it is not there and the case says so.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <errno.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static atomic_long all;
static __thread long mine;

static void note(void)
{
	mine++;
	atomic_fetch_add_explicit(&all, 1, memory_order_relaxed);
}

/* Allocations so far: this thread's (every_thread 0) or the process's. */
long countalloc_made(int every_thread)
{
	return every_thread ? atomic_load_explicit(&all, memory_order_relaxed) : mine;
}

void *malloc(size_t n)
{
	note();
	return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	note();
	return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	note();
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}

void *memalign(size_t align, size_t n)
{
	note();
	return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	note();
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	note();
	p = __libc_memalign(align, n);
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}
