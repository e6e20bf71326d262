/* comm.h: communicators for data-parallel training.
 *
 * A data-parallel group is `world` replicas of one network, one per rank,
 * each on its own engine (a GPU, or a CPU engine). Every replica runs the
 * same steps on its share of each global batch; after the backward the
 * gradient block is summed over the ranks (one all-reduce per step), so
 * every replica applies the same optimizer step and the weights stay
 * identical.
 *
 * Two kinds:
 * - "host" (comm_host.c): TCP sockets in a star around rank 0, over host
 *   memory. Rank 0 sums the ranks' buffers in rank order and sends the sum
 *   back, so every rank gets the same bits. It is the rendezvous of every
 *   group (rank 0 listens on addr:port, the others connect), the data path
 *   of the CPU engines, and the control channel of an "nccl" group.
 * - "nccl" (cuda/comm_nccl.cu, built where nccl.h is found): NCCL over the
 *   GPUs; the unique id travels over a host communicator, and the work is
 *   queued on the engine's stream (so it is recorded with a CUDA graph).
 *
 * Failure: a rank that fails calls abort (the binding does so whenever a
 * replica's call raises); its peers' pending and later operations then fail
 * with a message naming the rank, instead of waiting for it forever. A rank
 * whose process dies closes its sockets, which its peers see the same way.
 * A peer's failure, departure or silence is CNN_ERR_COMM (cnncuda.CommError);
 * a library's own failure keeps its status (NCCL's: CNN_ERR_DEVICE).
 */
#ifndef CNN_COMM_H
#define CNN_COMM_H

#include <stddef.h>

#include "cnn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cnn_reduce_op { CNN_REDUCE_SUM = 0, CNN_REDUCE_MEAN = 1 } cnn_reduce_op;

typedef struct cnn_comm cnn_comm;
struct cnn_comm {
    const char *kind; /* "host" or "nccl" */
    int rank, world;
    int device; /* nccl: the CUDA device of this rank; -1 for host */

    /* In place over the ranks: the sum (or mean) of `count` floats at buf.
     * buf is memory of ctx's engine: a host communicator works on host
     * memory and returns when done; a GPU communicator queues the work on
     * ctx's stream (it may be recorded) and returns. */
    cnn_status (*allreduce)(cnn_comm *comm, cnn_ctx *ctx, float *buf, size_t count, int op);
    /* rank 0's `count` floats at buf into every rank's buf (same rules) */
    cnn_status (*broadcast)(cnn_comm *comm, cnn_ctx *ctx, float *buf, size_t count);
    /* Waits until the work queued on ctx is done; fails (never hangs) when a
     * peer failed, aborted or left, or after the communicator's timeout. */
    cnn_status (*wait)(cnn_comm *comm, cnn_ctx *ctx);
    /* Makes this rank's pending and later operations fail with `why`, and
     * tells the peers (best effort). Callable from any thread, more than
     * once. */
    void (*abort)(cnn_comm *comm, const char *why);
    /* Frees it; the caller makes sure no operation is running. */
    void (*destroy)(cnn_comm *comm);
    void *impl;
};

/* ---------------------------------------------------------- host (TCP) */

/* Rank `rank` of `world`: rank 0 binds and listens on addr:port (port 0:
 * any free port; cnn_comm_host_port tells which) before returning; the
 * others only record where to connect. Nothing waits here. timeout_s bounds
 * every later wait for a peer (connecting included). */
cnn_status cnn_comm_host_create(const char *addr, int port, int rank, int world,
                                double timeout_s, cnn_comm **out);
/* The port rank 0 listens on (after create). */
int cnn_comm_host_port(const cnn_comm *comm);
/* The rendezvous: rank 0 accepts world - 1 peers, the others connect
 * (retrying until the timeout while rank 0 is not up yet). Blocks. */
cnn_status cnn_comm_host_connect(cnn_comm *comm);
/* rank 0's `bytes` bytes at buf into every rank's buf (host memory). */
cnn_status cnn_comm_host_broadcast_bytes(cnn_comm *comm, void *buf, size_t bytes);
/* Control-channel mode, for a communicator that carries no data after the
 * rendezvous: a thread watches the sockets and, when a peer aborts or
 * leaves, calls on_failure(arg, message) once (from that thread). Rank 0
 * relays a failure it sees to every other rank. The thread ends at abort or
 * destroy. */
cnn_status cnn_comm_host_watch(cnn_comm *comm, void (*on_failure)(void *arg, const char *message),
                               void *arg);

/* ---------------------------------------------------------------- nccl */

/* Whether NCCL was compiled in. */
int cnn_comm_nccl_available(void);
/* An NCCL communicator for rank control->rank of control->world on CUDA
 * device `device`: rank 0 makes the unique id, control carries it to the
 * others (after cnn_comm_host_connect), every rank initializes (blocks until
 * all have), and control becomes the watcher that aborts this communicator
 * when a peer fails. The new communicator owns control (destroys it). */
cnn_status cnn_comm_nccl_create(cnn_comm *control, int device, double timeout_s,
                                cnn_comm **out);

#ifdef __cplusplus
}
#endif
#endif /* CNN_COMM_H */
