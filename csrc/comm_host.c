/* comm_host.c: the "host" communicator of comm.h: TCP sockets in a star
 * around rank 0.
 *
 * Rank 0 listens; every other rank connects once and says who it is. An
 * all-reduce sends each rank's buffer to rank 0, which adds them in rank
 * order (0 + 1 + 2 ...) and sends the result back: every rank ends with the
 * same bits, whatever the timing. That costs 2 (world - 1) buffer transfers
 * through rank 0 per call, which is fine for what it carries (the CPU
 * engines' gradients, and the rendezvous and failure notices of an NCCL
 * group), not for GPU-speed training: that is NCCL's job.
 *
 * Every message is a frame: a header (kind, sender's rank, payload bytes)
 * and the payload. A rank that fails sends ABORT with its message before
 * closing; one that ends normally sends BYE. Every wait is bounded by the
 * timeout and by the abort flag: abort shuts the sockets down, which wakes
 * any thread blocked on them. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"

enum { FRAME_HELLO = 0x48454c4f, FRAME_DATA = 0x44415441, FRAME_ABORT = 0x41424f52,
       FRAME_BYE = 0x42594521 };
enum { WHY_BYTES = 512, MAX_WORLD = 65536 };

typedef struct frame {
    uint32_t kind;
    int32_t rank;
    uint64_t bytes;
} frame;

typedef struct host_impl {
    char addr[256];
    int port;
    double timeout_s;
    int listen_fd;       /* rank 0, until the rendezvous is done */
    int *fds;            /* rank 0: fds[r], r in 1..world-1; others: fds[0] to rank 0 */
    int n_fds;
    int connected;
    float *scratch;      /* rank 0: one peer's buffer */
    size_t scratch_floats;
    pthread_mutex_t send_lock; /* one frame at a time on the sockets */
    atomic_int aborted;
    pthread_mutex_t why_lock;
    char why[WHY_BYTES];
    /* control-channel mode (cnn_comm_host_watch) */
    pthread_t watcher;
    int watching;
    int wake[2];         /* a pipe: a byte here ends the watcher */
    void (*on_failure)(void *, const char *);
    void *arg;
    atomic_int reported;
} host_impl;

static host_impl *impl_of(cnn_comm *c) { return (host_impl *)c->impl; }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void set_why(host_impl *h, const char *why)
{
    pthread_mutex_lock(&h->why_lock);
    if (!h->why[0]) snprintf(h->why, sizeof h->why, "%s", why);
    pthread_mutex_unlock(&h->why_lock);
}

/* The error of an aborted communicator: the first reason recorded. */
static cnn_status aborted_error(cnn_comm *c)
{
    host_impl *h = impl_of(c);
    char why[WHY_BYTES];
    pthread_mutex_lock(&h->why_lock);
    snprintf(why, sizeof why, "%s", h->why[0] ? h->why : "the communicator was aborted");
    pthread_mutex_unlock(&h->why_lock);
    return cnn_set_error(CNN_ERR_COMM, "data parallel, rank %d of %d: %s", c->rank, c->world,
                         why);
}

/* Waits until fd is ready for `events` (POLLIN or POLLOUT) or the deadline
 * passes. 0 ready, -1 error recorded. */
static int wait_fd(cnn_comm *c, int fd, short events, double deadline, int peer)
{
    host_impl *h = impl_of(c);
    for (;;) {
        if (atomic_load(&h->aborted)) return (aborted_error(c), -1);
        double left = deadline - now_s();
        if (left <= 0) {
            cnn_set_error(CNN_ERR_COMM,
                          "data parallel, rank %d of %d: no progress with rank %d in %.0f s "
                          "(it may be stuck, or far behind; the timeout is the strategy's "
                          "timeout)",
                          c->rank, c->world, peer, h->timeout_s);
            return -1;
        }
        /* wake at least every 100 ms to see an abort from another thread
         * (shutdown also wakes poll, this is a second guard) */
        int ms = left > 0.1 ? 100 : (int)(left * 1000.0) + 1;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) {
            cnn_set_error(CNN_ERR_COMM, "data parallel, rank %d: poll: %s", c->rank,
                          strerror(errno));
            return -1;
        }
    }
}

/* After a failed send: the peer may have said why it left (an ABORT frame
 * waiting to be read). 1 and the communicator aborted with its message if
 * so. */
