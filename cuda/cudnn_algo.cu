// cudnn_algo.cu: choosing a convolution's forward, backward-data and
// backward-filter algorithms, once per shape and direction.
//
// Modes (CNNCUDA_CUDNN_ALGO, read when a context is made):
//   measured (the default)  every algorithm the heuristics list that fits
//                           the layer's workspace and is deterministic is
//                           run on the layer's own buffers, in the context's
//                           math (FMA only in strict float32), once untimed
//                           and FIND_ROUNDS times timed (CUDA events), and
//                           the fastest (by its best time) is taken; for the
//                           backward filter, our own deterministic kernels
//                           (the cuda engine's im2col and split-K SGEMM,
//                           CNN_CUDNN_ALGO_OURS) are timed alike beside them
//   heuristic               the _v7 heuristics' first such algorithm (no
//                           kernel runs; never ours)
//   nondeterministic        measured, non-deterministic algorithms allowed
//                           (atomics: results may differ run to run)
// CNNCUDA_CUDNN_OWN_WGRAD=1 makes every backward filter ours, =0 never.
// The calls are timed themselves rather than through cudnnFind*AlgorithmEx,
// so what is measured is exactly what training runs, ours included.
//
// Measuring runs kernels and synchronises the stream, so it happens on a
// shape's first use, which the Net makes outside any recording (the first
// step of a batch size runs as usual); a first use inside a recording takes
// the heuristic choice instead. Timings are noisy, so two contexts could time
// the same shape differently and pick algorithms that round differently: the
// choice is therefore kept process-wide (shape, direction, math, mode,
// device), and every context of the process uses the first one made. A new
// process measures again, and may pick another algorithm where two are
// within the noise (CNNCUDA_CUDNN_ALGO=heuristic gives the same choice in
// every process). CNNCUDA_CUDNN_VERBOSE=1 prints each measurement to stderr.
#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops.h"
#include "../csrc/switches.h"
#include "cudnn_common.cuh"

namespace {

constexpr int FIND_ROUNDS = 3;
constexpr int MAX_ALGOS = 16;

struct choice {
    cnn_conv_desc key;
    int precision, mode, own, device, dir; // precision: cnn_precision
    int algo;
};

std::mutex choices_lock;
choice *choices = NULL;
int n_choices = 0, cap_choices = 0;

const char *const DIR_NAMES[3] = {"forward", "backward-data", "backward-filter"};

// One timed (or ranked) algorithm, whatever its direction's perf type.
struct candidate {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
};

template <typename perf_t> candidate candidate_of(const perf_t &p)
{
    candidate c = {(int)p.algo, p.status, p.time, p.memory, p.determinism, p.mathType};
    return c;
}

// Whether c may be chosen: it ran, fits the workspace, is deterministic
// where asked, and used only the math the context allows (strict float32:
// FMA kernels alone; a TF32 kernel's time says nothing of the FMA one's).
bool acceptable(const candidate &c, size_t ws_bytes, int deterministic, int tf32)
{
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > ws_bytes) return false;
    if (deterministic && c.determinism != CUDNN_DETERMINISTIC) return false;
    return tf32 || c.math == CUDNN_FMA_MATH;
}

// The heuristics' ranking of every algorithm of direction dir.
cnn_status rank(cnn_cudnn_impl *impl, const cnn_cudnn_conv *c, int dir, candidate *out, int *got)
{
    *got = 0;
    if (dir == CNN_CUDNN_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        CNN_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(impl->cudnn, c->x, c->w, c->conv,
                                                             c->y, MAX_ALGOS, got, p),
                      "choosing a forward algorithm");
        for (int i = 0; i < *got; ++i) out[i] = candidate_of(p[i]);
    } else if (dir == CNN_CUDNN_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        CNN_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(impl->cudnn, c->w, c->y,
                                                                  c->conv, c->x, MAX_ALGOS, got, p),
                      "choosing a backward-data algorithm");
        for (int i = 0; i < *got; ++i) out[i] = candidate_of(p[i]);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        CNN_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                          impl->cudnn, c->x, c->y, c->conv, c->w, MAX_ALGOS, got, p),
                      "choosing a backward-filter algorithm");
        for (int i = 0; i < *got; ++i) out[i] = candidate_of(p[i]);
    }
    return CNN_OK;
}

