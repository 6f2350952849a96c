/* DAT IB extensions — written for this project; ABI-compatible with DAPL's */

/*
 * InfiniBand-specific additions to the DAT 2.0 API: atomics, RDMA write
 * with immediate data, unreliable datagram, counters, fast provider query
 * and MPI collectives.  Every entry point is funnelled through the variadic
 * dat_extension_op(handle, op, ...) call declared by <dat2/dat.h>, so the
 * argument order of each macro below is part of the ABI and must not change.
 *
 * Include <dat2/udat.h> first; this header deliberately includes nothing.
 */
#ifndef _DAT_IB_EXTENSIONS_H_
#define _DAT_IB_EXTENSIONS_H_

/* 209 == API revision 2.0.9 (adds the UD CM/AH free operations). */
#define DAT_IB_EXTENSION_VERSION	209

/* Provider-specific attribute names reported through dat_ia_query(). */
#define DAT_IB_ATTR_COUNTERS		"DAT_COUNTERS"
#define DAT_IB_ATTR_FETCH_AND_ADD	"DAT_IB_FETCH_AND_ADD"
#define DAT_IB_ATTR_CMP_AND_SWAP	"DAT_IB_CMP_AND_SWAP"
#define DAT_IB_ATTR_IMMED_DATA		"DAT_IB_IMMED_DATA"
#define DAT_IB_ATTR_UD			"DAT_IB_UD"

#define DAT_IB_COLL_SET_CLOCK		"DAT_COLL_SET_CLOCK"
#define DAT_IB_COLL_READ_CLOCK		"DAT_COLL_READ_CLOCK"
#define DAT_IB_COLL_BROADCAST		"DAT_COLL_BROADCAST"
#define DAT_IB_COLL_BARRIER		"DAT_COLL_BARRIER"
#define DAT_IB_COLL_SCATTER		"DAT_COLL_SCATTER"
#define DAT_IB_COLL_SCATTERV		"DAT_COLL_SCATTERV"
#define DAT_IB_COLL_GATHER		"DAT_COLL_GATHER"
#define DAT_IB_COLL_GATHERV		"DAT_COLL_GATHERV"
#define DAT_IB_COLL_ALLGATHER		"DAT_COLL_ALLGATHER"
#define DAT_IB_COLL_ALLGATHERV		"DAT_COLL_ALLGATHERV"
#define DAT_IB_COLL_ALLTOALL		"DAT_COLL_ALLTOALL"
#define DAT_IB_COLL_ALLTOALLV		"DAT_COLL_ALLTOALLV"
#define DAT_IB_COLL_REDUCE		"DAT_COLL_REDUCE"
#define DAT_IB_COLL_ALLREDUCE		"DAT_COLL_ALLREDUCE"
#define DAT_IB_COLL_REDUCE_SCATTER	"DAT_COLL_REDUCE_SCATTER"
#define DAT_IB_COLL_SCAN		"DAT_COLL_SCAN"

typedef DAT_HANDLE DAT_IB_COLLECTIVE_HANDLE;

/* Event numbers live in the range dat.h reserves for IB extensions. */
typedef enum dat_ib_event_number {
	DAT_IB_DTO_EVENT = DAT_IB_EXTENSION_RANGE_BASE,
	DAT_IB_UD_CONNECTION_REQUEST_EVENT,
	DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED,
	DAT_IB_UD_CONNECTION_REJECT_EVENT,
	DAT_IB_UD_CONNECTION_ERROR_EVENT,
	DAT_IB_COLLECTIVE_EVENT,
} DAT_IB_EVENT_NUMBER;

