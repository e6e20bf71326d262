// upload_samples.cu: the user's samples (float32, float64 or uint8, NHWC)
// to float32 NCHW on the GPU, converted and checked on the way.
//
// fit's training and validation sets, and evaluate's and predict's inputs,
// arrive as the user holds them: CIFAR-10's 50,000 images divided by 255.0
// are 1.2 GB of float64. One thread converting them and a pageable copy of
// the result took 0.4 s before the first step; here the work is cut into
// chunks of whole rows (2 MiB of float32 by default) that up to 16 host
// threads take in turn. Each worker converts a chunk into one of its two
// pinned buffers (host_convert.c: the cast and the finiteness check in one
// pass), queues its copy to the device on its own stream, and converts its
// next chunk into the other buffer while the copy runs; the chunk is then
// transposed into place on that stream. The host's memory bandwidth and the
// copy engine work at once; the conversion is the same C code every engine
// runs, so the bits are the cpu engine's (and NumPy's cast's).
//
// The device staging, streams and events are made on a context's first
// call and kept (cnn_cuda_uploader_free at its end); the pinned host
// buffers on the process's first call, kept until it exits (pinning costs
// far more than a chunk's copy). Workers are threads of this call only, so
// nothing is left running across a fork.
//
// A value that is not finite: the first one (the smallest flat index over
// all workers, chunks past it skipped) is refused with cnn_refuse_value.
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_ops.h"

#define UPLOAD_MAX_WORKERS 16
#define UPLOAD_CHUNK_BYTES ((size_t)2 << 20)

// A context's part: device staging, a stream per worker and events.
struct cnn_cuda_uploader {
    int workers;
    size_t chunk_bytes; // of each buffer below
    char *staging_block; // one allocation, cut into the buffers below
    float *staging[UPLOAD_MAX_WORKERS][2]; // device: a chunk before its transpose
    cudaStream_t streams[UPLOAD_MAX_WORKERS];
    cudaEvent_t copied[UPLOAD_MAX_WORKERS][2]; // the copy out of pinned buffer (w, s) is done
};

// The CPUs this process may run on (taskset and cgroups' cpusets shrink it).
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    return 1;
}

void cnn_cuda_uploader_free(cnn_cuda_impl *impl)
{
    cnn_cuda_uploader *u = impl->uploader;
    if (!u) return;
    for (int w = 0; w < UPLOAD_MAX_WORKERS; w++) {
        if (u->streams[w]) cudaStreamSynchronize(u->streams[w]);
        for (int s = 0; s < 2; s++)
            if (u->copied[w][s]) cudaEventDestroy(u->copied[w][s]);
        if (u->streams[w]) cudaStreamDestroy(u->streams[w]);
    }
    if (u->staging_block) cudaFree(u->staging_block);
    free(u);
    impl->uploader = NULL;
    cudaGetLastError();
}

// The context's uploader with chunks of at least `chunk_bytes`, made (or
// made anew, larger) here, on the context's device.
static cnn_status uploader_for(cnn_cuda_impl *impl, size_t chunk_bytes)
{
    if (impl->uploader && impl->uploader->chunk_bytes >= chunk_bytes) return CNN_OK;
    cnn_cuda_uploader_free(impl);
    cnn_cuda_uploader *u = (cnn_cuda_uploader *)calloc(1, sizeof *u);
    if (!u) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory for the GPU uploader");
    impl->uploader = u;
    const int cpus = usable_cpus();
    u->workers = cpus < UPLOAD_MAX_WORKERS ? cpus : UPLOAD_MAX_WORKERS;
    u->chunk_bytes = chunk_bytes;
    cudaError_t err = cudaMalloc((void **)&u->staging_block, (size_t)u->workers * 2 * chunk_bytes);
    for (int w = 0; w < u->workers && err == cudaSuccess; w++) {
        err = cudaStreamCreateWithFlags(&u->streams[w], cudaStreamNonBlocking);
        for (int s = 0; s < 2 && err == cudaSuccess; s++) {
            u->staging[w][s] = (float *)(u->staging_block + ((size_t)w * 2 + s) * chunk_bytes);
            err = cudaEventCreateWithFlags(&u->copied[w][s], cudaEventDisableTiming);
        }
    }
    if (err != cudaSuccess) {
        cnn_cuda_uploader_free(impl);
        return cnn_cuda_status(err, "making the GPU uploader");
    }
    return CNN_OK;
}

// The pinned host buffers are the process's, not a context's: pinning
// costs about 0.9 ms a MiB (H100 host, 2026-11-26: a new model's first fit
// spent 0.083 s before its first step with 64 MiB pinned for its context,
// 0.038 s with 16 MiB, whose smaller chunks then made set_data slower), so
// it is paid once per process. An upload holds them, and pinned_lock, from
// its first chunk to its last copy's end: uploads to several GPUs at once
// (replicas) take turns. Worker w's buffer s is pinned_pool at
// (w * 2 + s) * chunk bytes.
static std::mutex pinned_lock;
static char *pinned_pool;
static size_t pinned_bytes;
static pid_t pinned_pid; // a forked child leaves its parent's pool alone

static void free_pinned_pool(void)
{
    if (pinned_pool && getpid() == pinned_pid) cudaFreeHost(pinned_pool);
    pinned_pool = NULL;
    pinned_bytes = 0;
}

// The pool, of at least `bytes`; pinned_lock held.
static cnn_status pinned_for(size_t bytes)
{
    static bool registered = false;
    if (pinned_pool && pinned_bytes >= bytes && getpid() == pinned_pid) return CNN_OK;
    free_pinned_pool();
    cudaError_t err = cudaHostAlloc((void **)&pinned_pool, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
        pinned_pool = NULL;
        return cnn_cuda_status(err, "pinning the GPU uploader's host buffers");
    }
    pinned_bytes = bytes;
    pinned_pid = getpid();
    if (!registered) registered = atexit(free_pinned_pool) == 0;
    return CNN_OK;
}