// Runs algorithm algo of direction dir once on the layer's buffers (a, b:
// the direction's two inputs; out: its output, overwritten), queued on the
// context's stream; false where it was refused.
bool run_algo(cnn_ctx *ctx, const cnn_cudnn_conv *c, int dir, int algo, const void *a,
              const void *b, void *out, void *ws, size_t ws_bytes)
{
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st;
    if (dir == CNN_CUDNN_BWD_FILTER && algo == CNN_CUDNN_ALGO_OURS)
        return cuda_conv2d_backward_filter_from_x(ctx, &c->key, (const float *)a,
                                                  (const float *)b, (float *)out, NULL,
                                                  ws) == CNN_OK;
    if (dir == CNN_CUDNN_FWD)
        st = cudnnConvolutionForward(impl->cudnn, &one, c->x, a, c->w, b, c->conv,
                                     (cudnnConvolutionFwdAlgo_t)algo, ws, ws_bytes, &zero, c->y,
                                     out);
    else if (dir == CNN_CUDNN_BWD_DATA)
        st = cudnnConvolutionBackwardData(impl->cudnn, &one, c->w, a, c->y, b, c->conv,
                                          (cudnnConvolutionBwdDataAlgo_t)algo, ws, ws_bytes,
                                          &zero, c->x, out);
    else
        st = cudnnConvolutionBackwardFilter(impl->cudnn, &one, c->x, a, c->y, b, c->conv,
                                            (cudnnConvolutionBwdFilterAlgo_t)algo, ws, ws_bytes,
                                            &zero, c->w, out);
    return st == CUDNN_STATUS_SUCCESS;
}

// The workspace algorithm algo of direction dir needs, or SIZE_MAX where
// cuDNN cannot run it.
size_t algo_workspace(cnn_cudnn_impl *impl, const cnn_cudnn_conv *c, int dir, int algo)
{
    size_t bytes = 0;
    cudnnStatus_t st;
    if (dir == CNN_CUDNN_FWD)
        st = cudnnGetConvolutionForwardWorkspaceSize(impl->cudnn, c->x, c->w, c->conv, c->y,
                                                     (cudnnConvolutionFwdAlgo_t)algo, &bytes);
    else if (dir == CNN_CUDNN_BWD_DATA)
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(impl->cudnn, c->w, c->y, c->conv, c->x,
                                                          (cudnnConvolutionBwdDataAlgo_t)algo,
                                                          &bytes);
    else
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(impl->cudnn, c->x, c->y, c->conv,
                                                            c->w,
                                                            (cudnnConvolutionBwdFilterAlgo_t)algo,
                                                            &bytes);
    return st == CUDNN_STATUS_SUCCESS ? bytes : SIZE_MAX;
}

// The best of FIND_ROUNDS timings (CUDA events on the context's stream) of
// algo, after one untimed run; a negative time where cuDNN refused to run it.
cnn_status time_algo(cnn_ctx *ctx, const cnn_cudnn_conv *c, int dir, int algo, const void *a,
                     const void *b, void *out, void *ws, size_t ws_bytes, cudaEvent_t start,
                     cudaEvent_t stop, float *ms)
{
    *ms = -1.0f;
    if (!run_algo(ctx, c, dir, algo, a, b, out, ws, ws_bytes)) return CNN_OK;
    for (int round = 0; round < FIND_ROUNDS; ++round) {
        CNN_CUDA_TRY(cudaEventRecord(start, cnn_stream(ctx)), "timing a cuDNN algorithm");
        if (!run_algo(ctx, c, dir, algo, a, b, out, ws, ws_bytes)) {
            *ms = -1.0f;
            break;
        }
        CNN_CUDA_TRY(cudaEventRecord(stop, cnn_stream(ctx)), "timing a cuDNN algorithm");
        CNN_CUDA_TRY(cudaEventSynchronize(stop), "timing a cuDNN algorithm");
        float t = 0.0f;
        CNN_CUDA_TRY(cudaEventElapsedTime(&t, start, stop), "timing a cuDNN algorithm");
        if (*ms < 0.0f || t < *ms) *ms = t;
    }
    // a kernel fault would be sticky and show here
    CNN_CUDA_TRY(cudaStreamSynchronize(cnn_stream(ctx)), "timing a cuDNN algorithm");
    return CNN_OK;
}


