// Frozen reference, not built: cuda/dense_head.cu as it was at revision 62fe45f
// (the backward before its rewrite). dev/emu/run_head.sh emulates it on the host
// beside the working tree's kernel; tests/dev/test_emu_head.py compares the two
// where their orders are the same, in any copy, without git history.

// dense_head.cu: the last dense layer of a training step, the softmax after
// it and the loss, with their gradients, in two kernels (the cuda engine's
// dense_loss_head, cnn.h). At batch 32 the unfused path is six to eight
// launches of a few microseconds each (the dense forward, softmax, loss,
// softmax backward, the weight and input gradients, the bias sums, the
// ReLU's backward before the layer) on matrices of a few hundred numbers.
//
// head_forward_kernel: one block of 512 threads per sample row:
// z_c = sum_j x_j w_jc + b_c, w read coalesced (each thread one class, a
// warp's load 32 consecutive floats of w), then a fixed tree over the
// threads (deterministic; not the SGEMM's order).
// Then warp 0 runs the row pieces of loss_rows.cuh that loss.cu and the
// softmax kernels run (the same bits from the same z): softmax, the loss and
// its gradient, the softmax's backward, into dz (ws). Each row's loss and
// correct count go to ws too.
// head_backward_kernel: the weight, input and bias gradients, and the loss
// sums added up in a fixed order (deterministic, no float atomics); where
// the layer below is a dense layer with a bias, also its bias gradient (the
// column sums of the input gradient, db_below), so that it needs no
// column-sums launch of its own.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh"

#define HEAD_WARPS 4
#define HEAD_THREADS (HEAD_WARPS * 32)
// the forward: one block of HEAD_FWD_THREADS per sample row
#define HEAD_FWD_WARPS 16
#define HEAD_FWD_THREADS (HEAD_FWD_WARPS * 32)
// with db_below, a dx block takes DXC_COLS inputs over every row, DXC_ROWS
// rows at a time (one element per thread)
#define DXC_COLS 4
#define DXC_ROWS (HEAD_THREADS / DXC_COLS)