static int peer_said_abort(cnn_comm *c, int fd)
{
    frame f;
    if (recv(fd, &f, sizeof f, MSG_DONTWAIT | MSG_WAITALL) != (ssize_t)sizeof f ||
        f.kind != FRAME_ABORT)
        return 0;
    char msg[WHY_BYTES] = {0};
    size_t n = f.bytes < sizeof msg - 1 ? (size_t)f.bytes : sizeof msg - 1;
    if (recv(fd, msg, n, MSG_DONTWAIT | MSG_WAITALL) < 0) return 0;
    c->abort(c, msg);
    return 1;
}

static int send_all(cnn_comm *c, int fd, const void *buf, size_t bytes, double deadline,
                    int peer)
{
    const char *p = buf;
    while (bytes) {
        if (wait_fd(c, fd, POLLOUT, deadline, peer) < 0) return -1;
        ssize_t k = send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            if (atomic_load(&impl_of(c)->aborted) || peer_said_abort(c, fd))
                return (aborted_error(c), -1);
            cnn_set_error(CNN_ERR_COMM,
                          "data parallel, rank %d of %d: rank %d is gone (%s): it failed or "
                          "exited",
                          c->rank, c->world, peer, strerror(errno));
            return -1;
        }
        p += k;
        bytes -= (size_t)k;
    }
    return 0;
}