void describe(const cnn_conv_desc *d, int dir, char *buf, size_t len)
{
    snprintf(buf, len, "n %d c %d %dx%d f %d k %dx%d s %dx%d pad %d,%d %s", d->n, d->c, d->h,
             d->w, d->f, d->kh, d->kw, d->sh, d->sw, d->pad_top, d->pad_left, DIR_NAMES[dir]);
}

// The heuristics' first acceptable algorithm, or -1.
cnn_status heuristic_choice(cnn_cudnn_impl *impl, const cnn_cudnn_conv *c, int dir,
                            size_t ws_bytes, int *algo)
{
    candidate r[MAX_ALGOS];
    int got = 0;
    CNN_TRY(rank(impl, c, dir, r, &got));
    *algo = -1;
    for (int i = 0; i < got && *algo < 0; ++i) {
        // the heuristics report the descriptor's math; the forward pass is
        // deterministic whatever the algorithm
        candidate k = r[i];
        k.math = CUDNN_FMA_MATH;
        if (dir == CNN_CUDNN_FWD) k.determinism = CUDNN_DETERMINISTIC;
        if (acceptable(k, ws_bytes, 1, 1)) *algo = r[i].algo;
    }
    return CNN_OK;
}

// The fastest acceptable algorithm, each timed on the layer's buffers, or
// -1. The candidates are every algorithm the heuristics list for this shape
// that fits the workspace and is deterministic where asked; each runs in the
// descriptor's math (strict float32: FMA only), as it will in training.
cnn_status measured_choice(cnn_ctx *ctx, const cnn_cudnn_conv *c, int dir, const void *a,
                           const void *b, void *out, void *ws, size_t ws_bytes, int *algo)
{
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    const int deterministic = impl->algo_mode != CNN_CUDNN_ALGO_NONDETERMINISTIC;
    candidate r[MAX_ALGOS];
    int got = 0;
    CNN_TRY(rank(impl, c, dir, r, &got));
    const bool talk = impl->verbose != 0;
    char what[160];
    if (talk) describe(&c->key, dir, what, sizeof what);
    cudaEvent_t start = NULL, stop = NULL;
    cnn_status st = cnn_cuda_status(cudaEventCreate(&start), "timing cuDNN algorithms");
    if (st == CNN_OK) st = cnn_cuda_status(cudaEventCreate(&stop), "timing cuDNN algorithms");
    float best = -1.0f;
    bool tried[MAX_ALGOS] = {false};
    *algo = -1;
    for (int i = 0; i < got && st == CNN_OK; ++i) {
        candidate k = r[i];
        if (k.algo < 0 || k.algo >= MAX_ALGOS || tried[k.algo]) continue;
        if (k.status != CUDNN_STATUS_SUCCESS) continue;
        tried[k.algo] = true;
        if (dir == CNN_CUDNN_FWD) k.determinism = CUDNN_DETERMINISTIC;
        k.math = CUDNN_FMA_MATH; // it runs in the descriptor's math
        const size_t need = algo_workspace(impl, c, dir, k.algo);
        if (need != SIZE_MAX) k.memory = need;
        if (need == SIZE_MAX || !acceptable(k, ws_bytes, deterministic, 1)) {
            if (talk)
                fprintf(stderr, "cnncuda cudnn: %s: algo %d skipped (ws %zu of %zu, %s)\n", what,
                        k.algo, k.memory, ws_bytes,
                        k.determinism == CUDNN_DETERMINISTIC ? "det" : "nondet");
            continue;
        }
        float ms = -1.0f;
        st = time_algo(ctx, c, dir, k.algo, a, b, out, ws, need, start, stop, &ms);
        if (talk && st == CNN_OK)
            fprintf(stderr, "cnncuda cudnn: %s: algo %d %.4f ms ws %zu %s\n", what, k.algo, ms,
                    need, k.determinism == CUDNN_DETERMINISTIC ? "det" : "nondet");
        if (st == CNN_OK && ms >= 0.0f && (best < 0.0f || ms < best)) {
            best = ms;
            *algo = k.algo;
        }
    }
    if (st == CNN_OK && dir == CNN_CUDNN_BWD_FILTER && impl->own_wgrad < 0) {
        float ms = -1.0f;
        st = time_algo(ctx, c, dir, CNN_CUDNN_ALGO_OURS, a, b, out, ws, ws_bytes, start, stop,
                       &ms);
        if (talk && st == CNN_OK)
            fprintf(stderr, "cnncuda cudnn: %s: ours (im2col + split-K SGEMM) %.4f ms ws %zu det\n",
                    what, ms, ws_bytes);
        if (st == CNN_OK && ms >= 0.0f && (best < 0.0f || ms < best)) {
            best = ms;
            *algo = CNN_CUDNN_ALGO_OURS;
        }
    }
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (talk && st == CNN_OK)
        fprintf(stderr, "cnncuda cudnn: %s: chose algo %d (%.4f ms, best of %d)\n", what, *algo,
                best, FIND_ROUNDS);
    return st;
}

