/* DAT 2.0 platform types (Linux user space) — written for this project; ABI-compatible with DAT 2.0 */

#ifndef _DAT_PLATFORM_SPECIFIC_H_
#define _DAT_PLATFORM_SPECIFIC_H_

#if !defined(__linux__)
#error "dat2 headers: only Linux user space is supported by this implementation"
#endif

/* Callers may override the preferred buffer alignment before inclusion. */
#ifndef DAT_OPTIMAL_ALIGNMENT
#define DAT_OPTIMAL_ALIGNMENT 256
#endif

/*
 * stddef.h/stdio.h are pulled in on purpose: existing DAT programs rely on
 * getting size_t, NULL and printf() through <dat2/udat.h>.
 */
#include <sys/types.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

/* The BSD-style u_intN_t names keep C++ mangling identical to OFED builds. */
typedef u_int32_t          DAT_UINT32;
typedef u_int64_t          DAT_UINT64;
typedef unsigned long long DAT_UVERYLONG;

typedef void *             DAT_PVOID;
typedef int                DAT_COUNT;
typedef DAT_UINT64         DAT_PADDR;

#ifndef UINT64_C
#define UINT64_C(c) c ## ULL
#endif

#define DAT_IA_HANDLE_TO_UL(a) (unsigned long)(a)
#define DAT_UL_TO_IA_HANDLE(a) (DAT_IA_HANDLE)(a)

/* socket(2) triple describing a communicator for CSP/EP use */
typedef struct dat_comm {
	int domain;
	int type;
	int protocol;
} DAT_COMM;

typedef int DAT_FD;

/* IA addresses are plain sockaddrs; callers size the storage per family. */
typedef struct sockaddr     DAT_SOCK_ADDR;
typedef struct sockaddr_in6 DAT_SOCK_ADDR6;

#define DAT_AF_INET  AF_INET
#define DAT_AF_INET6 AF_INET6

/* No calling-convention or visibility decoration is needed on Linux. */
#define DAT_API
#define DAT_EXPORT extern

/* Parameter direction markers; documentation only. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef INOUT
#define INOUT
#endif

#endif /* _DAT_PLATFORM_SPECIFIC_H_ */
