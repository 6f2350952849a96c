/* Why the reference libdaplofa cannot create a UD endpoint on rxe (and on
 * any device): it creates every EP's QP through rdma_create_qp() on a cm id
 * made in rdma_cm's TCP port space. librdmacm then moves the new QP to INIT
 * as a connected QP, with access flags, which the kernel refuses for a UD QP
 * (EINVAL). The same UD QP on an id in the UDP port space is fine.
 *
 * Prints one line per port space and exits 0 when TCP fails with EINVAL and
 * UDP succeeds, the behaviour the closing note of issue 3 describes.
 * Usage: ud_qp_port_space LOCAL_IPV4 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

static int try_space(const char *addr, enum rdma_port_space ps, const char *name)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct ibv_qp_init_attr attr;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int rc, err = 0;

	inet_pton(AF_INET, addr, &sin.sin_addr);
	if (!ch || rdma_create_id(ch, &id, NULL, ps) || rdma_bind_addr(id, (struct sockaddr *)&sin)) {
		printf("%s: setup failed: %s\n", name, strerror(errno));
		return -1;
	}
	pd = ibv_alloc_pd(id->verbs);
	cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	memset(&attr, 0, sizeof attr);
	attr.send_cq = attr.recv_cq = cq;
	attr.qp_type = IBV_QPT_UD;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	rc = rdma_create_qp(id, pd, &attr);
	if (rc)
		err = errno;
	printf("%s port space: rdma_create_qp(UD) %s%s\n", name, rc ? "fails: " : "succeeds",
	       rc ? strerror(err) : "");
	if (!rc)
		rdma_destroy_qp(id);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return rc ? err : 0;
}

int main(int argc, char **argv)
{
	const char *addr = argc > 1 ? argv[1] : "10.0.0.1";
	int tcp = try_space(addr, RDMA_PS_TCP, "TCP");
	int udp = try_space(addr, RDMA_PS_UDP, "UDP");

	return (tcp == EINVAL && udp == 0) ? 0 : 1;
}