int find_choice(const cnn_conv_desc *d, int precision, int mode, int own, int device, int dir)
{
    for (int i = 0; i < n_choices; ++i) {
        const choice &k = choices[i];
        if (k.precision == precision && k.mode == mode && k.own == own && k.device == device && k.dir == dir &&
            memcmp(&k.key, d, sizeof *d) == 0)
            return k.algo;
    }
    return -1;
}

cnn_status keep_choice(const cnn_conv_desc *d, int precision, int mode, int own, int device, int dir,
                       int algo)
{
    if (n_choices == cap_choices) {
        const int cap = cap_choices ? 2 * cap_choices : 32;
        choice *grown = (choice *)realloc(choices, (size_t)cap * sizeof *grown);
        if (!grown) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory keeping a cuDNN choice");
        choices = grown;
        cap_choices = cap;
    }
    choice *k = &choices[n_choices++];
    memset(k, 0, sizeof *k);
    k->key = *d;
    k->precision = precision;
    k->mode = mode;
    k->own = own;
    k->device = device;
    k->dir = dir;
    k->algo = algo;
    return CNN_OK;
}

cnn_status workspace_of(cnn_cudnn_impl *impl, cnn_cudnn_conv *c, int dir)
{
    if (dir == CNN_CUDNN_FWD)
        CNN_CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(
                          impl->cudnn, c->x, c->w, c->conv, c->y, c->fwd, &c->ws_fwd),
                      "workspace size");
    else if (dir == CNN_CUDNN_BWD_DATA)
        CNN_CUDNN_TRY(cudnnGetConvolutionBackwardDataWorkspaceSize(
                          impl->cudnn, c->w, c->y, c->conv, c->x, c->bwd_data, &c->ws_bwd_data),
                      "workspace size");
    else
        CNN_CUDNN_TRY(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                          impl->cudnn, c->x, c->y, c->conv, c->w, c->bwd_filter,
                          &c->ws_bwd_filter),
                      "workspace size");
    return CNN_OK;
}

} // namespace

