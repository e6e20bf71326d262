// cudnn_algo.cu: choosing a convolution's forward, backward-data and
// backward-filter algorithms, once per shape and direction.
//
// Modes (CNNCUDA_CUDNN_ALGO, read when a context is made):
//   measured (the default)  cudnnFind*AlgorithmEx on the layer's own buffers
//                           and workspace: every algorithm that fits the
//                           workspace, is deterministic and runs in the
//                           context's math (FMA only in strict float32) is
//                           timed, FIND_ROUNDS times, and the fastest (its
//                           best time) is taken
//   heuristic               the _v7 heuristics' first such algorithm (no
//                           kernel runs)
//   nondeterministic        measured, non-deterministic algorithms allowed
//                           (atomics: results may differ run to run)
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_common.cuh"

namespace {

constexpr int FIND_ROUNDS = 3;
constexpr int MAX_ALGOS = 16;

struct choice {
    cnn_conv_desc key;
    int tf32, mode, device, dir;
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

// One timing of every algorithm of direction dir on the layer's buffers
// (a, b: the direction's two inputs; out: its output, overwritten).
cnn_status measure(cnn_cudnn_impl *impl, const cnn_cudnn_conv *c, int dir, const void *a,
                   const void *b, void *out, void *ws, size_t ws_bytes, candidate *res, int *got)
{
    *got = 0;
    if (dir == CNN_CUDNN_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        CNN_CUDNN_TRY(cudnnFindConvolutionForwardAlgorithmEx(impl->cudnn, c->x, a, c->w, b,
                                                             c->conv, c->y, out, MAX_ALGOS, got,
                                                             p, ws, ws_bytes),
                      "measuring the forward algorithms");
        for (int i = 0; i < *got; ++i) res[i] = candidate_of(p[i]);
    } else if (dir == CNN_CUDNN_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        CNN_CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithmEx(impl->cudnn, c->w, a, c->y, b,
                                                                  c->conv, c->x, out, MAX_ALGOS,
                                                                  got, p, ws, ws_bytes),
                      "measuring the backward-data algorithms");
        for (int i = 0; i < *got; ++i) res[i] = candidate_of(p[i]);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        CNN_CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithmEx(impl->cudnn, c->x, a, c->y, b,
                                                                    c->conv, c->w, out, MAX_ALGOS,
                                                                    got, p, ws, ws_bytes),
                      "measuring the backward-filter algorithms");
        for (int i = 0; i < *got; ++i) res[i] = candidate_of(p[i]);
    }
    return CNN_OK;
}

bool verbose(void)
{
    const char *v = getenv("CNNCUDA_CUDNN_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
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

// The fastest acceptable algorithm over FIND_ROUNDS measurements, or -1.
cnn_status measured_choice(cnn_cudnn_impl *impl, const cnn_cudnn_conv *c, int dir,
                           const void *a, const void *b, void *out, void *ws, size_t ws_bytes,
                           int *algo)
{
    const int deterministic = impl->algo_mode != CNN_CUDNN_ALGO_NONDETERMINISTIC;
    float best[MAX_ALGOS];
    for (int i = 0; i < MAX_ALGOS; ++i) best[i] = -1.0f;
    const bool talk = verbose();
    char what[160];
    if (talk) describe(&c->key, dir, what, sizeof what);
    for (int round = 0; round < FIND_ROUNDS; ++round) {
        candidate r[MAX_ALGOS];
        int got = 0;
        CNN_TRY(measure(impl, c, dir, a, b, out, ws, ws_bytes, r, &got));
        for (int i = 0; i < got; ++i) {
            const candidate &k = r[i];
            if (talk && round == FIND_ROUNDS - 1)
                fprintf(stderr,
                        "cnncuda cudnn: %s: algo %d status %d %.4f ms ws %zu %s math %d\n", what,
                        k.algo, (int)k.status, k.time, k.memory,
                        k.determinism == CUDNN_DETERMINISTIC ? "det" : "nondet", (int)k.math);
            if (!acceptable(k, ws_bytes, deterministic, c->tf32)) continue;
            if (k.algo < 0 || k.algo >= MAX_ALGOS) continue;
            if (best[k.algo] < 0.0f || k.time < best[k.algo]) best[k.algo] = k.time;
        }
    }
    *algo = -1;
    for (int i = 0; i < MAX_ALGOS; ++i)
        if (best[i] >= 0.0f && (*algo < 0 || best[i] < best[*algo])) *algo = i;
    if (talk)
        fprintf(stderr, "cnncuda cudnn: %s: chose algo %d (%.4f ms, best of %d)\n", what, *algo,
                *algo >= 0 ? best[*algo] : 0.0f, FIND_ROUNDS);
    return CNN_OK;
}

int find_choice(const cnn_conv_desc *d, int tf32, int mode, int device, int dir)
{
    for (int i = 0; i < n_choices; ++i) {
        const choice &k = choices[i];
        if (k.tf32 == tf32 && k.mode == mode && k.device == device && k.dir == dir &&
            memcmp(&k.key, d, sizeof *d) == 0)
            return k.algo;
    }
    return -1;
}

cnn_status keep_choice(const cnn_conv_desc *d, int tf32, int mode, int device, int dir, int algo)
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
    k->tf32 = tf32;
    k->mode = mode;
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

cnn_status cnn_cudnn_algo_mode(int *mode)
{
    const char *v = getenv("CNNCUDA_CUDNN_ALGO");
    if (!v || !*v || strcmp(v, "measured") == 0)
        *mode = CNN_CUDNN_ALGO_MEASURED;
    else if (strcmp(v, "heuristic") == 0)
        *mode = CNN_CUDNN_ALGO_HEURISTIC;
    else if (strcmp(v, "nondeterministic") == 0)
        *mode = CNN_CUDNN_ALGO_NONDETERMINISTIC;
    else
        return cnn_set_error(CNN_ERR_VALUE,
                             "CNNCUDA_CUDNN_ALGO: expected 'measured', 'heuristic' or "
                             "'nondeterministic', got '%s'", v);
    return CNN_OK;
}

cnn_status cnn_cudnn_choose(cnn_ctx *ctx, cnn_cudnn_conv *c, int dir, const void *a,
                            const void *b, void *out, void *ws, size_t ws_bytes)
{
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    const int mode = impl->algo_mode, device = impl->base.device;
    std::lock_guard<std::mutex> hold(choices_lock);
    int algo = find_choice(&c->key, c->tf32, mode, device, dir);
    if (algo < 0) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        CNN_CUDA_TRY(cudaStreamIsCapturing(cnn_stream(ctx), &capturing), "checking for a recording");
        if (mode != CNN_CUDNN_ALGO_HEURISTIC && capturing == cudaStreamCaptureStatusNone)
            CNN_TRY(measured_choice(impl, c, dir, a, b, out, ws, ws_bytes, &algo));
        if (algo < 0) CNN_TRY(heuristic_choice(impl, c, dir, ws_bytes, &algo));
        if (algo < 0)
            return cnn_set_error(CNN_ERR_DEVICE, "cuDNN offers no %s algorithm for this convolution",
                                 DIR_NAMES[dir]);
        CNN_TRY(keep_choice(&c->key, c->tf32, mode, device, dir, algo));
    }
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
