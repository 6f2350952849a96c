/*
 * threaded-write: what a process pays in glibc for having made one thread,
 * for docs/performance.md ("The provider's thread"). N write(2)s of one
 * byte to /dev/null, then (with a second argument) one thread made and
 * joined, then N more. Under callgrind, one dump per phase:
 *
 *   cc -O2 -o threaded-write tools/instr/threaded-write.c -lpthread
 *   valgrind --tool=callgrind --dump-after=phase_done ./threaded-write 100 x
 *   callgrind_annotate callgrind.out.PID.1; callgrind_annotate callgrind.out.PID.3
 *
 * Dump 1 has the writes of a process that never had a second thread, dump
 * 3 the same writes after one came and went: glibc stays in its
 * multi-threaded mode, where a cancellation point such as write(2) goes
 * through __pthread_enable/disable_asynccancel.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *nothing(void *arg)
{
	return arg;
}

__attribute__((noinline)) void phase_done(void)
{
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	int fd = open("/dev/null", O_WRONLY), n = argc > 1 ? atoi(argv[1]) : 100;
	char c = 0;
	pthread_t t;

	if (fd < 0)
		return 1;
	for (int i = 0; i < n; i++)
		if (write(fd, &c, 1) != 1)
			return 1;
	phase_done();
	if (argc > 2 && (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0))
		return 1;
	phase_done();
	for (int i = 0; i < n; i++)
		if (write(fd, &c, 1) != 1)
			return 1;
	phase_done();
	return 0;
}