namespace {

// A hint: the line of global memory at a, into L1 (no register, no wait).
__device__ __forceinline__ void prefetch_l1(const void *a)
{
    asm volatile("prefetch.global.L1 [%0];" ::"l"(a));
}

struct head_args {
    loss_args loss; // kind, logits, n, k, scale
    int in, softmax, relu;
};

// One thread's sum for its class of the logits (head_forward_kernel):
// sum_m x[m * xs] wp[m * ws] for m < cnt, one chain of fmaf from 0.0f in
// the order of m (the same bits for any U). U loads of w and of x issued
// before their multiply-adds: past the end a load repeats the last element
// (not used), so that no load is predicated and ptxas issues them all first
// (with predicated loads, or without the launch bounds' one block per SM,
// it interleaved them with the adds: 8 to 14 loads in flight; sm_90 SASS
// looked at with cuobjdump).
template <int U>
__device__ __forceinline__ float head_class_sum(const float *__restrict__ xp, int xs,
                                                const float *__restrict__ wp, int ws, int cnt)
{
    float acc = 0.0f;
    for (int m0 = 0; m0 < cnt; m0 += U) {
        const int last = cnt - 1 - m0; // >= 0
        float xv[U], wv[U];
#pragma unroll
        for (int q = 0; q < U; ++q) {
            const int o = min(q, last);
            xv[q] = xp[o * xs];
            wv[q] = wp[o * ws];
        }
#pragma unroll
        for (int q = 0; q < U; ++q)
            if (q <= last) acc = fmaf(xv[q], wv[q], acc);
        xp += (size_t)U * xs;
        wp += (size_t)U * ws;
    }
    return acc;
}

// rows (2, n): the per-row losses, then the per-row correct counts.
// The logits z_c = sum_j x_j w_jc + b_c, read coalesced: w (in, k) is read as
// the flat array it is, thread t < G k (G = HEAD_FWD_THREADS / k rounded
// down) taking the elements t, t + G k, t + 2 G k, ...: always class
// c = t % k, of the rows j = g, g + G, g + 2 G, ... (g = t / k); a warp's
// load is 32 consecutive floats of w (one or two 128-byte lines, whatever
// w's alignment), and its x loads a few consecutive floats of the row. No
// shared-memory staging: the reads need none to be coalesced, and the sums
// need no bank-conflict-free transpose. Up to 32 loads of w (and of x) in
// flight per thread: one round for tiny MNIST's 1352 x 10 (27 rows a thread).
// Order of additions (fixed; deterministic, not the SGEMM's): thread (g, c)
// P_gc = fmaf chain over its rows in ascending j from 0.0f; then class c's
// warp: lane l adds P_gc for g = l, l + 32, ... in ascending g from 0.0f,
// then warp_sum's fixed butterfly over the lanes; then + b_c.
// The bias, and the label or the targets' row that the tail below reads,
// are fetched at the start (the bias into a register, the others
// prefetched into L1) so that no global load waits after the sums.
__global__ void __launch_bounds__(HEAD_FWD_THREADS, 1)
head_forward_kernel(head_args h, const float *__restrict__ x, const float *__restrict__ w,
                    const float *__restrict__ b, const int32_t *__restrict__ labels,
                    const float *__restrict__ targets, float *__restrict__ z,
                    float *__restrict__ p, float *__restrict__ dz, double *__restrict__ rows)
{
    cnn_kernel_begin();
    __shared__ float zs[CNN_HEAD_MAX_OUT], ps[CNN_HEAD_MAX_OUT], gs[CNN_HEAD_MAX_OUT];
    __shared__ float bs[CNN_HEAD_MAX_OUT];
    __shared__ float part[HEAD_FWD_THREADS];
    const int i = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int k = h.loss.k, n = h.loss.n, in = h.in;
    const float bias = b && tid < k ? b[tid] : 0.0f;
    if (warp == 0) { // the tail's reads, into L1 now (hints only)
        if (h.loss.kind == CNN_LOSS_SPARSE_CE) {
            if (lane == 0) prefetch_l1(labels + i);
        } else if (lane < 3) { // the row's lines (k <= 64 floats: at most 3)
            const int j = lane == 0 ? 0 : lane == 1 ? min(32, k - 1) : k - 1;
            prefetch_l1(targets + (size_t)i * k + j);
        }
    }
    const int G = HEAD_FWD_THREADS / k; // rows a pass, >= 8
    if (tid < G * k) {
        const int g = tid / k;
        const int cnt = g < in ? (in - 1 - g) / G + 1 : 0; // rows of this thread
        const float *xp = x + (size_t)i * in + g, *wp = w + tid;
        part[tid] = cnt <= 8 ? head_class_sum<8>(xp, G, wp, G * k, cnt)
                           : head_class_sum<32>(xp, G, wp, G * k, cnt);
    }
    if (tid < k) bs[tid] = bias;
    __syncthreads();
    // class c: warp c % HEAD_FWD_WARPS adds the G partial sums
    for (int c = warp; c < k; c += HEAD_FWD_WARPS) {
        float v = 0.0f;
        for (int g = lane; g < G; g += 32) v += part[g * k + c];
        v = warp_sum(v);
        if (lane == 0) zs[c] = b ? v + bs[c] : v;
    }
    __syncthreads();
    if (warp == 0) {
        for (int j = lane; j < k; j += 32) z[(size_t)i * k + j] = zs[j];
        float *g = dz + (size_t)i * k;
        const float *t = nullptr;
        int label = 0;
        bool skip = false;
        if (h.loss.kind == CNN_LOSS_SPARSE_CE) {
            label = labels[i];
            skip = label < 0 || label >= k; // as loss.cu: no loss, no count, a zero gradient
        } else {
            t = targets + (size_t)i * k;
        }
        double loss = 0.0, correct = 0.0;
        if (skip) {
            if (h.softmax) {
                softmax_row(zs, ps, k, lane);
                for (int j = lane; j < k; j += 32) p[(size_t)i * k + j] = ps[j];
            }
            for (int j = lane; j < k; j += 32) g[j] = 0.0f;
        } else if (h.softmax) {
            softmax_row(zs, ps, k, lane);
            __syncwarp(); // ps is read across lanes below
            for (int j = lane; j < k; j += 32) p[(size_t)i * k + j] = ps[j];
            loss = categorical_row(h.loss, ps, t, label, gs, &correct, lane);
            __syncwarp();
            softmax_backward_row(ps, gs, g, k, lane);
        } else {
            loss = categorical_row(h.loss, zs, t, label, g, &correct, lane);
        }
        if (lane == 0) {
            rows[i] = loss;
            rows[n + i] = correct;
        }
    }
}

// sum_i a[i * sa] b[i * sb] for i < len: one chain of fmaf in the order of
// i (the SGEMM's order of k), the loads of eight terms issued before their
// multiply-adds.
__device__ __forceinline__ float dot_in_order(const float *a, size_t sa, const float *b, size_t sb,
                                              int len)
{
    float acc = 0.0f;
    for (int i0 = 0; i0 < len; i0 += 8) {
        float av[8], bv[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const bool ok = i0 + q < len;
            av[q] = ok ? a[(size_t)(i0 + q) * sa] : 0.0f;
            bv[q] = ok ? b[(size_t)(i0 + q) * sb] : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < 8; ++q)
            if (i0 + q < len) acc = fmaf(av[q], bv[q], acc);
    }
    return acc;
}

// dx_rj = sum_c dz_rc w_jc (then x > 0 ? dx : 0 with relu, as activation.cu)
__device__ __forceinline__ float head_dx(const head_args &h, const float *x, const float *w,
                                         const float *dz, int r, int j)
{
    const int k = h.loss.k;
    const float v = dot_in_order(dz + (size_t)r * k, 1, w + (size_t)j * k, 1, k);
    return h.relu && !(x[(size_t)r * h.in + j] > 0.0f) ? 0.0f : v;
}

// Three kinds of threads, so that no thread runs a long chain (at batch 32
// one thread per input j took 13 us for cifar's 64 x 10 layer: a block of
// dependent steps): blocks [0, dw_blocks) one thread per weight (j, c):
// dw_jc = sum_r x_rj dz_rc; then, when dx is wanted, one thread per input
// element (r, j): dx_rj (head_dx); the last block one thread per class:
// db_c = sum_r dz_rc, and thread 0 also adds the rows' losses and correct
// counts (rows, in order) to sums. Each sum is a chain of fmaf in the order
// of the SGEMM's k (the same bits as the GEMMs it replaces).
// With db_below the dx blocks are laid out by columns instead: block b takes
// inputs [b * DXC_COLS, + DXC_COLS) and every row, DXC_ROWS rows a pass,
// thread (r, c) of the pass one element (the same dx_rj), also kept in the
// block's copy of the pass; after the barrier thread c of the first row adds
// column c of the pass in row order onto its sum from 0.0f, which ends as
// db_below[j]: the order of cnn_cuda_column_sums (reduce.cu), which the
// dense layer below would run over this dx (the same bits).
__global__ void __launch_bounds__(HEAD_THREADS)
head_backward_kernel(head_args h, int dw_blocks, int dx_blocks, const float *__restrict__ x,
                     const float *__restrict__ w, const float *__restrict__ dz,
                     const double *__restrict__ rows, float *__restrict__ dw,
                     float *__restrict__ db, float *__restrict__ dx,
                     float *__restrict__ db_below, float *sums)
{
    cnn_kernel_begin();
    const int k = h.loss.k, n = h.loss.n, in = h.in;
    const int block = blockIdx.x, t = threadIdx.x;
    if (block < dw_blocks) {
        const long long e = (long long)block * HEAD_THREADS + t;
        if (e >= (long long)in * k) return;
        const int j = (int)(e / k), c = (int)(e - (long long)j * k);
        dw[e] = dot_in_order(x + j, in, dz + c, k, n);
        return;
    }
    if (block < dw_blocks + dx_blocks && db_below) { // block-uniform: every thread below
        __shared__ float pass[DXC_ROWS][DXC_COLS];
        const int c = t % DXC_COLS, q = t / DXC_COLS;
        const int j = (block - dw_blocks) * DXC_COLS + c;
        float sum = 0.0f;
        for (int r0 = 0; r0 < n; r0 += DXC_ROWS) { // the same r0 in every thread
            const int r = r0 + q;
            if (j < in && r < n) {
                const float v = head_dx(h, x, w, dz, r, j);
                dx[(size_t)r * in + j] = v;
                pass[q][c] = v;
            }
            __syncthreads();
            if (q == 0 && j < in) {
                const int end = min(DXC_ROWS, n - r0);
#pragma unroll 8
                for (int u = 0; u < end; ++u) sum += pass[u][c];
            }
            __syncthreads(); // the pass is read before the next one is written
        }
        if (q == 0 && j < in) db_below[j] = sum;
        return;
    }
    if (block < dw_blocks + dx_blocks) {
        const long long e = (long long)(block - dw_blocks) * HEAD_THREADS + t;
        if (e >= (long long)n * in) return;
        const int r = (int)(e / in), j = (int)(e - (long long)r * in);
        dx[e] = head_dx(h, x, w, dz, r, j);
        return;
    }
    // the last block: the bias gradient and the loss sums
    if (db)
        for (int c = t; c < k; c += HEAD_THREADS) {
            float s = 0.0f;
            for (int r0 = 0; r0 < n; r0 += 8) {
                float g[8];
#pragma unroll
                for (int q = 0; q < 8; ++q) g[q] = r0 + q < n ? dz[(size_t)(r0 + q) * k + c] : 0.0f;
#pragma unroll
                for (int q = 0; q < 8; ++q)
                    if (r0 + q < n) s += g[q];
            }
            db[c] = s;
        }
    if (t < 32) {
        double l = 0.0, cc = 0.0;
        for (int r = t; r < n; r += 32) {
            l += rows[r];
            cc += rows[n + r];
        }
        l = warp_sum(l);
        cc = warp_sum(cc);
        if (t == 0) {
            sums[0] += (float)l;
            sums[1] += (float)cc;
        }
    }
}

} // namespace