/* Second argument of dat_extension_op(); values are shared with providers. */
typedef enum dat_ib_op {
	DAT_IB_FETCH_AND_ADD_OP = 0,
	DAT_IB_CMP_AND_SWAP_OP,
	DAT_IB_RDMA_WRITE_IMMED_OP,
	DAT_IB_UD_SEND_OP,
	DAT_IB_QUERY_COUNTERS_OP,
	DAT_IB_PRINT_COUNTERS_OP,
	DAT_IB_COLLECTIVE_CREATE_MEMBER_OP,
	DAT_IB_COLLECTIVE_FREE_MEMBER_OP,
	DAT_IB_COLLECTIVE_CREATE_GROUP_OP,
	DAT_IB_COLLECTIVE_FREE_GROUP_OP,
	DAT_IB_COLLECTIVE_SET_CLOCK_OP,
	DAT_IB_COLLECTIVE_READ_CLOCK_OP,
	DAT_IB_COLLECTIVE_SCATTER_OP,
	DAT_IB_COLLECTIVE_SCATTERV_OP,
	DAT_IB_COLLECTIVE_GATHER_OP,
	DAT_IB_COLLECTIVE_GATHERV_OP,
	DAT_IB_COLLECTIVE_ALLGATHER_OP,
	DAT_IB_COLLECTIVE_ALLGATHERV_OP,
	DAT_IB_COLLECTIVE_ALLTOALL_OP,
	DAT_IB_COLLECTIVE_ALLTOALLV_OP,
	DAT_IB_COLLECTIVE_REDUCE_OP,
	DAT_IB_COLLECTIVE_ALLREDUCE_OP,
	DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP,
	DAT_IB_COLLECTIVE_SCAN_OP,
	DAT_IB_COLLECTIVE_BROADCAST_OP,
	DAT_IB_COLLECTIVE_BARRIER_OP,
	DAT_IB_START_COUNTERS_OP,
	DAT_IB_STOP_COUNTERS_OP,
	DAT_IB_UD_CM_FREE_OP,
	DAT_IB_UD_AH_FREE_OP,
	/* libdat2 routes these itself (no IA exists yet for an open query),
	 * so they must sit on the bases dat.h reserves for that. */
	DAT_IB_OPEN_QUERY_OP = DAT_OPEN_EXTENSION_BASE,
	DAT_IB_CLOSE_QUERY_OP = DAT_CLOSE_EXTENSION_BASE,
} DAT_IB_OP;

/*
 * Carried in DAT_IB_EXTENSION_EVENT_DATA.type.  Explicit values because
 * they travel between separately built consumers and providers.
 */
typedef enum dat_ib_ext_type {
	DAT_IB_FETCH_AND_ADD = 0,
	DAT_IB_CMP_AND_SWAP = 1,
	DAT_IB_RDMA_WRITE_IMMED = 2,
	DAT_IB_RDMA_WRITE_IMMED_DATA = 3,
	DAT_IB_RECV_IMMED_DATA = 4,
	DAT_IB_UD_CONNECT_REQUEST = 5,
	DAT_IB_UD_REMOTE_AH = 6,
	DAT_IB_UD_PASSIVE_REMOTE_AH = 7,
	DAT_IB_UD_SEND = 8,
	DAT_IB_UD_RECV = 9,
	DAT_IB_UD_CONNECT_REJECT = 10,
	DAT_IB_UD_CONNECT_ERROR = 11,
	DAT_IB_COLLECTIVE_CREATE_STATUS = 12,
	DAT_IB_COLLECTIVE_CREATE_DATA = 13,
	DAT_IB_COLLECTIVE_CLOCK_SET_STATUS = 14,
	DAT_IB_COLLECTIVE_SCATTER_STATUS = 15,
	DAT_IB_COLLECTIVE_SCATTERV_STATUS = 16,
	DAT_IB_COLLECTIVE_GATHER_STATUS = 17,
	DAT_IB_COLLECTIVE_GATHERV_STATUS = 18,
	DAT_IB_COLLECTIVE_ALLGATHER_STATUS = 19,
	DAT_IB_COLLECTIVE_ALLGATHERV_STATUS = 20,
	DAT_IB_COLLECTIVE_ALLTOALL_STATUS = 21,
	DAT_IB_COLLECTIVE_ALLTOALLV_STATUS = 22,
	DAT_IB_COLLECTIVE_REDUCE_STATUS = 23,
	DAT_IB_COLLECTIVE_ALLREDUCE_STATUS = 24,
	DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS = 25,
	DAT_IB_COLLECTIVE_SCAN_STATUS = 26,
	DAT_IB_COLLECTIVE_BROADCAST_STATUS = 27,
	DAT_IB_COLLECTIVE_BARRIER_STATUS = 28,
} DAT_IB_EXT_TYPE;

/* Carried in DAT_IB_EXTENSION_EVENT_DATA.status. */
typedef enum dat_ib_status {
	DAT_OP_SUCCESS = DAT_SUCCESS,
	DAT_IB_OP_ERR,
	DAT_IB_COLL_COMP_ERR,
} DAT_IB_STATUS;

/* Extra DAT_RETURN types, placed above the standard DAT type bits. */
typedef enum dat_ib_return {
	DAT_IB_ERR = DAT_EXTENSION_BASE,
	DAT_IB_COLLECTIVE_ERR
} DAT_IB_RETURN;

/* Extra DTO operation codes reported in dto_completion_event_data. */
typedef enum dat_ib_dtos {
	DAT_IB_DTO_RDMA_WRITE_IMMED = DAT_DTO_EXTENSION_BASE,
	DAT_IB_DTO_RECV_IMMED,
	DAT_IB_DTO_FETCH_ADD,
	DAT_IB_DTO_CMP_SWAP,
	DAT_IB_DTO_RECV_MSG_IMMED,
	DAT_IB_DTO_SEND_UD,
	DAT_IB_DTO_RECV_UD,
	DAT_IB_DTO_RECV_UD_IMMED,
	DAT_IB_DTO_COLLECTIVES,
} DAT_IB_DTOS;