namespace {

// One call's work, shared by its workers.
struct upload_job {
    const cnn_host_array *a;
    float *dst;
    long n, chunk_rows, chunks;
    size_t row; // floats per sample
    int h, w, c, transpose, device;
    cnn_cuda_uploader *u;
    char *pinned; // the pool (pinned_for)
    std::atomic<long> next{0};
    std::atomic<int64_t> first_bad{INT64_MAX};
    std::mutex failed_lock;
    cnn_status failed = CNN_OK;
    char message[512] = "";
};

void fail(upload_job *job, cnn_status st)
{
    std::lock_guard<std::mutex> hold(job->failed_lock);
    if (job->failed != CNN_OK) return;
    job->failed = st;
    snprintf(job->message, sizeof job->message, "%s", cnn_last_error());
}

void lower_first_bad(upload_job *job, int64_t index)
{
    int64_t seen = job->first_bad.load();
    while (index < seen && !job->first_bad.compare_exchange_weak(seen, index)) {
    }
}

// Worker `w`: chunks by the shared counter, alternating its two buffers.
void upload_worker(upload_job *job, int w)
{
    cnn_cuda_uploader *u = job->u;
    cudaStream_t stream = u->streams[w];
    cnn_status st = cnn_cuda_status(cudaSetDevice(job->device), "uploading samples");
    int slot = 0;
    for (long k = job->next++; st == CNN_OK && k < job->chunks; k = job->next++) {
        const long at = k * job->chunk_rows;
        const long m = job->n - at < job->chunk_rows ? job->n - at : job->chunk_rows;
        const size_t first = (size_t)at * job->row, count = (size_t)m * job->row;
        if ((int64_t)first > job->first_bad.load()) continue; // an earlier value is refused
        if (job->failed != CNN_OK) break;
        float *host = (float *)(job->pinned + ((size_t)w * 2 + slot) * u->chunk_bytes);
        float *staged = u->staging[w][slot];
        // the copy out of this buffer, two chunks ago, must be done
        st = cnn_cuda_status(cudaEventSynchronize(u->copied[w][slot]), "uploading samples");
        if (st != CNN_OK) break;
        const int64_t bad = cnn_to_float32(host, job->a, first, count);
        if (bad >= 0) {
            lower_first_bad(job, bad);
            continue;
        }
        float *to = job->transpose ? staged : job->dst + first;
        st = cnn_cuda_status(cudaMemcpyAsync(to, host, count * sizeof(float),
                                             cudaMemcpyHostToDevice, stream),
                             "uploading samples to the GPU");
        if (st == CNN_OK)
            st = cnn_cuda_status(cudaEventRecord(u->copied[w][slot], stream), "uploading samples");
        if (st == CNN_OK && job->transpose)
            st = cnn_cuda_nchw_from_nhwc_on(stream, (int)m, job->h, job->w, job->c, staged,
                                            job->dst + first);
        slot ^= 1;
    }
    if (st == CNN_OK)
        st = cnn_cuda_status(cudaStreamSynchronize(stream), "uploading samples to the GPU");
    if (st != CNN_OK) fail(job, st);
}

} // namespace

cnn_status cuda_upload_samples(cnn_ctx *ctx, float *dst, const cnn_host_array *a, long n, int h,
                               int w, int c, int transpose)
{
    if (n < 1) return CNN_OK;
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    const size_t row = (size_t)h * w * c;
    const size_t row_bytes = row * sizeof(float);
    const size_t chunk_bytes = row_bytes > UPLOAD_CHUNK_BYTES ? row_bytes : UPLOAD_CHUNK_BYTES;
    CNN_TRY(uploader_for(impl, chunk_bytes));
    std::lock_guard<std::mutex> hold(pinned_lock);
    CNN_TRY(pinned_for((size_t)UPLOAD_MAX_WORKERS * 2 * impl->uploader->chunk_bytes));
    // dst may still be read by work queued on the context's stream (an
    // earlier part of a predict): the workers' streams do not wait for it
    CNN_CUDA_TRY(cudaStreamSynchronize(impl->stream), "uploading samples");
    upload_job job;
    job.a = a;
    job.dst = dst;
    job.n = n;
    job.row = row;
    job.chunk_rows = (long)(impl->uploader->chunk_bytes / row_bytes);
    job.chunks = (n + job.chunk_rows - 1) / job.chunk_rows;
    job.h = h;
    job.w = w;
    job.c = c;
    job.transpose = transpose;
    job.device = impl->device;
    job.u = impl->uploader;
    job.pinned = pinned_pool;
    const int workers = (long)impl->uploader->workers < job.chunks ? impl->uploader->workers
                                                                   : (int)job.chunks;
    std::vector<std::thread> threads;
    try {
        threads.reserve((size_t)workers);
        for (int k = 1; k < workers; k++) threads.emplace_back(upload_worker, &job, k);
    } catch (...) {
        // fewer threads than asked (the system refused one): the ones
        // started and this one share the chunks all the same
    }
    upload_worker(&job, 0); // this thread is worker 0
    for (std::thread &t : threads) t.join();
    // workers past the first set their own thread's device: this one's is
    // the context's still (upload_worker set it to the same)
    if (job.failed != CNN_OK) return cnn_set_error(job.failed, "%s", job.message);
    const int64_t bad = job.first_bad.load();
    if (bad != INT64_MAX) return cnn_refuse_value(a, (size_t)bad);
    return CNN_OK;
}
