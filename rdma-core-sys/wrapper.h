/* Everything the verbs DAT provider needs from the system rdma-core. */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