typedef enum dat_ib_handle_type {
	DAT_IB_HANDLE_TYPE_EXT = DAT_HANDLE_TYPE_EXTENSION_BASE,
	DAT_IB_HANDLE_TYPE_COLLECTIVE
} DAT_IB_HANDLE_TYPE;

/* An EVD that takes extended events which fit no standard stream type. */
typedef enum dat_ib_evd_extension_flags {
	DAT_IB_EVD_EXTENSION_FLAG = DAT_EVD_EXTENSION_BASE,
} DAT_IB_EVD_EXTENSION_FLAGS;

/* Atomics need a remote privilege the base spec does not have. */
typedef enum dat_ib_mem_priv_flags {
	DAT_IB_MEM_PRIV_REMOTE_ATOMIC = DAT_MEM_PRIV_EXTENSION_BASE,
} DAT_IB_MEM_PRIV_FLAGS;

/* UD destination; ah is libibverbs' handle, kept opaque here. */
typedef struct dat_ib_addr_handle {
	struct ibv_ah *ah;
	DAT_UINT32 qpn;
	DAT_SOCK_ADDR6 ia_addr;
} DAT_IB_ADDR_HANDLE;

typedef struct dat_ib_immed_data {
	DAT_UINT32 data;
} DAT_IB_IMMED_DATA;

typedef struct dat_ib_collective_event_data {
	DAT_HANDLE handle;
	DAT_CONTEXT context;
} DAT_IB_COLLECTIVE_EVENT_DATA;

/*
 * Overlaid on DAT_EVENT.event_extension_data for IB extended events, so it
 * has to stay within that 64-byte array.  The second union is anonymous on
 * purpose: consumers write ext->remote_ah / ext->coll directly.
 */
typedef struct dat_ib_extension_event_data {
	DAT_IB_EXT_TYPE type;
	DAT_IB_STATUS status;
	union {
		DAT_IB_IMMED_DATA immed;
	} val;
	union {
		DAT_IB_ADDR_HANDLE remote_ah;
		DAT_IB_COLLECTIVE_EVENT_DATA coll;
	};
	DAT_CONTEXT context;
} DAT_IB_EXTENSION_EVENT_DATA;

typedef enum dat_ib_service_type {
	DAT_IB_SERVICE_TYPE_UD = DAT_SERVICE_TYPE_EXTENSION_BASE,
} DAT_IB_SERVICE_TYPE;

