/*
 * line-probe: how long one cache line takes to go from one CPU to another,
 * for tools/bench-host.sh's report. Two threads, pinned to the two CPUs
 * given, pass a counter back and forth, each writing a line of its own and
 * reading the other's (as a ring's producer writes its head and its reader
 * reads it; one line written by both moves another way, and measured 0.6
 * of it on the same host); the time of a round trip halved is the
 * one-way figure. Prints the median of five runs of ROUNDS round trips
 * each, in nanoseconds.
 *
 * Why: the hosts we benchmark on are 2-vCPU VMs whose vCPUs are placed
 * anew now and then, and the figure moves with the placement (on one host
 * within twenty minutes: 114 ns, then 390 for a while, then 114 again; the
 * mean of an on-node 8 B ping-pong with it, ours 0.61 -> 1.22 us, UCX's
 * 0.23 -> 0.67). A table is comparable only with one taken at about the
 * same figure.
 *
 *   cc -O2 -pthread -o line-probe tools/line-probe.c
 *   ./line-probe 0 1
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 200000, RUNS = 5 };

/* Each side's line, alone in it (128 apart: the adjacent-line prefetcher
 * pairs lines). */
struct line {
	_Alignas(128) _Atomic uint64_t v;
};
static struct line ping, pong;
/* The far side's start: 1 pinned, -1 could not pin. */
static _Atomic int ready;

static int cpu_a, cpu_b;

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The far side: answers every ping with the same count. */
static void *far_side(void *arg)
{
	(void)arg;
	if (pin(cpu_b) != 0) {
		atomic_store(&ready, -1);
		return NULL;
	}
	atomic_store(&ready, 1);
	for (uint64_t v = 1; v <= (uint64_t)ROUNDS * RUNS; v++) {
		while (atomic_load_explicit(&ping.v, memory_order_acquire) != v)
			;
		atomic_store_explicit(&pong.v, v, memory_order_release);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: line-probe CPU_A CPU_B\n");
		return 2;
	}
	cpu_a = atoi(argv[1]);
	cpu_b = atoi(argv[2]);
	pthread_t t;
	if (pin(cpu_a) != 0 || pthread_create(&t, NULL, far_side, NULL) != 0) {
		fprintf(stderr, "line-probe: cannot pin to CPU %d or start a thread\n", cpu_a);
		return 1;
	}
	int r0;
	while ((r0 = atomic_load(&ready)) == 0)
		;
	if (r0 < 0) {
		pthread_join(t, NULL);
		fprintf(stderr, "line-probe: cannot pin to CPU %d\n", cpu_b);
		return 1;
	}
	double ns[RUNS];
	uint64_t v = 0;
	for (int r = 0; r < RUNS; r++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < ROUNDS; i++) {
			atomic_store_explicit(&ping.v, ++v, memory_order_release);
			while (atomic_load_explicit(&pong.v, memory_order_acquire) != v)
				;
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns[r] = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ROUNDS / 2;
	}
	pthread_join(t, NULL);
	qsort(ns, RUNS, sizeof ns[0], cmp);
	printf("%.0f\n", ns[RUNS / 2]);
	return 0;
}
