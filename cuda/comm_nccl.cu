// comm_nccl.cu: the "nccl" communicator of comm.h: all-reduce and broadcast
// of a GPU engine's device memory over the GPUs of a data-parallel group,
// queued on the engine's stream (so a recorded step records them too).
// Compiled only where the build found NCCL (registry.c has the fallback).
//
// Non-blocking: a blocking NCCL communicator can wait forever, in its
// initialization or in a call, for a peer that is gone. Ours is made with
// config.blocking = 0, so every NCCL call returns at once (done, failed, or
// ncclInProgress) and we poll the communicator's state ourselves, checking
// the abort flag and a deadline between polls: a missing peer becomes an
// error within timeout_s, never a hang.
//
// Threads: the Net's thread makes the calls; abort may come from any thread,
// the control communicator's watcher included when a peer fails. Every NCCL
// call on the communicator is made holding `lock`, and the abort takes the
// handle away (NULL) under it: later operations return the recorded reason
// without touching NCCL. A non-blocking call returns quickly, so holding the
// lock across one never delays an abort for long.
//
// The abort hands ncclCommAbort to a thread of its own and does not wait for
// it: ncclCommAbort first raises NCCL's abort flag (the kernels of this
// communicator still on a stream, or replayed later, quit at once), then
// waits until every CUDA graph that recorded one of its calls is destroyed
// before it frees anything. The Net frees its recorded step only after the
// abort has been reported to it, so waiting here (on the watcher's thread,
// or holding the lock) would deadlock.
//
// Ownership of `control`: on success the new communicator owns it (its
// destroy destroys it); on failure it stays the caller's, aborted (so the
// peers hear that this rank will not join).
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <new>

#include "comm.h"
#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

constexpr long INIT_NAP_US = 1000;     // initialization takes seconds
constexpr long CALL_NAP_US = 100;      // a call answered ncclInProgress
constexpr long WAIT_NAP_US = 100;      // wait: the GPU's work is milliseconds
constexpr long FINALIZE_NAP_US = 1000; // destroy
constexpr size_t WHY_BYTES = 1024;

// What the control watcher's callback reaches. Watching starts before the
// initialization (see create); if the initialization then fails, control
// stays the caller's, its watcher may still call back, and the communicator
// is freed: the cell outlives it, emptied (target NULL), and is left
// allocated on purpose (a few bytes, once per failed create).
struct watch_cell {
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    cnn_comm *target = nullptr; // NULL once the communicator is gone
    ~watch_cell() { pthread_mutex_destroy(&lock); }
};

struct nccl_impl {
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; // held around every NCCL call on `nccl`
    ncclComm_t nccl = nullptr; // NULL before init and after abort or destroy
    cnn_comm *control = nullptr;
    watch_cell *cell = nullptr; // the watcher's way in
    bool watched = false;       // control's watcher was started with the cell
    double timeout_s = 0.0;
    std::atomic<bool> aborted{false};    // set once, after `why` is written
    std::atomic<bool> told_peers{false}; // control->abort called once
    char why[WHY_BYTES] = {0};           // the first abort's reason
    ~nccl_impl() { pthread_mutex_destroy(&lock); }
};

nccl_impl *impl_of(cnn_comm *c) { return (nccl_impl *)c->impl; }

// Holds a mutex for a scope. pthread's, not std::mutex: these functions are
// called from C, and std::mutex may throw.
struct held {
    pthread_mutex_t *m;
    explicit held(pthread_mutex_t &mutex) : m(&mutex) { pthread_mutex_lock(m); }
    ~held() { pthread_mutex_unlock(m); }
    held(const held &) = delete;
    held &operator=(const held &) = delete;
};

double now_s()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void nap(long us)
{
    timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, nullptr);
}

// Where an error happened, for every message: "NCCL <what> on rank r of w (GPU d)".
#define WHERE_FMT "NCCL %s on rank %d of %d (GPU %d)"
#define WHERE_ARGS(c, what) (what), (c)->rank, (c)->world, (c)->device

