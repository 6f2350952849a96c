/*
 * fastpath.c - the data path allocates nothing.
 *
 * fastpath_allocates_nothing: A on one IA, B on another (each with its own
 * progress), B served by a thread of its own, as two processes would be. A
 * warm-up of rounds, then the same rounds counted. Each round A sends to B
 * and waits for the answer (dat_evd_wait); B polls for the message
 * (dat_evd_dequeue), sends it back and reaps its send; A reaps its send,
 * writes into B's region and reads it back. The bytes are checked at every
 * round. No heap allocation may happen meanwhile on either consumer
 * thread, nor on any other thread of the process (the providers' progress
 * or CM threads serving the same traffic: on the sock provider a post that
 * finds its engine busy rings the thread, which made a list for each
 * doorbell). Counted by libcountalloc.so, which the suite's runners
 * preload (ctest/countalloc/countalloc.c); without it the case fails and
 * says so.
 *
 * fastpath_polling_makes_no_other_syscalls: the same rounds; B's thread, the
 * one that polls, has each of its system calls in the counted rounds
 * stopped and counted by a thread of the case's (a seccomp filter on B's
 * thread alone, in user-notification mode; each call then goes on as
 * made). B's polls also run its provider's engine where it has one (the
 * sock provider), so they serve A's requests too. Allowed, by class:
 * sending to the peer, a device or a thread (write, writev, sendmsg, sendto:
 * at most one per operation of a round, five); reading a device (read,
 * readv, recvmsg, recvfrom, epoll_wait, epoll_pwait, poll, ppoll: a socket
 * transport's completion queue is its socket; at most two per dequeue);
 * and, bounded by time, a timer's push (timerfd_settime), a wake of the
 * provider's thread waiting for its engine (futex) and a yield after
 * polling in vain (sched_yield), each at most twice a millisecond or, for
 * yields, once per 20 µs (DAPL_SOCK_YIELD_US's default). Nothing else: no
 * clock that is not the vDSO's, no memory mapped, no other lock that
 * sleeps.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MSG 64
#define WARM 200
#define ROUNDS 2000

typedef long (*made_fn)(int every_thread);

/* Not the harness's want_dto: B's thread runs these too, and the harness's
 * coverage table and failure report are not for two threads at once. */

/* This thread's calls of dat_evd_dequeue. */
static __thread long t_dequeues;

/* The next completion on evd, polling; 1 if it succeeded with `len` bytes
 * (0: any). Gives up after 30 s, or, with `abandon`, once that is set: B's
 * thread reads no clock (where the clock is no vDSO's, as in the guest,
 * each read is a system call, which B's counted thread must not make of
 * its own). */
static int poll_dto(DAT_EVD_HANDLE evd, DAT_VLEN len, DAT_DTO_COMPLETION_EVENT_DATA *d, _Atomic int *abandon)
{
	DAT_EVENT ev;
	double t0 = abandon == NULL ? now_s() : 0;
	DAT_RETURN r;

	while ((t_dequeues++, r = dat_evd_dequeue(evd, &ev)) == DAT_QUEUE_EMPTY)
		if (abandon != NULL ? atomic_load_explicit(abandon, memory_order_relaxed) != 0 : now_s() - t0 > 30.0)
			return 0;
	if (r != DAT_SUCCESS || ev.event_number != DAT_DTO_COMPLETION_EVENT)
		return 0;
	*d = ev.event_data.dto_completion_event_data;
	return d->status == DAT_DTO_SUCCESS && (len == 0 || d->transfered_length == len);
}

/* As poll_dto, sleeping in dat_evd_wait. */
static int wait_dto(DAT_EVD_HANDLE evd, DAT_VLEN len, DAT_DTO_COMPLETION_EVENT_DATA *d)
{
	DAT_EVENT ev;
	DAT_COUNT more;

	if (dat_evd_wait(evd, 30 * SEC, 1, &ev, &more) != DAT_SUCCESS || ev.event_number != DAT_DTO_COMPLETION_EVENT)
		return 0;
	*d = ev.event_data.dto_completion_event_data;
	return d->status == DAT_DTO_SUCCESS && (len == 0 || d->transfered_length == len);
}

/* ---- a thread's system calls, counted ---- */

#if defined(__x86_64__)
#define WATCH_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WATCH_ARCH AUDIT_ARCH_AARCH64
#endif
#define NR_MAX 512

/* One watched thread's calls, by number, and the watcher's state. */
struct syswatch {
	_Atomic int fd;		/* the filter's listener; -1 until the watched thread set it */
	_Atomic int stop;
	_Atomic long calls[NR_MAX + 1];	/* [NR_MAX]: numbers beyond */
	const char *why;	/* the watcher's failure, NULL: none */
};

