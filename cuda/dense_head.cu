// dense_head.cu: the last dense layer of a training step, the softmax after
// it and the loss, with their gradients, in two kernels (the cuda engine's
// dense_loss_head, cnn.h). At batch 32 the unfused path is six to eight
// launches of a few microseconds each (the dense forward, softmax, loss,
// softmax backward, the weight and input gradients, the bias sums, the
// ReLU's backward before the layer) on matrices of a few hundred numbers.
//
// head_forward_kernel: one block per sample row. Its warps take the classes
// in turn: z_c = sum_j x_j w_jc (lanes over j, a fixed shuffle tree), + b_c.
// Then warp 0 runs the row pieces of loss_rows.cuh that loss.cu and the
// softmax kernels run (the same bits from the same z): softmax, the loss and
// its gradient, the softmax's backward, into dz (ws). Each row's loss and
// correct count go to ws; the block that finishes last (an integer ticket)
// adds them up in a fixed order and adds the totals to sums: deterministic,
// no float atomics.
// head_backward_kernel: one thread per input j: dw_jc = sum_r x_rj dz_rc and
// dx_rj = sum_c dz_rc w_jc, each a chain of fmaf in the order of the SGEMM's
// k (the same bits as the GEMMs it replaces), then the ReLU's backward
// (x > 0 ? dx : 0, as activation.cu); block 0 also sums the columns of dz
// into db.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh"

#define HEAD_WARPS 4
#define HEAD_THREADS (HEAD_WARPS * 32)
#define HEAD_CHUNK 16 // classes per pass of head_backward_kernel's weight gradient