cnn_status cnn_cudnn_algo_settings(cnn_cudnn_impl *impl)
{
    cnn_switches sw;
    CNN_TRY(cnn_switches_read(&sw));
    // the switch's values are this file's modes (switches.h, cudnn_common.cuh)
    static_assert((int)CNN_SWITCH_ALGO_MEASURED == (int)CNN_CUDNN_ALGO_MEASURED &&
                      (int)CNN_SWITCH_ALGO_HEURISTIC == (int)CNN_CUDNN_ALGO_HEURISTIC &&
                      (int)CNN_SWITCH_ALGO_NONDETERMINISTIC == (int)CNN_CUDNN_ALGO_NONDETERMINISTIC,
                  "CNNCUDA_CUDNN_ALGO's values");
    impl->algo_mode = sw.cudnn_algo;
    impl->own_wgrad = sw.cudnn_own_wgrad >= 0 ? sw.cudnn_own_wgrad
                      : impl->algo_mode == CNN_CUDNN_ALGO_HEURISTIC ? 0
                                                                    : -1;
    impl->verbose = sw.cudnn_verbose;
    return CNN_OK;
}

cnn_status cnn_cudnn_choose(cnn_ctx *ctx, cnn_cudnn_conv *c, int dir, const void *a,
                            const void *b, void *out, void *ws, size_t ws_bytes)
{
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    const int mode = impl->algo_mode, own = impl->own_wgrad, device = impl->base.device;
    std::lock_guard<std::mutex> hold(choices_lock);
    int algo = find_choice(&c->key, c->precision, mode, own, device, dir);
    if (algo < 0 && dir == CNN_CUDNN_BWD_FILTER && own == 1) {
        algo = CNN_CUDNN_ALGO_OURS;
        CNN_TRY(keep_choice(&c->key, c->precision, mode, own, device, dir, algo));
    }
    if (algo < 0) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        CNN_CUDA_TRY(cudaStreamIsCapturing(cnn_stream(ctx), &capturing), "checking for a recording");
        if (mode != CNN_CUDNN_ALGO_HEURISTIC && capturing == cudaStreamCaptureStatusNone)
            CNN_TRY(measured_choice(ctx, c, dir, a, b, out, ws, ws_bytes, &algo));
        if (algo < 0) CNN_TRY(heuristic_choice(impl, c, dir, ws_bytes, &algo));
        if (algo < 0)
            return cnn_set_error(CNN_ERR_DEVICE, "cuDNN offers no %s algorithm for this convolution",
                                 DIR_NAMES[dir]);
        CNN_TRY(keep_choice(&c->key, c->precision, mode, own, device, dir, algo));
    }
    if (dir == CNN_CUDNN_BWD_FILTER && algo == CNN_CUDNN_ALGO_OURS) {
        // the cuda engine's column matrix and rearranged dy: its workspace rule
        c->filter_ours = 1;
        c->ws_bwd_filter = cuda_conv2d_workspace(&c->key);
        c->chosen |= 1 << dir;
        return CNN_OK;
    }
    if (dir == CNN_CUDNN_BWD_FILTER) c->filter_ours = 0;
    if (dir == CNN_CUDNN_FWD)
        c->fwd = (cudnnConvolutionFwdAlgo_t)algo;
    else if (dir == CNN_CUDNN_BWD_DATA)
        c->bwd_data = (cudnnConvolutionBwdDataAlgo_t)algo;
    else
        c->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)algo;
    CNN_TRY(workspace_of(impl, c, dir));
    const size_t need = dir == CNN_CUDNN_FWD ? c->ws_fwd
                        : dir == CNN_CUDNN_BWD_DATA ? c->ws_bwd_data : c->ws_bwd_filter;
    if (need > ws_bytes)
        return cnn_set_error(CNN_ERR_INTERNAL, "cuDNN's %s algorithm %d needs %zu bytes of "
                             "workspace, the layer has %zu", DIR_NAMES[dir], algo, need, ws_bytes);
    c->chosen |= 1 << dir;
    return CNN_OK;
}