/* Counter indices: each *_ALL_COUNTERS entry doubles as the array length. */
typedef enum dat_ia_counters {
	DCNT_IA_PZ_CREATE = 0,
	DCNT_IA_PZ_FREE,
	DCNT_IA_LMR_CREATE,
	DCNT_IA_LMR_FREE,
	DCNT_IA_RMR_CREATE,
	DCNT_IA_RMR_FREE,
	DCNT_IA_PSP_CREATE,
	DCNT_IA_PSP_CREATE_ANY,
	DCNT_IA_PSP_FREE,
	DCNT_IA_RSP_CREATE,
	DCNT_IA_RSP_FREE,
	DCNT_IA_EVD_CREATE,
	DCNT_IA_EVD_FREE,
	DCNT_IA_EP_CREATE,
	DCNT_IA_EP_FREE,
	DCNT_IA_SRQ_CREATE,
	DCNT_IA_SRQ_FREE,
	DCNT_IA_SP_CR,
	DCNT_IA_SP_CR_ACCEPTED,
	DCNT_IA_SP_CR_REJECTED,
	DCNT_IA_MEM_ALLOC,
	DCNT_IA_MEM_ALLOC_DATA,
	DCNT_IA_MEM_FREE,
	DCNT_IA_ASYNC_ERROR,
	DCNT_IA_ASYNC_QP_ERROR,
	DCNT_IA_ASYNC_CQ_ERROR,
	DCNT_IA_CM_LISTEN,
	DCNT_IA_CM_REQ_TX,
	DCNT_IA_CM_REQ_RX,
	DCNT_IA_CM_REP_TX,
	DCNT_IA_CM_REP_RX,
	DCNT_IA_CM_RTU_TX,
	DCNT_IA_CM_RTU_RX,
	DCNT_IA_CM_USER_REJ_TX,
	DCNT_IA_CM_USER_REJ_RX,
	DCNT_IA_CM_ACTIVE_EST,
	DCNT_IA_CM_PASSIVE_EST,
	DCNT_IA_CM_AH_REQ_TX,
	DCNT_IA_CM_AH_REQ_RX,
	DCNT_IA_CM_AH_RESOLVED,
	DCNT_IA_CM_DREQ_TX,
	DCNT_IA_CM_DREQ_RX,
	DCNT_IA_CM_DREP_TX,
	DCNT_IA_CM_DREP_RX,
	DCNT_IA_CM_MRA_TX,
	DCNT_IA_CM_MRA_RX,
	DCNT_IA_CM_REQ_FULLQ_POLL,
	DCNT_IA_CM_ERR,
	DCNT_IA_CM_ERR_REQ_FULLQ,
	DCNT_IA_CM_ERR_REQ_DUP,
	DCNT_IA_CM_ERR_REQ_RETRY,
	DCNT_IA_CM_ERR_REP_DUP,
	DCNT_IA_CM_ERR_REP_RETRY,
	DCNT_IA_CM_ERR_RTU_DUP,
	DCNT_IA_CM_ERR_RTU_RETRY,
	DCNT_IA_CM_ERR_REFUSED,
	DCNT_IA_CM_ERR_RESET,
	DCNT_IA_CM_ERR_TIMEOUT,
	DCNT_IA_CM_ERR_REJ_TX,
	DCNT_IA_CM_ERR_REJ_RX,
	DCNT_IA_CM_ERR_DREQ_DUP,
	DCNT_IA_CM_ERR_DREQ_RETRY,
	DCNT_IA_CM_ERR_DREP_DUP,
	DCNT_IA_CM_ERR_DREP_RETRY,
	DCNT_IA_CM_ERR_MRA_DUP,
	DCNT_IA_CM_ERR_MRA_RETRY,
	DCNT_IA_CM_ERR_UNEXPECTED,
	DCNT_IA_LNK_ERR_RCV,
	DCNT_IA_LNK_ERR_RCV_REM_PHYS,
	DCNT_IA_LNK_ERR_RCV_CONSTRAINT,
	DCNT_IA_LNK_ERR_XMT_DISCARDS,
	DCNT_IA_LNK_ERR_XMT_CONTRAINT,	/* sic: spelling is API */
	DCNT_IA_LNK_ERR_INTEGRITY,
	DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN,
	DCNT_IA_LNK_WARN_RCV_SW_RELAY,
	DCNT_IA_LNK_WARN_XMT_WAIT,
	DCNT_IA_DIAG_ERR_RQ_RAE,
	DCNT_IA_DIAG_ERR_RQ_OOS,
	DCNT_IA_DIAG_ERR_RQ_RIRE,
	DCNT_IA_DIAG_ERR_RQ_UDSDPRD,
	DCNT_IA_DIAG_ERR_SQ_RAE,
	DCNT_IA_DIAG_ERR_SQ_OOS,
	DCNT_IA_DIAG_ERR_SQ_RIRE,
	DCNT_IA_DIAG_ERR_SQ_RREE,
	DCNT_IA_DIAG_ERR_SQ_TREE,
	DCNT_IA_ALL_COUNTERS,
} DAT_IA_COUNTERS;

typedef enum dat_ep_counters {
	DCNT_EP_CONNECT = 0,
	DCNT_EP_DISCONNECT,
	DCNT_EP_POST_SEND,
	DCNT_EP_POST_SEND_DATA,
	DCNT_EP_POST_SEND_UD,
	DCNT_EP_POST_SEND_UD_DATA,
	DCNT_EP_POST_RECV,
	DCNT_EP_POST_RECV_DATA,
	DCNT_EP_POST_WRITE,
	DCNT_EP_POST_WRITE_DATA,
	DCNT_EP_POST_WRITE_IMM,
	DCNT_EP_POST_WRITE_IMM_DATA,
	DCNT_EP_POST_READ,
	DCNT_EP_POST_READ_DATA,
	DCNT_EP_POST_CMP_SWAP,
	DCNT_EP_POST_FETCH_ADD,
	DCNT_EP_RECV,
	DCNT_EP_RECV_DATA,
	DCNT_EP_RECV_UD,
	DCNT_EP_RECV_UD_DATA,
	DCNT_EP_RECV_IMM,
	DCNT_EP_RECV_IMM_DATA,
	DCNT_EP_RECV_RDMA_IMM,
	DCNT_EP_RECV_RDMA_IMM_DATA,
	DCNT_EP_ALL_COUNTERS,
} DAT_EP_COUNTERS;