namespace {

struct head_args {
    loss_args loss; // kind, logits, n, k, scale
    int in, softmax, relu;
};

__device__ __forceinline__ float warp_sum_float(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// rows (2, n): the per-row losses, then the per-row correct counts
__global__ void __launch_bounds__(HEAD_THREADS)
head_forward_kernel(head_args h, const float *__restrict__ x, const float *__restrict__ w,
                    const float *__restrict__ b, const int32_t *__restrict__ labels,
                    const float *__restrict__ targets, float *__restrict__ z,
                    float *__restrict__ p, float *__restrict__ dz, double *rows,
                    unsigned *ticket, float *sums)
{
    cnn_kernel_begin();
    __shared__ float zs[CNN_HEAD_MAX_OUT], ps[CNN_HEAD_MAX_OUT], gs[CNN_HEAD_MAX_OUT];
    __shared__ bool last;
    const int i = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k = h.loss.k, n = h.loss.n, in = h.in;
    const float *xi = x + (size_t)i * in;
    for (int c = warp; c < k; c += HEAD_WARPS) {
        float acc = 0.0f;
        for (int j = lane; j < in; j += 32) acc = fmaf(xi[j], w[(size_t)j * k + c], acc);
        acc = warp_sum_float(acc);
        if (lane == 0) zs[c] = b ? acc + b[c] : acc;
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
    // the last block to get here adds every row, in order
    if (threadIdx.x == 0) {
        __threadfence(); // this block's rows are visible before its ticket
        last = atomicAdd(ticket, 1u) == (unsigned)n - 1u;
    }
    __syncthreads();
    if (last && warp == 0) {
        __threadfence();
        double l = 0.0, c = 0.0;
        for (int r = lane; r < n; r += 32) {
            l += __ldcg(&rows[r]);
            c += __ldcg(&rows[n + r]);
        }
        l = warp_sum(l);
        c = warp_sum(c);
        if (lane == 0) {
            sums[0] += (float)l;
            sums[1] += (float)c;
            *ticket = 0u; // ready for the next call (and the next replay)
        }
    }
}

__global__ void __launch_bounds__(HEAD_THREADS)
head_backward_kernel(head_args h, const float *__restrict__ x, const float *__restrict__ w,
                     const float *__restrict__ dz, float *__restrict__ dw,
                     float *__restrict__ db, float *__restrict__ dx)
{
    cnn_kernel_begin();
    __shared__ float wt[CNN_HEAD_MAX_OUT][HEAD_THREADS]; // wt[c][t] = w[j0 + t][c]
    const int k = h.loss.k, n = h.loss.n, in = h.in;
    const int t = threadIdx.x, j = blockIdx.x * HEAD_THREADS + t;
    if (blockIdx.x == 0 && db)
        for (int c = t; c < k; c += HEAD_THREADS) {
            float s = 0.0f;
            for (int r = 0; r < n; ++r) s += dz[(size_t)r * k + c];
            db[c] = s;
        }
    if (dx) {
        for (int c = 0; c < k; ++c) wt[c][t] = j < in ? w[(size_t)j * k + c] : 0.0f;
        __syncthreads();
    }
    if (j >= in) return;
    for (int c0 = 0; c0 < k; c0 += HEAD_CHUNK) {
        float acc[HEAD_CHUNK];
#pragma unroll
        for (int u = 0; u < HEAD_CHUNK; ++u) acc[u] = 0.0f;
        for (int r = 0; r < n; ++r) {
            const float xv = x[(size_t)r * in + j];
            const float *dzr = dz + (size_t)r * k + c0;
#pragma unroll
            for (int u = 0; u < HEAD_CHUNK; ++u)
                if (c0 + u < k) acc[u] = fmaf(xv, dzr[u], acc[u]);
        }
#pragma unroll
        for (int u = 0; u < HEAD_CHUNK; ++u)
            if (c0 + u < k) dw[(size_t)j * k + c0 + u] = acc[u];
    }
    if (!dx) return;
    for (int r = 0; r < n; ++r) {
        const float *dzr = dz + (size_t)r * k;
        float acc = 0.0f;
        for (int c = 0; c < k; ++c) acc = fmaf(dzr[c], wt[c][t], acc);
        const size_t o = (size_t)r * in + j;
        dx[o] = h.relu && !(x[o] > 0.0f) ? 0.0f : acc;
    }
}

} // namespace

cnn_status cuda_dense_loss_head(cnn_ctx *ctx, const cnn_loss_desc *d, int in, int softmax,
                                int relu, const float *x, const float *w, const float *b,
                                const int32_t *labels, const float *targets, int scale_n,
                                float *z, float *p, float *dw, float *db, float *dx,
                                float *sums, void *ws)
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
    cudaStream_t st = cnn_stream(ctx);
    if (n == 0) { // no rows: zero gradients, as the GEMMs with k = 0 write
        CNN_CUDA_TRY(cudaMemsetAsync(dw, 0, (size_t)in * k * sizeof(float), st), "dense_loss_head");
        if (db) CNN_CUDA_TRY(cudaMemsetAsync(db, 0, (size_t)k * sizeof(float), st), "dense_loss_head");
        return CNN_OK;
    }
    head_args h;
    h.loss.kind = d->kind;
    h.loss.logits = !softmax;
    h.loss.n = n;
    h.loss.k = k;
    h.loss.scale = (float)scale_n;
    h.loss.scale_nk = (float)scale_n * (float)k;
    h.in = in;
    h.softmax = softmax != 0;
    h.relu = relu != 0;
    unsigned *ticket = (unsigned *)ws;
    double *rows = (double *)((char *)ws + 16);
    float *dz = (float *)(rows + 2 * (size_t)n);
    head_forward_kernel<<<n, HEAD_THREADS, 0, st>>>(h, x, w, b, labels, targets, z, p, dz, rows,
                                                   ticket, sums);
    CNN_CUDA_LAUNCHED("dense_loss_head forward");
    head_backward_kernel<<<(in + HEAD_THREADS - 1) / HEAD_THREADS, HEAD_THREADS, 0, st>>>(
        h, x, w, dz, dw, db, dx);
    CNN_CUDA_LAUNCHED("dense_loss_head backward");
    return CNN_OK;
}