/* The watcher's thread: counts each call it is told of and lets it go on. */
static void *watcher(void *arg)
{
	struct syswatch *w = arg;
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int fd;

	while ((fd = atomic_load(&w->fd)) < 0)
		if (atomic_load(&w->stop))
			return NULL;
		else
			usleep(1000);
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int n = poll(&pf, 1, 20);

		if (n == 0 && atomic_load(&w->stop))
			break;
		if (n <= 0)
			continue;
		if (pf.revents & (POLLHUP | POLLERR))
			break;
		memset(&req, 0, sizeof(req));
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0)
			continue;	/* the call was withdrawn (its thread got a signal) */
		atomic_fetch_add(&w->calls[req.data.nr < NR_MAX ? req.data.nr : NR_MAX], 1);
		memset(&resp, 0, sizeof(resp));
		resp.id = req.id;
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && w->why == NULL)
			w->why = "SECCOMP_IOCTL_NOTIF_SEND failed";
	}
	close(fd);
	return NULL;
}

/* From the thread to watch: every system call it makes from now on stops
 * until the watcher counted it. 0: not possible here (errno kept). */
static int watch_me(struct syswatch *w)
{
#ifdef WATCH_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WATCH_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	long fd;

	/* Per thread: no_new_privs and the filter stay on this thread. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return 0;
	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0)
		return 0;
	atomic_store(&w->fd, (int)fd);
	return 1;
#else
	(void)w;
	return 0;
#endif
}

/* B's side: two receives kept posted (slot n % 2 of its buffer); each
 * message goes back as it came. */
struct b_side {
	struct pair *p;
	struct mem *b;
	made_fn made;		/* allocations counted, or */
	struct syswatch *watch;	/* system calls counted */
	long mine;		/* allocations on this thread in the counted rounds */
	long calls[NR_MAX + 1];	/* its system calls in the counted rounds */
	long dequeues, posts;	/* its dequeues and posts in them */
	_Atomic int abandon;	/* set by A's thread when it failed */
	double secs;		/* their length */
	int failed_round;	/* -1: none */
	const char *why;
};

static void *b_serves(void *arg)
{
	struct b_side *s = arg;
	DAT_DTO_COMPLETION_EVENT_DATA d;

	s->failed_round = -1;
	for (int n = 0; n < WARM + ROUNDS; n++) {
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)n };
		DAT_LMR_TRIPLET slot = triplet(s->b, (size_t)(n % 2) * MSG, MSG);
		DAT_LMR_TRIPLET next = triplet(s->b, (size_t)(n % 2) * MSG, MSG);

		if (n == WARM && s->made != NULL)
			s->mine = s->made(0);
		if (n == WARM && s->watch != NULL) {
			s->secs = now_s();
			s->dequeues = t_dequeues;
			if (!watch_me(s->watch)) {
				s->why = "no seccomp user notification here, which counts the thread's system calls";
				goto failed;
			}
		}
		if (!poll_dto(s->p->b.recv, MSG, &d, &s->abandon) || d.user_cookie.as_64 != (uint64_t)n) {
			s->why = "B's receive (polled)";
			goto failed;
		}
		if (dat_ep_post_send(s->p->b.ep, 1, &slot, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
		    !poll_dto(s->p->b.req, 0, &d, &s->abandon)) {
			s->why = "B's answer";
			goto failed;
		}
		/* The slot is free again once its send completed. */
		ck.as_64 = (uint64_t)n + 2;
		if (dat_ep_post_recv(s->p->b.ep, 1, &next, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS) {
			s->why = "B's post_recv";
			goto failed;
		}
		continue;
failed:
		s->failed_round = n;
		return NULL;
	}
	if (s->made != NULL)
		s->mine = s->made(0) - s->mine;
	if (s->watch != NULL) {
		for (int i = 0; i <= NR_MAX; i++)
			s->calls[i] = atomic_load(&s->watch->calls[i]);
		s->dequeues = t_dequeues - s->dequeues;
		s->posts = 2L * ROUNDS;
		s->secs = now_s() - s->secs;
	}
	return NULL;
}

/* A's round; 0 with *why set on the first thing that went wrong. */
static int a_round(struct pair *p, struct mem *a, struct mem *rb, int n, const char **why)
{
	DAT_DTO_COMPLETION_EVENT_DATA d;
	DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)n };
	DAT_LMR_TRIPLET out = triplet(a, 0, MSG), in = triplet(a, MSG, MSG), back = triplet(a, 2 * MSG, MSG);
	DAT_RMR_TRIPLET rt = { .rmr_context = rb->rkey, .virtual_address = rb->addr, .segment_length = MSG };

	memset(a->buf, 'a' + n % 26, MSG);
	memset(a->buf + MSG, 0, 2 * MSG);
	if (dat_ep_post_recv(p->a.ep, 1, &in, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
		return *why = "A's post_recv", 0;
	if (dat_ep_post_send(p->a.ep, 1, &out, ck, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS)
		return *why = "A's post_send", 0;
	if (!wait_dto(p->a.recv, MSG, &d) || memcmp(a->buf + MSG, a->buf, MSG) != 0)
		return *why = "B's answer at A (waited)", 0;
	if (!poll_dto(p->a.req, 0, &d, NULL) || d.user_cookie.as_64 != (uint64_t)n)
		return *why = "A's send completion", 0;
	if (dat_ep_post_rdma_write(p->a.ep, 1, &out, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
	    !wait_dto(p->a.req, 0, &d))
		return *why = "A's RDMA write", 0;
	if (dat_ep_post_rdma_read(p->a.ep, 1, &back, ck, &rt, DAT_COMPLETION_DEFAULT_FLAG) != DAT_SUCCESS ||
	    !poll_dto(p->a.req, 0, &d, NULL) || memcmp(a->buf + 2 * MSG, a->buf, MSG) != 0 || memcmp(rb->buf, a->buf, MSG) != 0)
		return *why = "A's RDMA read of what it wrote", 0;
	return 1;
}

/* A and B apart and connected, then WARM + ROUNDS rounds, B's side in its
 * own thread (bs: its made or watch set by the caller, the rest here). With
 * `made`, A's thread's and the process's allocations in the counted rounds
 * into *mine and *all. 1: every round done and checked; 0: a failure was
 * reported. */
static int run_rounds(struct b_side *bs, made_fn made, long *mine, long *all)
{
	struct pair p;
	DAT_EP_ATTR attr = small_attr(8, 1);
	struct mem a, b, rb;
	pthread_t t;
	int started = 0, n, done = 0;
	const char *why = "";

	if (!pair_setup_apart(&p, 16, &attr) || !mem_reg(p.ia, p.pz, 3 * MSG, DAT_MEM_PRIV_ALL_FLAG, &a) ||
	    !mem_reg(p.ib, p.pzb, 2 * MSG, DAT_MEM_PRIV_ALL_FLAG, &b) ||
	    !mem_reg(p.ib, p.pzb, MSG, DAT_MEM_PRIV_ALL_FLAG, &rb))
		goto out;
	for (n = 0; n < 2; n++) {
		DAT_LMR_TRIPLET slot = triplet(&b, (size_t)n * MSG, MSG);
		DAT_DTO_COOKIE ck = { .as_64 = (uint64_t)n };
		CHECK_RC(dat_ep_post_recv(p.b.ep, 1, &slot, ck, DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS, "B's post_recv %d", n);
	}
	if (!pair_connect(&p))
		goto out;
	bs->p = &p;
	bs->b = &b;
	if (pthread_create(&t, NULL, b_serves, bs) != 0) {
		fail("pthread_create");
		goto out;
	}
	started = 1;
	for (n = 0; n < WARM + ROUNDS; n++) {
		if (n == WARM && made != NULL) {
			*mine = made(0);
			*all = made(1);
		}
		if (!a_round(&p, &a, &rb, n, &why)) {
			fail("round %d: %s", n, why);
			break;
		}
	}
	if (made != NULL)
		*mine = made(0) - *mine;
	/* After A's last round B finishes its own (its send's completion
	 * may come after A is done); after A's failure it gives up. */
	if (n < WARM + ROUNDS)
		atomic_store(&bs->abandon, 1);
	pthread_join(t, NULL);
	started = 0;
	if (made != NULL)
		*all = made(1) - *all;
	if (n < WARM + ROUNDS)
		goto out;
	if (bs->failed_round >= 0) {
		fail("round %d: %s", bs->failed_round, bs->why);
		goto out;
	}
	g_stats.ops += (long)ROUNDS * 5;
	g_stats.bytes += (long)ROUNDS * 5 * MSG;
	cover("dat_ep_post_send dat_ep_post_recv dat_ep_post_rdma_write dat_ep_post_rdma_read dat_evd_dequeue "
	      "dat_evd_wait");
	done = 1;
out:
	if (started) {
		atomic_store(&bs->abandon, 1);
		pthread_join(t, NULL);
	}
	pair_close(&p);
	return done;
}

static void case_fastpath_allocates_nothing(void)
{
	made_fn made = (made_fn)dlsym(RTLD_DEFAULT, "countalloc_made");
	struct b_side bs = { .made = made };
	long mine = 0, all = 0;

	if (made == NULL) {
		fail("no allocation count: run under LD_PRELOAD=ctest/build/libcountalloc.so (as the suite's runners do)");
		return;
	}
	if (!run_rounds(&bs, made, &mine, &all))
		return;
	CHECK(mine == 0, "%ld heap allocations on A's thread in %d rounds (posts, dequeues, waits)", mine, ROUNDS);
	CHECK(bs.mine == 0, "%ld heap allocations on B's thread in %d rounds (posts, dequeues)", bs.mine, ROUNDS);
	CHECK(all == mine + bs.mine, "%ld heap allocations on the process's other threads in %d rounds",
	      all - mine - bs.mine, ROUNDS);
}

/* The numbers of one class of system calls (-1 ends; a name the
 * architecture lacks is left out). */
static const long send_nrs[] = { SYS_write, SYS_writev, SYS_sendmsg, SYS_sendto, -1 };
static const long device_read_nrs[] = {
	SYS_read, SYS_readv, SYS_recvmsg, SYS_recvfrom, SYS_epoll_pwait, SYS_ppoll,
#ifdef SYS_epoll_wait
	SYS_epoll_wait,
#endif
#ifdef SYS_poll
	SYS_poll,
#endif
	-1
};
static const long timer_nrs[] = { SYS_timerfd_settime, -1 };
static const long futex_nrs[] = { SYS_futex, -1 };
static const long yield_nrs[] = { SYS_sched_yield, -1 };

/* Calls of a class, each marked in seen[]. */
static long take_class(const long *calls, const long *nrs, char *seen)
{
	long n = 0;

	for (; *nrs >= 0; nrs++) {
		n += calls[*nrs];
		seen[*nrs] = 1;
	}
	return n;
}

static void case_fastpath_polling_makes_no_other_syscalls(void)
{
	static struct syswatch w;
	struct b_side bs = { .watch = &w };
	pthread_t wt;
	int ok;
	char seen[NR_MAX + 1] = { 0 };
	long sends, reads, timers, futexes, yields, others = 0;
	char list[512] = "";
	size_t used = 0;
	double ms;

	memset(&w, 0, sizeof(w));
	atomic_store(&w.fd, -1);
	if (pthread_create(&wt, NULL, watcher, &w) != 0) {
		fail("pthread_create");
		return;
	}
	ok = run_rounds(&bs, NULL, NULL, NULL);
	atomic_store(&w.stop, 1);
	pthread_join(wt, NULL);
	if (!ok)
		return;
	if (w.why != NULL) {
		fail("%s", w.why);
		return;
	}
	sends = take_class(bs.calls, send_nrs, seen);
	reads = take_class(bs.calls, device_read_nrs, seen);
	timers = take_class(bs.calls, timer_nrs, seen);
	futexes = take_class(bs.calls, futex_nrs, seen);
	yields = take_class(bs.calls, yield_nrs, seen);
	for (int i = 0; i <= NR_MAX; i++) {
		if (seen[i] || bs.calls[i] == 0)
			continue;
		others += bs.calls[i];
		if (used < sizeof(list) - 32)
			used += (size_t)snprintf(list + used, sizeof(list) - used, " %s%d x%ld", i == NR_MAX ? ">=" : "#", i,
						 bs.calls[i]);
	}
	ms = bs.secs * 1000;
	note("B's thread, %d rounds in %.1f ms, %ld dequeues: %ld sends, %ld device reads, %ld timer pushes, %ld futex, "
	     "%ld yields, %ld others%s", ROUNDS, ms, bs.dequeues, sends, reads, timers, futexes, yields, others, list);
	CHECK(others == 0, "B's thread, polling, made %ld system calls of no allowed class in %d rounds (by number:%s)",
	      others, ROUNDS, list);
	CHECK(sends <= 5L * ROUNDS, "B's thread sent %ld times in %d rounds", sends, ROUNDS);
	CHECK(reads <= 2 * bs.dequeues, "B's thread read a device %ld times in %ld dequeues", reads, bs.dequeues);
	CHECK(timers <= 2 + (long)(2 * ms), "B's thread pushed a timer %ld times in %.1f ms", timers, ms);
	CHECK(futexes <= 2 + (long)(2 * ms), "B's thread made %ld futex calls in %.1f ms", futexes, ms);
	CHECK(yields <= 2 + (long)(ms * 1000 / 20), "B's thread yielded %ld times in %.1f ms", yields, ms);
}

const struct tcase fastpath_cases[] = {
	CASE("fastpath", fastpath_allocates_nothing, 1),
	CASE("fastpath", fastpath_polling_makes_no_other_syscalls, 1),
};
const int fastpath_ncases = sizeof(fastpath_cases) / sizeof(fastpath_cases[0]);