typedef enum dat_evd_counters {
	DCNT_EVD_WAIT = 0,
	DCNT_EVD_WAIT_BLOCKED,
	DCNT_EVD_WAIT_NOTIFY,
	DCNT_EVD_DEQUEUE,
	DCNT_EVD_DEQUEUE_FOUND,
	DCNT_EVD_DEQUEUE_NOT_FOUND,
	DCNT_EVD_DEQUEUE_POLL,
	DCNT_EVD_DEQUEUE_POLL_FOUND,
	DCNT_EVD_CONN_CALLBACK,
	DCNT_EVD_DTO_CALLBACK,
	DCNT_EVD_ALL_COUNTERS,
} DAT_EVD_COUNTERS;

/* Which group of device counters dat_ib_start/stop_counter() samples. */
typedef enum dat_ia_counter_type {
	DCNT_IA_CM = 0,
	DCNT_IA_LNK,
	DCNT_IA_DIAG,
} DAT_IA_COUNTER_TYPE;

/* Element type of reduce/scan buffers (MPI-style). */
typedef enum dat_ib_collective_data_type {
	DAT_IB_COLLECTIVE_TYPE_INT8 = 0,
	DAT_IB_COLLECTIVE_TYPE_UINT8,
	DAT_IB_COLLECTIVE_TYPE_INT16,
	DAT_IB_COLLECTIVE_TYPE_UINT16,
	DAT_IB_COLLECTIVE_TYPE_INT32,
	DAT_IB_COLLECTIVE_TYPE_UINT32,
	DAT_IB_COLLECTIVE_TYPE_INT64,
	DAT_IB_COLLECTIVE_TYPE_UINT64,
	DAT_IB_COLLECTIVE_TYPE_FLOAT,
	DAT_IB_COLLECTIVE_TYPE_DOUBLE,
	DAT_IB_COLLECTIVE_TYPE_LONG_DOUBLE,
	DAT_IB_COLLECTIVE_TYPE_SHORT_INT,
	DAT_IB_COLLECTIVE_TYPE_2INT,
	DAT_IB_COLLECTIVE_TYPE_FLOAT_INT,
	DAT_IB_COLLECTIVE_TYPE_LONG_INT,
	DAT_IB_COLLECTIVE_TYPE_DOUBLE_INT,
} DAT_IB_COLLECTIVE_DATA_TYPE;

typedef enum dat_ib_collective_reduce_data_op {
	DAT_IB_COLLECTIVE_REDUCE_OP_MAX = 0,
	DAT_IB_COLLECTIVE_REDUCE_OP_MIN,
	DAT_IB_COLLECTIVE_REDUCE_OP_SUM,
	DAT_IB_COLLECTIVE_REDUCE_OP_PROD,
	DAT_IB_COLLECTIVE_REDUCE_OP_LAND,
	DAT_IB_COLLECTIVE_REDUCE_OP_BAND,
	DAT_IB_COLLECTIVE_REDUCE_OP_LOR,
	DAT_IB_COLLECTIVE_REDUCE_OP_BOR,
	DAT_IB_COLLECTIVE_REDUCE_OP_LXOR,
	DAT_IB_COLLECTIVE_REDUCE_OP_BXOR,
	DAT_IB_COLLECTIVE_REDUCE_OP_MAXLOC,
	DAT_IB_COLLECTIVE_REDUCE_OP_MINLOC
} DAT_IB_COLLECTIVE_REDUCE_DATA_OP;

typedef unsigned int DAT_IB_COLLECTIVE_RANK;
typedef unsigned int DAT_IB_COLLECTIVE_ID;
typedef void *DAT_IB_COLLECTIVE_MEMBER;

/* Node topology handed to group creation; ranks are global (MPI) ranks. */
typedef struct dat_ib_collective_group {
	int local_size;
	int local_rank;
	int *local_ranks;
	int external_size;	/* one leader process per node */
	int external_rank;	/* -1 when this process is not a leader */
	int *external_ranks;
	int *intranode_table;	/* global rank -> local rank, or -1 */
	int *internode_table;	/* global rank -> external rank, or -1 */
	int is_comm_world;
} DAT_IB_COLLECTIVE_GROUP;

/* String helpers for the extension return and status codes. */
static __inline__ DAT_RETURN DAT_API
dat_strerror_extension(IN DAT_IB_RETURN value, OUT const char **message)
{
	switch (DAT_GET_TYPE(value)) {
	case DAT_IB_ERR:
		*message = "DAT_IB_ERR";
		return DAT_SUCCESS;
	default:
		/* not ours: let the registry describe it */
		return dat_strerror(value, message, NULL);
	}
}

static __inline__ DAT_RETURN DAT_API
dat_strerror_ext_status(IN DAT_IB_STATUS value, OUT const char **message)
{
	switch (value) {
	case DAT_OP_SUCCESS:
		*message = " ";
		return DAT_SUCCESS;
	case DAT_IB_OP_ERR:
		*message = "DAT_IB_OP_ERR";
		return DAT_SUCCESS;
	default:
		*message = "unknown extension status";
		return DAT_INVALID_PARAMETER;
	}
}

