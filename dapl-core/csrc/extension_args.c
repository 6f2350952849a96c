/* dat_extension_op reaches a provider as a va_list, which stable Rust cannot
 * read. This unpacks each IB extension operation's arguments, in the order
 * the macros of dat_ib_extensions.h pass them, and hands them to typed Rust
 * functions (src/extension.rs). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

/* Everything a posted extension operation can carry; mirrored in Rust. */
struct daplibv_ext_post {
	DAT_COUNT segments;
	DAT_LMR_TRIPLET *local;
	DAT_UINT64 cookie;
	const DAT_RMR_TRIPLET *remote;
	DAT_UINT64 cmp_add;
	DAT_UINT64 swap;
	DAT_UINT32 immed;
	DAT_IB_ADDR_HANDLE *ah;
	DAT_COMPLETION_FLAGS flags;
};

DAT_RETURN daplibv_ext_post(DAT_HANDLE ep, int op, const struct daplibv_ext_post *p);
DAT_RETURN daplibv_ext_open_query(const char *name, DAT_IA_HANDLE *ia, DAT_IA_ATTR_MASK ia_mask,
				  DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK pr_mask,
				  DAT_PROVIDER_ATTR *pr_attr);
DAT_RETURN daplibv_ext_close_query(DAT_HANDLE ia);
DAT_RETURN daplibv_ext_ud_cm_free(DAT_HANDLE ep, void *cm);
DAT_RETURN daplibv_ext_ud_ah_free(DAT_HANDLE ep, DAT_IB_ADDR_HANDLE *ah);
DAT_RETURN daplibv_ext_query_counters(DAT_HANDLE h, int cntr, DAT_UINT64 *out, int reset);
DAT_RETURN daplibv_ext_print_counters(DAT_HANDLE h, int cntr, int reset);
DAT_RETURN daplibv_ext_start_counter(DAT_HANDLE ia, int type);
DAT_RETURN daplibv_ext_stop_counter(DAT_HANDLE ia, int type);
DAT_RETURN daplibv_ext_unsupported(DAT_HANDLE h);

/* dat_ib_print_counters writes through the consumer's own stdio stream,
 * so its lines stay in order with what the program printf()s around them. */
void daplibv_print_text(const char *text)
{
	fputs(text, stdout);
}

DAT_RETURN daplibv_extension(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
	struct daplibv_ext_post p = { .segments = 1 };
	DAT_DTO_COOKIE cookie;

	switch ((int)op) {
	case DAT_IB_RDMA_WRITE_IMMED_OP:
		p.segments = va_arg(args, DAT_COUNT);
		p.local = va_arg(args, DAT_LMR_TRIPLET *);
		cookie = va_arg(args, DAT_DTO_COOKIE);
		p.remote = va_arg(args, const DAT_RMR_TRIPLET *);
		p.immed = va_arg(args, DAT_UINT32);
		p.flags = va_arg(args, DAT_COMPLETION_FLAGS);
		break;
	case DAT_IB_CMP_AND_SWAP_OP:
		p.cmp_add = va_arg(args, DAT_UINT64);
		p.swap = va_arg(args, DAT_UINT64);
		p.local = va_arg(args, DAT_LMR_TRIPLET *);
		cookie = va_arg(args, DAT_DTO_COOKIE);
		p.remote = va_arg(args, const DAT_RMR_TRIPLET *);
		p.flags = va_arg(args, DAT_COMPLETION_FLAGS);
		break;
	case DAT_IB_FETCH_AND_ADD_OP:
		p.cmp_add = va_arg(args, DAT_UINT64);
		p.local = va_arg(args, DAT_LMR_TRIPLET *);
		cookie = va_arg(args, DAT_DTO_COOKIE);
		p.remote = va_arg(args, const DAT_RMR_TRIPLET *);
		p.flags = va_arg(args, DAT_COMPLETION_FLAGS);
		break;
	case DAT_IB_UD_SEND_OP:
		p.segments = va_arg(args, DAT_COUNT);
		p.local = va_arg(args, DAT_LMR_TRIPLET *);
		p.ah = va_arg(args, DAT_IB_ADDR_HANDLE *);
		cookie = va_arg(args, DAT_DTO_COOKIE);
		p.flags = va_arg(args, DAT_COMPLETION_FLAGS);
		break;
	case DAT_IB_OPEN_QUERY_OP: {
		/* The registry passes the IA name in place of a handle. */
		DAT_IA_HANDLE *ia = va_arg(args, DAT_IA_HANDLE *);
		DAT_IA_ATTR_MASK ia_mask = va_arg(args, DAT_IA_ATTR_MASK);
		DAT_IA_ATTR *ia_attr = va_arg(args, DAT_IA_ATTR *);
		DAT_PROVIDER_ATTR_MASK pr_mask = va_arg(args, DAT_PROVIDER_ATTR_MASK);
		DAT_PROVIDER_ATTR *pr_attr = va_arg(args, DAT_PROVIDER_ATTR *);
		return daplibv_ext_open_query((const char *)handle, ia, ia_mask, ia_attr, pr_mask, pr_attr);
	}
	case DAT_IB_CLOSE_QUERY_OP:
		return daplibv_ext_close_query(handle);
	case DAT_IB_UD_CM_FREE_OP:
		return daplibv_ext_ud_cm_free(handle, va_arg(args, void *));
	case DAT_IB_UD_AH_FREE_OP:
		return daplibv_ext_ud_ah_free(handle, va_arg(args, DAT_IB_ADDR_HANDLE *));
	case DAT_IB_QUERY_COUNTERS_OP: {
		int cntr = va_arg(args, int);
		DAT_UINT64 *out = va_arg(args, DAT_UINT64 *);
		return daplibv_ext_query_counters(handle, cntr, out, va_arg(args, int));
	}
	case DAT_IB_PRINT_COUNTERS_OP: {
		int cntr = va_arg(args, int);
		return daplibv_ext_print_counters(handle, cntr, va_arg(args, int));
	}
	/* The macros cast the group to DAT_COUNTER_TYPE, which no header
	 * declares; programs define it as an enum or int, promoted to int. */
	case DAT_IB_START_COUNTERS_OP:
		return daplibv_ext_start_counter(handle, va_arg(args, int));
	case DAT_IB_STOP_COUNTERS_OP:
		return daplibv_ext_stop_counter(handle, va_arg(args, int));
	default:
		/* Collectives (see README's coverage table) and unknown ops:
		 * DAT_NOT_IMPLEMENTED, but a freed or foreign handle is
		 * DAT_INVALID_HANDLE first, as for every other call (the
		 * registry only checked that the handle names a provider). */
		return daplibv_ext_unsupported(handle);
	}
	p.cookie = cookie.as_64;
	return daplibv_ext_post(handle, (int)op, &p);
}
