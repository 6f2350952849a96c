/*
 * Entry points that rustc's ThreadSanitizer instrumentation calls and
 * GCC 12's libtsan.so.2 does not export (newer compiler-rt has them). The
 * sock provider built with -Zsanitizer=thread is a shared library, so its
 * __tsan_* references are resolved at load time from the preloaded GCC
 * runtime; these few are supplied here on top of it (tools/tsan/run.sh).
 * Built without -fsanitize and with -fno-builtin, so memcpy and friends
 * below are calls into libtsan's interceptors, which check the ranges.
 */
#include <stddef.h>
#include <string.h>

void __tsan_read_range_pc(void *addr, size_t size, void *pc);
void __tsan_write_range_pc(void *addr, size_t size, void *pc);

/* An unaligned access checked as the range it covers, reported at its caller. */
#define UNALIGNED(n)                                                              \
	void __tsan_unaligned_read##n(void *a)                                    \
	{                                                                         \
		__tsan_read_range_pc(a, n, __builtin_return_address(0));          \
	}                                                                         \
	void __tsan_unaligned_write##n(void *a)                                   \
	{                                                                         \
		__tsan_write_range_pc(a, n, __builtin_return_address(0));         \
	}
UNALIGNED(2)
UNALIGNED(4)
UNALIGNED(8)

void *__tsan_memcpy(void *d, const void *s, size_t n)
{
	return memcpy(d, s, n);
}

void *__tsan_memmove(void *d, const void *s, size_t n)
{
	return memmove(d, s, n);
}

void *__tsan_memset(void *d, int c, size_t n)
{
	return memset(d, c, n);
}