/*
 * Operation macros.  dat_extension_op() is variadic, so the casts below are
 * what fix each argument's size on the stack; cookies are passed uncast as
 * DAT_DTO_COOKIE unions.
 *
 * Several expansions keep quirks of the reference header verbatim so that
 * code which builds against DAPL builds (or fails) the same way here; each
 * one is marked "reference quirk".
 */

/* 64-bit remote fetch-and-add; the old remote value lands in lbuf. */
#define dat_ib_post_fetch_and_add(ep, add_val, lbuf, cookie, rbuf, flgs) \
	dat_extension_op(IN (DAT_EP_HANDLE) (ep), \
			 IN (DAT_IB_OP) DAT_IB_FETCH_AND_ADD_OP, \
			 IN (DAT_UINT64) (add_val), \
			 IN (DAT_LMR_TRIPLET *) (lbuf), \
			 IN (cookie), \
			 IN (DAT_RMR_TRIPLET *) (rbuf), \
			 IN (DAT_COMPLETION_FLAGS) (flgs))

/* 64-bit remote compare-and-swap; the old remote value lands in lbuf. */
#define dat_ib_post_cmp_and_swap(ep, cmp_val, swap_val, lbuf, cookie, rbuf, flgs) \
	dat_extension_op(IN (DAT_EP_HANDLE) (ep), \
			 IN (DAT_IB_OP) DAT_IB_CMP_AND_SWAP_OP, \
			 IN (DAT_UINT64) (cmp_val), \
			 IN (DAT_UINT64) (swap_val), \
			 IN (DAT_LMR_TRIPLET *) (lbuf), \
			 IN (cookie), \
			 IN (DAT_RMR_TRIPLET *) (rbuf), \
			 IN (DAT_COMPLETION_FLAGS) (flgs))

/* The immediate data consumes a posted receive at the target. */
#define dat_ib_post_rdma_write_immed(ep, size, lbuf, cookie, rbuf, idata, flgs) \
	dat_extension_op(IN (DAT_EP_HANDLE) (ep), \
			 IN (DAT_IB_OP) DAT_IB_RDMA_WRITE_IMMED_OP, \
			 IN (DAT_COUNT) (size), \
			 IN (DAT_LMR_TRIPLET *) (lbuf), \
			 IN (cookie), \
			 IN (DAT_RMR_TRIPLET *) (rbuf), \
			 IN (DAT_UINT32) (idata), \
			 IN (DAT_COMPLETION_FLAGS) (flgs))

/* ah_ptr comes from a DAT_IB_UD_* connection event's remote_ah. */
#define dat_ib_post_send_ud(ep, segments, lbuf, ah_ptr, cookie, flgs) \
	dat_extension_op(IN (DAT_EP_HANDLE) (ep), \
			 IN (DAT_IB_OP) DAT_IB_UD_SEND_OP, \
			 IN (DAT_COUNT) (segments), \
			 IN (DAT_LMR_TRIPLET *) (lbuf), \
			 IN (DAT_IB_ADDR_HANDLE *) (ah_ptr), \
			 IN (cookie), \
			 IN (DAT_COMPLETION_FLAGS) (flgs))

/* UD receives need nothing special. */
#define dat_ib_post_recv_ud	dat_ep_post_recv

/* Release the UD CM object once the consumer has copied AH/private data. */
#define dat_ib_ud_cm_free(ep, cm) \
	dat_extension_op(IN (DAT_EP_HANDLE) (ep), \
			 IN (DAT_IB_OP) DAT_IB_UD_CM_FREE_OP, \
			 IN (DAT_CONTEXT) (cm))

/* Only after every UD send using ah has completed. */
#define dat_ib_ud_ah_free(ep, ah) \
	dat_extension_op(IN (DAT_EP_HANDLE) (ep), \
			 IN (DAT_IB_OP) DAT_IB_UD_AH_FREE_OP, \
			 IN (DAT_IB_ADDR_HANDLE *) (ah))

/*
 * Counters on an IA, EP or EVD handle; pass the matching *_ALL_COUNTERS
 * index for the whole set.  Reference quirk: dat_handle is not
 * parenthesised, and the op goes through the backward-compat alias.
 */
#define dat_ib_query_counters(dat_handle, cntr, p_cntrs_out, reset) \
	dat_extension_op(IN (DAT_HANDLE) dat_handle, \
			 IN (DAT_IB_OP) DAT_QUERY_COUNTERS_OP, \
			 IN (int) (cntr), \
			 IN (DAT_UINT64 *) (p_cntrs_out), \
			 IN (int) (reset))

