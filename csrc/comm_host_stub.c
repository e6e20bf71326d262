/* comm_host_stub.c: TEMPORARY, to be dropped at the merge with the branch
 * that writes csrc/comm_host.c (the TCP "host" communicator of comm.h).
 *
 * cuda/comm_nccl.cu calls cnn_comm_host_broadcast_bytes and
 * cnn_comm_host_watch; without a definition the extension fails to load
 * (undefined symbol). These stand-ins only let this branch build and import;
 * each fails, so nothing can mistake them for the real communicator. */
#include "comm.h"

static cnn_status not_here(const char *name)
{
    return cnn_set_error(CNN_ERR_INTERNAL,
                         "%s: the host communicator is not in this build (comm_host_stub.c "
                         "stands in for comm_host.c)",
                         name);
}

cnn_status cnn_comm_host_create(const char *addr, int port, int rank, int world,
                                double timeout_s, cnn_comm **out)
{
    (void)addr;
    (void)port;
    (void)rank;
    (void)world;
    (void)timeout_s;
    if (out) *out = NULL;
    return not_here("cnn_comm_host_create");
}

cnn_status cnn_comm_host_connect(cnn_comm *comm)
{
    (void)comm;
    return not_here("cnn_comm_host_connect");
}

cnn_status cnn_comm_host_broadcast_bytes(cnn_comm *comm, void *buf, size_t bytes)
{
    (void)comm;
    (void)buf;
    (void)bytes;
    return not_here("cnn_comm_host_broadcast_bytes");
}

cnn_status cnn_comm_host_watch(cnn_comm *comm, void (*on_failure)(void *arg, const char *message),
                               void *arg)
{
    (void)comm;
    (void)on_failure;
    (void)arg;
    return not_here("cnn_comm_host_watch");
}