// A peer's failure, departure or silence is CNN_ERR_COMM (comm.h).
cnn_status aborted_error(cnn_comm *c, const char *what)
{
    return cnn_set_error(CNN_ERR_COMM, WHERE_FMT ": the data-parallel group was aborted: %s",
                         WHERE_ARGS(c, what), impl_of(c)->why);
}

// NCCL reports a failed allocation as a CUDA or system error; its last
// message says which ("Cuda failure 2 'out of memory'", "Failed to malloc").
bool out_of_memory(const char *last)
{
    return strstr(last, "out of memory") || strstr(last, "Failed to malloc") ||
           strstr(last, "Failed to calloc");
}

// handle: the NCCL communicator the failing call used (NULL when none);
// called holding the lock, so that an abort cannot free it meanwhile.
// ncclRemoteError is a peer's failure (its process exited, or the network
// failed): CNN_ERR_COMM, as comm.h asks; NCCL's own failures keep
// CNN_ERR_DEVICE (CNN_ERR_MEMORY when it ran out of memory).
cnn_status nccl_error(cnn_comm *c, const char *what, ncclResult_t r, ncclComm_t handle)
{
    const char *last = ncclGetLastError(handle);
    if (!last || !*last) last = "no detail from NCCL";
    const cnn_status st = r == ncclRemoteError    ? CNN_ERR_COMM
                          : out_of_memory(last) ? CNN_ERR_MEMORY
                                                : CNN_ERR_DEVICE;
    return cnn_set_error(st, WHERE_FMT ": %s (%s)", WHERE_ARGS(c, what), ncclGetErrorString(r),
                         last);
}

// The reaper: ncclCommAbort on a detached thread (see the top of the file).
// It touches nothing of ours, only NCCL's handle, which no one else holds.
void *reap(void *handle)
{
    ncclCommAbort((ncclComm_t)handle);
    return nullptr;
}

void abort_handle(ncclComm_t handle, int device)
{
    pthread_attr_t attr;
    pthread_t thread;
    bool started = false;
    if (pthread_attr_init(&attr) == 0) {
        started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&thread, &attr, reap, (void *)handle) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        // no thread to be had: abort here (this may wait for the recordings)
        const int previous = cnn_cuda_device_enter(device);
        ncclCommAbort(handle);
        cnn_cuda_device_leave(previous, device);
    }
}

// The abort: records the first reason, takes the NCCL communicator away
// (its abort raised at once, its memory freed when no recording holds it
// any more), and, when tell_peers, sends `why` to the peers over control,
// once. Idempotent, any thread, never waits for the GPU.
void stop(cnn_comm *c, const char *why, bool tell_peers)
{
    nccl_impl *im = impl_of(c);
    if (!why || !*why) why = "aborted";
    ncclComm_t handle;
    {
        held guard(im->lock);
        if (!im->aborted.load(std::memory_order_relaxed)) {
            snprintf(im->why, sizeof im->why, "%s", why);
            im->aborted.store(true, std::memory_order_release);
        }
        handle = im->nccl;
        im->nccl = nullptr;
    }
    if (handle) abort_handle(handle, c->device);
    if (tell_peers && !im->told_peers.exchange(true)) im->control->abort(im->control, why);
}

// The watcher's callback (its thread): a peer failed, aborted or left. The
// peers know already (the watcher has aborted control, and rank 0 relays),
// so only this rank stops.
void on_peer_failure(void *arg, const char *message)
{
    watch_cell *cell = (watch_cell *)arg;
    held guard(cell->lock);
    if (cell->target) stop(cell->target, message, false);
}

// The error just recorded on this thread becomes the group's abort reason:
// this rank stops and tells its peers. Returns `st` with the message kept
// (control->abort may record messages of its own).
cnn_status fail_group(cnn_comm *c, cnn_status st)
{
    char msg[WHY_BYTES];
    snprintf(msg, sizeof msg, "%s", cnn_last_error());
    stop(c, msg, true);
    return cnn_set_error(st, "%s", msg);
}