#define dat_ib_print_counters(dat_handle, cntr, reset) \
	dat_extension_op(IN (DAT_HANDLE) dat_handle, \
			 IN (DAT_IB_OP) DAT_PRINT_COUNTERS_OP, \
			 IN (int) (cntr), \
			 IN (int) (reset))

/* Reference quirk: DAT_COUNTER_TYPE is not a declared type anywhere. */
#define dat_ib_start_counter(dat_handle, type) \
	dat_extension_op(IN (DAT_HANDLE) dat_handle, \
			 IN (DAT_IB_OP) DAT_IB_START_COUNTERS_OP, \
			 IN (DAT_COUNTER_TYPE) (type))

#define dat_ib_stop_counter(dat_handle, type) \
	dat_extension_op(IN (DAT_HANDLE) dat_handle, \
			 IN (DAT_IB_OP) DAT_IB_STOP_COUNTERS_OP, \
			 IN (DAT_COUNTER_TYPE) (type))

/* Lightweight open of a named IA just to read its attributes. */
#define dat_ib_open_query(name, ia_handle, ia_mask, ia_attr, prov_mask, prov_attr) \
	dat_extension_op(IN (DAT_HANDLE) (NULL), \
			 IN (DAT_IB_OP) DAT_IB_OPEN_QUERY_OP, \
			 IN (const DAT_NAME_PTR) (name), \
			 OUT (DAT_HANDLE *) (ia_handle), \
			 IN (DAT_IA_ATTR_MASK) (ia_mask), \
			 OUT (DAT_IA_ATTR *) (ia_attr), \
			 IN (DAT_PROVIDER_ATTR_MASK) (prov_mask), \
			 OUT (DAT_PROVIDER_ATTR *) (prov_attr))

#define dat_ib_close_query(ia_handle) \
	dat_extension_op(IN (DAT_HANDLE) (ia_handle), \
			 IN (DAT_IB_OP) DAT_IB_CLOSE_QUERY_OP)

/* ---- MPI collectives: members and groups ---- */

/* The member blob is exchanged out of band and fed to create_group. */
#define dat_ib_collective_create_member(ia_handle, progress_func, member, member_size) \
	dat_extension_op(IN (DAT_IA_HANDLE) (ia_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_CREATE_MEMBER_OP, \
			 IN (void *) (progress_func), \
			 OUT (DAT_IB_COLLECTIVE_MEMBER *) (member), \
			 OUT (DAT_UINT32 *) (member_size))

#define dat_ib_collective_free_member(ia_handle, member) \
	dat_extension_op(IN (DAT_IA_HANDLE) (ia_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_FREE_MEMBER_OP, \
			 IN (DAT_IB_COLLECTIVE_MEMBER) (member))

/* The EVD goes first because it is the handle the call dispatches on. */
#define dat_ib_collective_create_group(members, group_size, self, group_id, group_info, evd, pd, user_context) \
	dat_extension_op(IN (DAT_EVD_HANDLE) (evd), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_CREATE_GROUP_OP, \
			 IN (DAT_IB_COLLECTIVE_MEMBER *) (members), \
			 IN (DAT_COUNT) (group_size), \
			 IN (DAT_IB_COLLECTIVE_RANK) (self), \
			 IN (DAT_IB_COLLECTIVE_ID) (group_id), \
			 IN (DAT_IB_COLLECTIVE_GROUP *) (group_info), \
			 IN (DAT_PZ_HANDLE) (pd), \
			 IN (DAT_CONTEXT) (user_context))

#define dat_ib_collective_free_group(coll_handle) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_FREE_GROUP_OP)

/* ---- MPI collectives: data operations ---- */

/*
 * Reference quirk: this sends READ_CLOCK_OP, and it names user_contex
 * rather than its own user_context parameter.
 */
#define dat_ib_collective_set_clock(coll_handle, clock_value, user_context) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_READ_CLOCK_OP, \
			 IN (DAT_UINT64) (clock_value), \
			 IN (DAT_CONTEXT) (user_contex))

/* Reference quirk: the expansion carries one ')' too many. */
#define dat_ib_collective_read_clock(coll_handle, clock_value) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_READ_CLOCK_OP, \
			 OUT (DAT_UINT64 *) clock_value))

/* A NULL recvbuf at the root means "in place". */
#define dat_ib_collective_scatter(coll_handle, sendbuf, sendsize, recvbuf, recvsize, root, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_SCATTER_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_IB_COLLECTIVE_RANK) (root), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_scatterv(coll_handle, sendbuf, sendsizes, displs, recvbuf, recvsize, root, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_SCATTERV_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT *) (sendsizes), \
			 IN (DAT_COUNT *) (displs), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_IB_COLLECTIVE_RANK) (root), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