static int recv_all(cnn_comm *c, int fd, void *buf, size_t bytes, double deadline, int peer)
{
    char *p = buf;
    while (bytes) {
        if (wait_fd(c, fd, POLLIN, deadline, peer) < 0) return -1;
        ssize_t k = recv(fd, p, bytes, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        if (k <= 0) {
            if (atomic_load(&impl_of(c)->aborted)) return (aborted_error(c), -1);
            cnn_set_error(CNN_ERR_COMM,
                          "data parallel, rank %d of %d: rank %d closed the connection "
                          "without a word: it failed or exited",
                          c->rank, c->world, peer);
            return -1;
        }
        p += k;
        bytes -= (size_t)k;
    }
    return 0;
}

static int send_frame(cnn_comm *c, int fd, uint32_t kind, const void *payload, size_t bytes,
                      double deadline, int peer)
{
    host_impl *h = impl_of(c);
    frame f = {kind, c->rank, bytes};
    pthread_mutex_lock(&h->send_lock);
    int r = send_all(c, fd, &f, sizeof f, deadline, peer);
    if (r == 0 && bytes) r = send_all(c, fd, payload, bytes, deadline, peer);
    pthread_mutex_unlock(&h->send_lock);
    return r;
}

/* Reads one frame's header from `peer`; an ABORT frame's message becomes
 * this communicator's error (and aborts it: rank 0 then tells the others). */
static int recv_header(cnn_comm *c, int fd, frame *f, double deadline, int peer)
{
    if (recv_all(c, fd, f, sizeof *f, deadline, peer) < 0) return -1;
    if (f->kind == FRAME_ABORT) {
        char msg[WHY_BYTES] = {0};
        size_t n = f->bytes < sizeof msg - 1 ? (size_t)f->bytes : sizeof msg - 1;
        if (recv_all(c, fd, msg, n, deadline, peer) < 0) return -1;
        c->abort(c, msg);
        aborted_error(c);
        return -1;
    }
    if (f->kind == FRAME_BYE) {
        cnn_set_error(CNN_ERR_COMM,
                      "data parallel, rank %d of %d: rank %d left the group (its training "
                      "ended) while this rank still expected data",
                      c->rank, c->world, peer);
        return -1;
    }
    return 0;
}

static int expect_data(cnn_comm *c, int fd, size_t bytes, double deadline, int peer)
{
    frame f;
    if (recv_header(c, fd, &f, deadline, peer) < 0) return -1;
    if (f.kind != FRAME_DATA || f.bytes != bytes) {
        cnn_set_error(CNN_ERR_COMM,
                      "data parallel, rank %d of %d: rank %d sent %llu bytes where %zu were "
                      "expected (are all ranks training the same model?)",
                      c->rank, c->world, peer, (unsigned long long)f.bytes, bytes);
        c->abort(c, "the ranks disagree on a message's size (different models?)");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- operations */

static cnn_status host_allreduce(cnn_comm *c, cnn_ctx *ctx, float *buf, size_t count, int op)
{
    (void)ctx;
    host_impl *h = impl_of(c);
    if (atomic_load(&h->aborted)) return aborted_error(c);
    if (!h->connected)
        return cnn_set_error(CNN_ERR_INTERNAL, "data parallel: the communicator is not connected");
    if (c->world == 1 || count == 0) return CNN_OK;
    const size_t bytes = count * sizeof(float);
    const double deadline = now_s() + h->timeout_s;
    if (c->rank != 0) {
        if (send_frame(c, h->fds[0], FRAME_DATA, buf, bytes, deadline, 0) < 0 ||
            expect_data(c, h->fds[0], bytes, deadline, 0) < 0 ||
            recv_all(c, h->fds[0], buf, bytes, deadline, 0) < 0)
            return CNN_ERR_COMM;
        return CNN_OK;
    }
    if (h->scratch_floats < count) {
        float *s = realloc(h->scratch, bytes);
        if (!s)
            return cnn_set_error(CNN_ERR_MEMORY, "data parallel: out of host memory (%zu bytes)",
                                 bytes);
        h->scratch = s;
        h->scratch_floats = count;
    }
    for (int r = 1; r < c->world; r++) {
        if (expect_data(c, h->fds[r], bytes, deadline, r) < 0 ||
            recv_all(c, h->fds[r], h->scratch, bytes, deadline, r) < 0)
            return CNN_ERR_COMM;
        for (size_t i = 0; i < count; i++) buf[i] += h->scratch[i];
    }
    if (op == CNN_REDUCE_MEAN) {
        const float w = (float)c->world;
        for (size_t i = 0; i < count; i++) buf[i] /= w;
    }
    for (int r = 1; r < c->world; r++)
        if (send_frame(c, h->fds[r], FRAME_DATA, buf, bytes, deadline, r) < 0)
            return CNN_ERR_COMM;
    return CNN_OK;
}

cnn_status cnn_comm_host_broadcast_bytes(cnn_comm *c, void *buf, size_t bytes)
{
    host_impl *h = impl_of(c);
    if (atomic_load(&h->aborted)) return aborted_error(c);
    if (!h->connected)
        return cnn_set_error(CNN_ERR_INTERNAL, "data parallel: the communicator is not connected");
    if (c->world == 1 || bytes == 0) return CNN_OK;
    const double deadline = now_s() + h->timeout_s;
    if (c->rank != 0) {
        if (expect_data(c, h->fds[0], bytes, deadline, 0) < 0 ||
            recv_all(c, h->fds[0], buf, bytes, deadline, 0) < 0)
            return CNN_ERR_COMM;
        return CNN_OK;
    }
    for (int r = 1; r < c->world; r++)
        if (send_frame(c, h->fds[r], FRAME_DATA, buf, bytes, deadline, r) < 0)
            return CNN_ERR_COMM;
    return CNN_OK;
}

static cnn_status host_broadcast(cnn_comm *c, cnn_ctx *ctx, float *buf, size_t count)
{
    (void)ctx;
    return cnn_comm_host_broadcast_bytes(c, buf, count * sizeof(float));
}

static cnn_status host_wait(cnn_comm *c, cnn_ctx *ctx)
{
    host_impl *h = impl_of(c);
    if (atomic_load(&h->aborted)) return aborted_error(c);
    return ctx && ctx->backend->synchronize ? ctx->backend->synchronize(ctx) : CNN_OK;
}

static void shut_all(host_impl *h)
{
    for (int i = 0; i < h->n_fds; i++)
        if (h->fds[i] >= 0) shutdown(h->fds[i], SHUT_RDWR);
    if (h->listen_fd >= 0) shutdown(h->listen_fd, SHUT_RDWR);
}

static void host_abort(cnn_comm *c, const char *why)
{
    host_impl *h = impl_of(c);
    char msg[WHY_BYTES];
    snprintf(msg, sizeof msg, "%s", why && *why ? why : "aborted");
    set_why(h, msg);
    if (atomic_exchange(&h->aborted, 1)) return;
    /* Tell the peers, without waiting: a frame is sent only when no other
     * thread is in the middle of one (it would be cut in two), and only as
     * much as the socket takes at once. */
    if (pthread_mutex_trylock(&h->send_lock) == 0) {
        size_t n = strlen(msg);
        frame f = {FRAME_ABORT, c->rank, n};
        for (int i = 0; i < h->n_fds; i++) {
            if (h->fds[i] < 0) continue;
            if (send(h->fds[i], &f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof f)
                (void)send(h->fds[i], msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        pthread_mutex_unlock(&h->send_lock);
    }
    shut_all(h);
    if (h->watching) {
        char b = 1;
        (void)!write(h->wake[1], &b, 1);
    }
}

static void host_destroy(cnn_comm *c)
{
    if (!c) return;
    host_impl *h = impl_of(c);
    if (h) {
        if (!atomic_load(&h->aborted) && h->connected) {
            /* a normal end: say so, so that a watching peer does not take the
             * closed socket for a failure */
            frame f = {FRAME_BYE, c->rank, 0};
            for (int i = 0; i < h->n_fds; i++)
                if (h->fds[i] >= 0) (void)send(h->fds[i], &f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (h->watching) {
            char b = 1;
            (void)!write(h->wake[1], &b, 1);
            pthread_join(h->watcher, NULL);
        }
        for (int i = 0; i < h->n_fds; i++)
            if (h->fds[i] >= 0) close(h->fds[i]);
        if (h->listen_fd >= 0) close(h->listen_fd);
        if (h->wake[0] >= 0) close(h->wake[0]);
        if (h->wake[1] >= 0) close(h->wake[1]);
        pthread_mutex_destroy(&h->send_lock);
        pthread_mutex_destroy(&h->why_lock);
        free(h->fds);
        free(h->scratch);
        free(h);
    }
    free(c);
}

/* ------------------------------------------------------------ rendezvous */

static int resolve(const char *addr, int port, struct addrinfo **out, int passive)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    return getaddrinfo(addr, service, &hints, out);
}

cnn_status cnn_comm_host_create(const char *addr, int port, int rank, int world,
                                double timeout_s, cnn_comm **out)
{
    *out = NULL;
    if (world < 1 || world > MAX_WORLD)
        return cnn_set_error(CNN_ERR_VALUE, "world_size: expected 1 to %d ranks, got %d",
                             MAX_WORLD, world);
    if (rank < 0 || rank >= world)
        return cnn_set_error(CNN_ERR_VALUE, "rank: expected 0 <= rank < %d, got %d", world, rank);
    if (port < 0 || port > 65535)
        return cnn_set_error(CNN_ERR_VALUE, "port: expected 0 to 65535, got %d", port);
    if (rank != 0 && port == 0)
        return cnn_set_error(CNN_ERR_VALUE, "port: rank %d needs rank 0's port, got 0", rank);
    if (!(timeout_s > 0))
        return cnn_set_error(CNN_ERR_VALUE, "timeout: expected a positive number of seconds, "
                             "got %g", timeout_s);
    if (!addr || !*addr || strlen(addr) >= 256)
        return cnn_set_error(CNN_ERR_VALUE, "addr: expected a host name or address");
    cnn_comm *c = calloc(1, sizeof *c);
    host_impl *h = calloc(1, sizeof *h);
    int n_fds = rank == 0 ? world : 1;
    int *fds = malloc((size_t)n_fds * sizeof *fds);
    if (!c || !h || !fds) {
        free(c);
        free(h);
        free(fds);
        return cnn_set_error(CNN_ERR_MEMORY, "data parallel: out of host memory");
    }
    for (int i = 0; i < n_fds; i++) fds[i] = -1;
    c->kind = "host";
    c->rank = rank;
    c->world = world;
    c->device = -1;
    c->allreduce = host_allreduce;
    c->broadcast = host_broadcast;
    c->wait = host_wait;
    c->abort = host_abort;
    c->destroy = host_destroy;
    c->impl = h;
    snprintf(h->addr, sizeof h->addr, "%s", addr);
    h->port = port;
    h->timeout_s = timeout_s;
    h->listen_fd = -1;
    h->fds = fds;
    h->n_fds = n_fds;
    h->wake[0] = h->wake[1] = -1;
    pthread_mutex_init(&h->send_lock, NULL);
    pthread_mutex_init(&h->why_lock, NULL);
    if (rank != 0 || world == 1) {
        *out = c;
        return CNN_OK;
    }
    struct addrinfo *ai = NULL;
    int gai = resolve(addr, port, &ai, 1);
    if (gai != 0) {
        host_destroy(c);
        return cnn_set_error(CNN_ERR_VALUE, "addr: cannot resolve %s: %s", addr,
                             gai_strerror(gai));
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, world) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        host_destroy(c);
        return cnn_set_error(CNN_ERR_COMM, "data parallel, rank 0: cannot listen on %s:%d: %s",
                             addr, port, strerror(e));
    }
    freeaddrinfo(ai);
    struct sockaddr_in bound;
    socklen_t len = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &len) == 0) h->port = ntohs(bound.sin_port);
    h->listen_fd = fd;
    *out = c;
    return CNN_OK;
}

int cnn_comm_host_port(const cnn_comm *c) { return ((const host_impl *)c->impl)->port; }

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

static cnn_status accept_peers(cnn_comm *c, double deadline)
{
    host_impl *h = impl_of(c);
    for (int joined = 1; joined < c->world;) {
        if (wait_fd(c, h->listen_fd, POLLIN, deadline, -1) < 0) {
            return cnn_set_error(CNN_ERR_COMM,
                                 "data parallel, rank 0: %d of %d ranks joined within %.0f s "
                                 "(listening on %s:%d)",
                                 joined, c->world, h->timeout_s, h->addr, h->port);
        }
        int fd = accept(h->listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
            if (atomic_load(&h->aborted)) return aborted_error(c);
            return cnn_set_error(CNN_ERR_COMM, "data parallel, rank 0: accept: %s",
                                 strerror(errno));
        }
        tune(fd);
        frame f;
        int32_t world = 0;
        if (recv_all(c, fd, &f, sizeof f, deadline, -1) < 0 || f.kind != FRAME_HELLO ||
            f.bytes != sizeof world || recv_all(c, fd, &world, sizeof world, deadline, -1) < 0) {
            close(fd); /* not one of ours (a port scan, a stale process): keep listening */
            if (atomic_load(&h->aborted)) return aborted_error(c);
            continue;
        }
        if (world != c->world || f.rank < 1 || f.rank >= c->world || h->fds[f.rank] >= 0) {
            close(fd);
            return cnn_set_error(CNN_ERR_VALUE,
                                 "data parallel, rank 0: a process joined as rank %d of %d, "
                                 "expected a new rank in 1..%d of %d (is WORLD_SIZE the same "
                                 "everywhere, and each RANK used once?)",
                                 (int)f.rank, (int)world, c->world - 1, c->world);
        }
        h->fds[f.rank] = fd;
        joined++;
    }
    close(h->listen_fd);
    h->listen_fd = -1;
    /* everyone is here: tell each rank (its connect returns then) */
    int32_t world = c->world;
    for (int r = 1; r < c->world; r++)
        if (send_frame(c, h->fds[r], FRAME_HELLO, &world, sizeof world, deadline, r) < 0)
            return CNN_ERR_COMM;
    return CNN_OK;
}

static cnn_status connect_to_root(cnn_comm *c, double deadline)
{
    host_impl *h = impl_of(c);
    struct addrinfo *ai = NULL;
    int gai = resolve(h->addr, h->port, &ai, 0);
    if (gai != 0)
        return cnn_set_error(CNN_ERR_VALUE, "addr: cannot resolve %s: %s", h->addr,
                             gai_strerror(gai));
    int fd = -1, last = 0;
    /* rank 0 may not be listening yet: try again until the deadline */
    while (fd < 0) {
        if (atomic_load(&h->aborted)) {
            freeaddrinfo(ai);
            return aborted_error(c);
        }
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        last = errno;
        if (fd >= 0) close(fd);
        fd = -1;
        if (now_s() > deadline) {
            freeaddrinfo(ai);
            return cnn_set_error(CNN_ERR_COMM,
                                 "data parallel, rank %d: cannot reach rank 0 at %s:%d within "
                                 "%.0f s: %s",
                                 c->rank, h->addr, h->port, h->timeout_s, strerror(last));
        }
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(ai);
    tune(fd);
    h->fds[0] = fd;
    int32_t world = c->world;
    frame f;
    if (send_frame(c, fd, FRAME_HELLO, &world, sizeof world, deadline, 0) < 0 ||
        recv_header(c, fd, &f, deadline, 0) < 0)
        return CNN_ERR_COMM;
    if (f.kind != FRAME_HELLO || f.bytes != sizeof world ||
        recv_all(c, fd, &world, sizeof world, deadline, 0) < 0 || world != c->world)
        return cnn_set_error(CNN_ERR_COMM, "data parallel, rank %d: rank 0 at %s:%d answered "
                             "with something else than cnncuda's greeting",
                             c->rank, h->addr, h->port);
    return CNN_OK;
}

cnn_status cnn_comm_host_connect(cnn_comm *c)
{
    host_impl *h = impl_of(c);
    if (h->connected) return CNN_OK;
    if (atomic_load(&h->aborted)) return aborted_error(c);
    const double deadline = now_s() + h->timeout_s;
    if (c->world > 1) CNN_TRY(c->rank == 0 ? accept_peers(c, deadline) : connect_to_root(c, deadline));
    h->connected = 1;
    return CNN_OK;
}

/* --------------------------------------------------------- watcher thread */

static void report(cnn_comm *c, const char *msg)
{
    host_impl *h = impl_of(c);
    c->abort(c, msg); /* rank 0: tells every other rank */
    if (!atomic_exchange(&h->reported, 1) && h->on_failure) h->on_failure(h->arg, msg);
}

static void *watch_main(void *arg)
{
    cnn_comm *c = arg;
    host_impl *h = impl_of(c);
    struct pollfd *p = calloc((size_t)h->n_fds + 1, sizeof *p);
    int *peer = calloc((size_t)h->n_fds + 1, sizeof *peer);
    if (!p || !peer) {
        free(p);
        free(peer);
        return NULL;
    }
    int live = 0;
    for (int i = 0; i < h->n_fds; i++)
        if (h->fds[i] >= 0) live++;
    while (live > 0 && !atomic_load(&h->aborted)) {
        int n = 0;
        p[n].fd = h->wake[0];
        p[n].events = POLLIN;
        peer[n++] = -1;
        for (int i = 0; i < h->n_fds; i++) {
            if (h->fds[i] < 0) continue;
            p[n].fd = h->fds[i];
            p[n].events = POLLIN;
            p[n].revents = 0;
            peer[n++] = c->rank == 0 ? i : 0;
        }
        if (poll(p, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[0].revents) break; /* abort or destroy */
        for (int k = 1; k < n; k++) {
            if (!p[k].revents) continue;
            frame f;
            ssize_t got = recv(p[k].fd, &f, sizeof f, MSG_WAITALL);
            char msg[WHY_BYTES];
            if (got == (ssize_t)sizeof f && f.kind == FRAME_BYE) {
                /* a normal end: stop watching that socket */
                int *slot = c->rank == 0 ? &h->fds[peer[k]] : &h->fds[0];
                close(*slot);
                *slot = -1;
                live--;
                continue;
            }
            if (got == (ssize_t)sizeof f && f.kind == FRAME_ABORT) {
                char text[WHY_BYTES] = {0};
                size_t m = f.bytes < sizeof text - 1 ? (size_t)f.bytes : sizeof text - 1;
                (void)!recv(p[k].fd, text, m, MSG_WAITALL);
                snprintf(msg, sizeof msg, "%s", text);
            } else {
                snprintf(msg, sizeof msg, "rank %d closed the connection without a word: it "
                         "failed or exited", peer[k]);
            }
            report(c, msg);
            live = 0;
            break;
        }
    }
    free(p);
    free(peer);
    return NULL;
}

cnn_status cnn_comm_host_watch(cnn_comm *c, void (*on_failure)(void *arg, const char *message),
                               void *arg)
{
    host_impl *h = impl_of(c);
    if (!h->connected || h->watching)
        return cnn_set_error(CNN_ERR_INTERNAL, "data parallel: watch needs a connected "
                             "communicator, once");
    if (pipe(h->wake) < 0)
        return cnn_set_error(CNN_ERR_COMM, "data parallel: pipe: %s", strerror(errno));
    h->on_failure = on_failure;
    h->arg = arg;
    if (pthread_create(&h->watcher, NULL, watch_main, c) != 0)
        return cnn_set_error(CNN_ERR_COMM, "data parallel: cannot start the watcher thread");
    h->watching = 1;
    return CNN_OK;
}