// The communicator's state (NCCL's async error), read holding the lock;
// an error is described there too (the handle is valid then). Returns
// CNN_OK with *state set, or the error (an abort included).
cnn_status poll_state(cnn_comm *c, const char *what, ncclResult_t *state)
{
    nccl_impl *im = impl_of(c);
    held guard(im->lock);
    if (!im->nccl) return aborted_error(c, what);
    const ncclResult_t q = ncclCommGetAsyncError(im->nccl, state);
    if (q != ncclSuccess) *state = q;
    if (*state != ncclSuccess && *state != ncclInProgress)
        return nccl_error(c, what, *state, im->nccl);
    return CNN_OK;
}

// A non-blocking call answered r (ncclSuccess or ncclInProgress; its
// caller reports any other answer): while it is ncclInProgress, polls the
// communicator's state every nap_us until it settles (NCCL completes a
// pending call inside ncclCommGetAsyncError, so the polling is what
// finishes it), an abort, or the deadline. A state error or the deadline
// aborts the group (NCCL: a communicator in error cannot be used again).
cnn_status settle(cnn_comm *c, const char *what, ncclResult_t r, double deadline, long nap_us)
{
    nccl_impl *im = impl_of(c);
    while (r == ncclInProgress) {
        nap(nap_us);
        const cnn_status st = poll_state(c, what, &r);
        if (st != CNN_OK)
            return im->aborted.load(std::memory_order_acquire) ? st : fail_group(c, st);
        if (r == ncclInProgress && now_s() > deadline) {
            cnn_set_error(CNN_ERR_COMM,
                          WHERE_FMT ": not done after %g s (the communicator's timeout): a peer "
                                    "may be missing, stuck or unreachable",
                          WHERE_ARGS(c, what), im->timeout_s);
            return fail_group(c, CNN_ERR_COMM);
        }
    }
    if (im->aborted.load(std::memory_order_acquire)) return aborted_error(c, what);
    return CNN_OK;
}

// ctx must be a GPU engine's context (its impl a cnn_cuda_impl: both GPU
// tables, and only they, have cuda_activate) on this communicator's device.
cnn_status check_ctx(cnn_comm *c, cnn_ctx *ctx, const char *what)
{
    if (!ctx || !ctx->backend || ctx->backend->activate != cuda_activate)
        return cnn_set_error(CNN_ERR_VALUE,
                             WHERE_FMT ": the engine must be 'cuda' or 'cudnn', got '%s'",
                             WHERE_ARGS(c, what),
                             ctx && ctx->backend ? ctx->backend->name : "(none)");
    if (ctx->device != c->device)
        return cnn_set_error(CNN_ERR_VALUE,
                             WHERE_FMT ": the engine's context is on GPU %d, not the "
                                       "communicator's",
                             WHERE_ARGS(c, what), ctx->device);
    return CNN_OK;
}

// buf (count floats) must be device memory of this communicator's GPU (the
// Net's gradient or parameter block). Checked outside stream capture only:
// the recorded step reuses the buffer the unrecorded step before it checked,
// and no call that is not stream work is risked inside a capture.
cnn_status check_buffer(cnn_comm *c, cnn_ctx *ctx, const float *buf, size_t count,
                        const char *what)
{
    if (!buf)
        return cnn_set_error(CNN_ERR_VALUE, WHERE_FMT ": no buffer for %zu floats",
                             WHERE_ARGS(c, what), count);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    char where[160];
    snprintf(where, sizeof where, WHERE_FMT, WHERE_ARGS(c, what));
    CNN_CUDA_TRY(cudaStreamIsCapturing(cnn_stream(ctx), &capture), where);
    if (capture != cudaStreamCaptureStatusNone) return CNN_OK;
    cudaPointerAttributes a;
    const cudaError_t err = cudaPointerGetAttributes(&a, buf);
    if (err != cudaSuccess) cudaGetLastError(); // a pointer CUDA does not know: not ours
    if (err != cudaSuccess || a.type != cudaMemoryTypeDevice || a.device != c->device)
        return cnn_set_error(CNN_ERR_VALUE, WHERE_FMT ": the buffer %p is not device memory of GPU %d",
                             WHERE_ARGS(c, what), (const void *)buf, c->device);
    return CNN_OK;
}