cnn_status cuda_dense_loss_head(cnn_ctx *ctx, const cnn_loss_desc *d, int in, int softmax,
                                int relu, const float *x, const float *w, const float *b,
                                const int32_t *labels, const float *targets, int scale_n,
                                float *z, float *p, float *dw, float *db, float *dx,
                                float *db_below, float *sums, void *ws)
{
    const int n = d->n, k = d->k;
    if (d->kind != CNN_LOSS_SPARSE_CE && d->kind != CNN_LOSS_CATEGORICAL_CE)
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: loss kind %d is not a crossentropy",
                             d->kind);
    if ((d->from_logits != 0) == (softmax != 0))
        return cnn_set_error(CNN_ERR_VALUE,
                             "dense_loss_head: from_logits must be %d with softmax %d, got %d",
                             !softmax, softmax, d->from_logits);
    if (n < 0 || in < 1 || k < 1 || k > CNN_HEAD_MAX_OUT)
        return cnn_set_error(CNN_ERR_VALUE,
                             "dense_loss_head: expected n >= 0, in >= 1, 1 <= k <= %d, got n %d, "
                             "in %d, k %d",
                             CNN_HEAD_MAX_OUT, n, in, k);
    if (scale_n < 1)
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: scale_n %d must be positive", scale_n);
    if (d->kind == CNN_LOSS_SPARSE_CE ? !labels : !targets)
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: no %s",
                             d->kind == CNN_LOSS_SPARSE_CE ? "labels" : "targets");
    if (!x || !w || !z || !dw || !sums || !ws || (softmax && !p))
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: a buffer is NULL");
    if (db_below && !dx)
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: db_below needs dx");
    cudaStream_t st = cnn_stream(ctx);
    if (n == 0) { // no rows: zero gradients, as the GEMMs with k = 0 write
        CNN_CUDA_TRY(cudaMemsetAsync(dw, 0, (size_t)in * k * sizeof(float), st), "dense_loss_head");
        if (db) CNN_CUDA_TRY(cudaMemsetAsync(db, 0, (size_t)k * sizeof(float), st), "dense_loss_head");
        if (db_below)
            CNN_CUDA_TRY(cudaMemsetAsync(db_below, 0, (size_t)in * sizeof(float), st),
                         "dense_loss_head");
        return CNN_OK;
    }
    head_args h;
    h.loss.kind = d->kind;
    h.loss.logits = !softmax;
    h.loss.softmax = 0; // loss.cu's fused softmax; the head runs its own
    h.loss.n = n;
    h.loss.k = k;
    h.loss.scale = (float)scale_n;
    h.loss.scale_nk = (float)scale_n * (float)k;
    h.in = in;
    h.softmax = softmax != 0;
    h.relu = relu != 0;
    double *rows = (double *)ws;
    float *dz = (float *)(rows + 2 * (size_t)n);
    head_forward_kernel<<<n, HEAD_FWD_THREADS, 0, st>>>(h, x, w, b, labels, targets, z, p, dz,
                                                         rows);
    CNN_CUDA_LAUNCHED("dense_loss_head forward");
    const long long dw_blocks = ((long long)in * k + HEAD_THREADS - 1) / HEAD_THREADS;
    const long long dx_blocks = !dx         ? 0
                                : db_below ? ((long long)in + DXC_COLS - 1) / DXC_COLS
                                           : ((long long)n * in + HEAD_THREADS - 1) / HEAD_THREADS;
    if (dw_blocks + dx_blocks + 1 > INT32_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: %d x %d inputs are too many", n, in);
    head_backward_kernel<<<(unsigned)(dw_blocks + dx_blocks + 1), HEAD_THREADS, 0, st>>>(
        h, (int)dw_blocks, (int)dx_blocks, x, w, dz, rows, dw, db, dx, db_below, sums);
    CNN_CUDA_LAUNCHED("dense_loss_head backward");
    return CNN_OK;
}