/* A NULL sendbuf at the root means "in place". */
#define dat_ib_collective_gather(coll_handle, sendbuf, sendsize, recvbuf, recvsize, root, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_GATHER_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_IB_COLLECTIVE_RANK) (root), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

/* Reference quirk: expands to recvbuf, not the recvbufs parameter. */
#define dat_ib_collective_gatherv(coll_handle, sendbuf, sendsize, recvbufs, recvsizes, displs, root, user_context, flags) \
	dat_extension_op((DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_GATHERV_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT *) (recvsizes), \
			 IN (DAT_COUNT *) (displs), \
			 IN (DAT_IB_COLLECTIVE_RANK) (root), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_allgather(coll_handle, sendbuf, sendsize, recvbuf, recvsize, user_context, flags) \
	dat_extension_op((DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_ALLGATHER_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_allgatherv(coll_handle, sendbuf, sendsize, recvbuf, recvsizes, displs, user_context, flags) \
	dat_extension_op((DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_ALLGATHERV_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT *) (recvsizes), \
			 IN (DAT_COUNT *) (displs), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_alltoall(coll_handle, sendbuf, sendsize, recvbuf, recvsize, user_context, flags) \
	dat_extension_op((DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_ALLTOALL_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_alltoallv(coll_handle, sendbuf, sendsizes, senddspls, recvbuf, recvsizes, recvdispls, user_context, flags) \
	dat_extension_op((DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_ALLTOALLV_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT *) (sendsizes), \
			 IN (DAT_COUNT *) (senddispls), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT *) (recvsizes), \
			 IN (DAT_COUNT *) (recvdispls), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

/* MINLOC/MAXLOC buffers hold (value, DAT_UINT32 rank) pairs. */
#define dat_ib_collective_reduce(coll_handle, sendbuf, sendsize, recvbuf, recvsize, op, type, root, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_REDUCE_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_IB_COLLECTIVE_REDUCE_DATA_OP) (op), \
			 IN (DAT_IB_COLLECTIVE_DATA_TYPE) (type), \
			 IN (DAT_IB_COLLECTIVE_RANK) (root), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_allreduce(coll_handle, sendbuf, sendsize, recvbuf, recvsize, op, type, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_ALLREDUCE_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_IB_COLLECTIVE_REDUCE_DATA_OP) (op), \
			 IN (DAT_IB_COLLECTIVE_DATA_TYPE) (type), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_reduce_scatter(coll_handle, sendbuf, sendsize, recvbuf, recvsizes, op, type, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT *) (recvsizes), \
			 IN (DAT_IB_COLLECTIVE_REDUCE_DATA_OP) (op), \
			 IN (DAT_IB_COLLECTIVE_DATA_TYPE) (type), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

/* Inclusive prefix reduction over ranks 0..self. */
#define dat_ib_collective_scan(coll_handle, sendbuf, sendsize, recvbuf, recvsize, op, type, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_SCAN_OP, \
			 IN (DAT_PVOID) (sendbuf), \
			 IN (DAT_COUNT) (sendsize), \
			 IN (DAT_PVOID) (recvbuf), \
			 IN (DAT_COUNT) (recvsize), \
			 IN (DAT_IB_COLLECTIVE_REDUCE_DATA_OP) (op), \
			 IN (DAT_IB_COLLECTIVE_DATA_TYPE) (type), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

/* Always in place: buf is the source at root and the sink elsewhere. */
#define dat_ib_collective_broadcast(coll_handle, buf, size, root, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_BROADCAST_OP, \
			 IN (DAT_PVOID) (buf), \
			 IN (DAT_COUNT) (size), \
			 IN (DAT_IB_COLLECTIVE_RANK) (root), \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

#define dat_ib_collective_barrier(coll_handle, user_context, flags) \
	dat_extension_op(IN (DAT_IB_COLLECTIVE_HANDLE) (coll_handle), \
			 IN (DAT_IB_OP) DAT_IB_COLLECTIVE_BARRIER_OP, \
			 IN (DAT_CONTEXT) (user_context), \
			 IN (DAT_COMPLETION_FLAGS) (flags))

/* Pre-2.0.3 spellings still used by older consumers. */
#define DAT_ATTR_COUNTERS	DAT_IB_ATTR_COUNTERS
#define dat_query_counters	dat_ib_query_counters
#define dat_print_counters	dat_ib_print_counters
#define DAT_QUERY_COUNTERS_OP	DAT_IB_QUERY_COUNTERS_OP
#define DAT_PRINT_COUNTERS_OP	DAT_IB_PRINT_COUNTERS_OP

#endif /* _DAT_IB_EXTENSIONS_H_ */