// buf (count floats, device memory of ctx): the sum or mean over the ranks,
// in place, queued on ctx's stream.
cnn_status nccl_allreduce(cnn_comm *c, cnn_ctx *ctx, float *buf, size_t count, int op)
{
    const char *what = "allreduce";
    nccl_impl *im = impl_of(c);
    if (im->aborted.load(std::memory_order_acquire)) return aborted_error(c, what);
    if (op != CNN_REDUCE_SUM && op != CNN_REDUCE_MEAN)
        return cnn_set_error(CNN_ERR_VALUE, WHERE_FMT ": unknown reduction %d", WHERE_ARGS(c, what),
                             op);
    CNN_TRY(check_ctx(c, ctx, what));
    if (count == 0) return CNN_OK; // every rank passes the same count: none calls NCCL
    CNN_TRY(check_buffer(c, ctx, buf, count, what));
    ncclResult_t r;
    {
        held guard(im->lock);
        if (!im->nccl) return aborted_error(c, what);
        r = ncclAllReduce(buf, buf, count, ncclFloat, op == CNN_REDUCE_MEAN ? ncclAvg : ncclSum,
                          im->nccl, cnn_stream(ctx));
        if (r != ncclSuccess && r != ncclInProgress) return nccl_error(c, what, r, im->nccl);
    }
    return settle(c, what, r, now_s() + im->timeout_s, CALL_NAP_US);
}

// buf (count floats, device memory of ctx): rank 0's into every rank's, in
// place, queued on ctx's stream.
cnn_status nccl_broadcast(cnn_comm *c, cnn_ctx *ctx, float *buf, size_t count)
{
    const char *what = "broadcast";
    nccl_impl *im = impl_of(c);
    if (im->aborted.load(std::memory_order_acquire)) return aborted_error(c, what);
    CNN_TRY(check_ctx(c, ctx, what));
    if (count == 0) return CNN_OK;
    CNN_TRY(check_buffer(c, ctx, buf, count, what));
    ncclResult_t r;
    {
        held guard(im->lock);
        if (!im->nccl) return aborted_error(c, what);
        r = ncclBroadcast(buf, buf, count, ncclFloat, 0, im->nccl, cnn_stream(ctx));
        if (r != ncclSuccess && r != ncclInProgress) return nccl_error(c, what, r, im->nccl);
    }
    return settle(c, what, r, now_s() + im->timeout_s, CALL_NAP_US);
}

// Polls ctx's stream instead of synchronizing with it: a blocking
// synchronize would wait forever on an NCCL kernel whose peer is gone. The
// timeout bounds the whole wait, so it must exceed the longest stretch of
// work queued between two waits.
cnn_status nccl_wait(cnn_comm *c, cnn_ctx *ctx)
{
    const char *what = "wait";
    nccl_impl *im = impl_of(c);
    CNN_TRY(check_ctx(c, ctx, what));
    char where[160];
    snprintf(where, sizeof where, WHERE_FMT, WHERE_ARGS(c, what));
    const double deadline = now_s() + im->timeout_s;
    for (;;) {
        if (im->aborted.load(std::memory_order_acquire)) return aborted_error(c, what);
        const cudaError_t done = cudaStreamQuery(cnn_stream(ctx));
        if (done != cudaSuccess && done != cudaErrorNotReady) return cnn_cuda_status(done, where);
        ncclResult_t state = ncclSuccess;
        const cnn_status st = poll_state(c, what, &state);
        if (st != CNN_OK)
            return im->aborted.load(std::memory_order_acquire) ? st : fail_group(c, st);
        if (done == cudaSuccess) return CNN_OK;
        if (now_s() > deadline) {
            cnn_set_error(CNN_ERR_COMM,
                          WHERE_FMT ": the GPU's work was not done after %g s (the "
                                    "communicator's timeout): a peer may be missing or stuck",
                          WHERE_ARGS(c, what), im->timeout_s);
            return fail_group(c, CNN_ERR_COMM);
        }
        nap(WAIT_NAP_US);
    }
}

void nccl_abort(cnn_comm *c, const char *why) { stop(c, why, true); }

// Frees the NCCL communicator (a finalize, polled, then a destroy; if it
// was aborted, or the finalize fails or passes the timeout, the abort's
// reaper instead), then the control communicator, which ends its watcher,
// so that no callback can reach this memory once it is freed. NCCL's
// finalize waits for the CUDA graphs that recorded this communicator's
// calls to be destroyed: the Net frees its recordings first (it holds the
// communicator until it is destroyed).
void nccl_destroy(cnn_comm *c)
{
    if (!c) return;
    nccl_impl *im = impl_of(c);
    const double deadline = now_s() + im->timeout_s;
    const int previous = cnn_cuda_device_enter(c->device);
    ncclResult_t r = ncclSuccess;
    {
        held guard(im->lock);
        if (im->nccl) r = ncclCommFinalize(im->nccl);
    }
    while (r == ncclInProgress && now_s() <= deadline) {
        nap(FINALIZE_NAP_US);
        held guard(im->lock);
        if (!im->nccl) break;
        const ncclResult_t q = ncclCommGetAsyncError(im->nccl, &r);
        if (q != ncclSuccess) r = q;
    }
    ncclComm_t left = nullptr; // what the finalize could not end
    {
        held guard(im->lock);
        if (im->nccl && r == ncclSuccess)
            ncclCommDestroy(im->nccl); // after a finalize: frees without waiting
        else
            left = im->nccl;
        im->nccl = nullptr;
    }
    if (left) abort_handle(left, c->device);
    cnn_cuda_device_leave(previous, c->device);
    if (im->control) im->control->destroy(im->control);
    delete im->cell;
    delete im;
    free(c);
}

// A create that failed after the communicator was made: the NCCL
// communicator aborted, the peers told (control aborted, left to the
// caller), the watcher's cell emptied (and left allocated: see watch_cell),
// the rest freed. Returns st with the message kept.
cnn_status give_up(cnn_comm *c, cnn_status st)
{
    char msg[WHY_BYTES];
    snprintf(msg, sizeof msg, "%s", cnn_last_error());
    stop(c, msg, true);
    nccl_impl *im = impl_of(c);
    if (im->watched) {
        held guard(im->cell->lock);
        im->cell->target = nullptr;
    } else {
        delete im->cell;
    }
    delete im;
    free(c);
    return cnn_set_error(st, "%s", msg);
}

// A create that failed before there was a communicator: control aborted
// (the peers hear of it) and left to the caller.
cnn_status give_up_control(cnn_comm *control, cnn_status st)
{
    char msg[WHY_BYTES];
    snprintf(msg, sizeof msg, "%s", cnn_last_error());
    control->abort(control, msg);
    return cnn_set_error(st, "%s", msg);
}

// Every rank joins the NCCL communicator named by rank 0's unique id, on
// `device`; polled, so an abort or the deadline ends the wait. Leaves the
// caller's current device as it was.
cnn_status init_rank(cnn_comm *c, const ncclUniqueId &id)
{
    const char *what = "initialization";
    nccl_impl *im = impl_of(c);
    char where[160];
    snprintf(where, sizeof where, WHERE_FMT, WHERE_ARGS(c, what));
    int previous = c->device;
    CNN_CUDA_TRY(cudaGetDevice(&previous), where);
    CNN_CUDA_TRY(cudaSetDevice(c->device), where); // NCCL joins on the current device
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r;
    {
        held guard(im->lock);
        if (im->aborted.load(std::memory_order_relaxed)) {
            cudaSetDevice(previous);
            return aborted_error(c, what);
        }
        ncclComm_t handle = nullptr;
        r = ncclCommInitRankConfig(&handle, c->world, id, c->rank, &config);
        im->nccl = handle; // set even on failure, so the abort frees it
        if (r != ncclSuccess && r != ncclInProgress) {
            const cnn_status st = nccl_error(c, what, r, handle);
            cudaSetDevice(previous);
            return st;
        }
    }
    const cnn_status st = settle(c, what, r, now_s() + im->timeout_s, INIT_NAP_US);
    cnn_cuda_device_leave(previous, c->device);
    return st;
}

} // namespace

extern "C" cnn_status cnn_comm_nccl_create(cnn_comm *control, int device, double timeout_s,
                                           cnn_comm **out)
{
    if (!control || !out)
        return cnn_set_error(CNN_ERR_INTERNAL, "cnn_comm_nccl_create: control and out are required");
    *out = nullptr;
    if (!control->kind || strcmp(control->kind, "host") != 0) // a caller's bug: not touched
        return cnn_set_error(CNN_ERR_INTERNAL,
                             "NCCL setup: the control communicator must be 'host', got '%s'",
                             control->kind ? control->kind : "(none)");
    if (!(timeout_s > 0.0)) {
        cnn_set_error(CNN_ERR_VALUE, "NCCL setup on rank %d: timeout must be positive, got %g",
                      control->rank, timeout_s);
        return give_up_control(control, CNN_ERR_VALUE);
    }
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count < 1) {
        cudaGetLastError();
        cnn_set_error(CNN_ERR_UNAVAILABLE, "NCCL setup on rank %d: no CUDA GPU found",
                      control->rank);
        return give_up_control(control, CNN_ERR_UNAVAILABLE);
    }
    if (device < 0 || device >= count) {
        cnn_set_error(CNN_ERR_VALUE,
                      "NCCL setup on rank %d: device: expected a CUDA device index in [0, %d), "
                      "got %d",
                      control->rank, count, device);
        return give_up_control(control, CNN_ERR_VALUE);
    }

    cnn_comm *c = (cnn_comm *)calloc(1, sizeof *c);
    nccl_impl *im = new (std::nothrow) nccl_impl();
    watch_cell *cell = new (std::nothrow) watch_cell();
    if (!c || !im || !cell) {
        free(c);
        delete im;
        delete cell;
        cnn_set_error(CNN_ERR_MEMORY, "NCCL setup on rank %d: out of host memory", control->rank);
        return give_up_control(control, CNN_ERR_MEMORY);
    }
    c->kind = "nccl";
    c->rank = control->rank;
    c->world = control->world;
    c->device = device;
    c->allreduce = nccl_allreduce;
    c->broadcast = nccl_broadcast;
    c->wait = nccl_wait;
    c->abort = nccl_abort;
    c->destroy = nccl_destroy;
    c->impl = im;
    im->cell = cell;
    im->control = control;
    im->timeout_s = timeout_s;

    // rank 0's unique id (the address of NCCL's own rendezvous) to every rank
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) {
        const ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) return give_up(c, nccl_error(c, "unique id", r, nullptr));
    }
    cnn_status st = cnn_comm_host_broadcast_bytes(control, &id, sizeof id);
    if (st != CNN_OK) return give_up(c, st);
    // Watching starts before the initialization, not after it: a peer that
    // fails while the others initialize (a bad device, say) then aborts
    // them at once instead of at the timeout. From here the callback may
    // run at any time; stop() makes that safe.
    cell->target = c;
    st = cnn_comm_host_watch(control, on_peer_failure, cell);
    if (st != CNN_OK) return give_up(c, st);
    im->watched = true;
    st = init_rank(c, id);
    if (st != CNN_OK) return give_up(c, st);
    *out = c;
    return CNN_OK;
}
