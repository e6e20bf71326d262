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
// column-sums launch of its own. One launch, its blocks in four roles, so
// that no thread runs a long chain of dependent loads (one thread per weight
// summing every row took 90 us at batch 512). Orders: dx_rj a chain of fmaf
// over the classes in order and db_below the rows of dx in order (the
// unfused path's: from the same dz the same bits); dw and db over n <= 32
// rows one chain in row order (as before), over more rows S slices of the
// rows, each a chain, then a fixed tree over the slices (S depends on n and
// the layer's size only: the same bits run to run); the loss sums as
// before. The bias gradient's chain of n adds is the one long path left
// (about 4 cycles a row); the unfused column_sums runs the same chain.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh"

// the forward: one block of HEAD_FWD_THREADS per sample row
#define HEAD_FWD_WARPS 16
#define HEAD_FWD_THREADS (HEAD_FWD_WARPS * 32)
// the backward: blocks of HEAD_BWD_THREADS, four roles (head_backward_kernel)
#define HEAD_BWD_THREADS 256
// dw and db: the rows split into S slices (a power of two, at most
// HEAD_DW_MAX_SLICES) of at most HEAD_DW_ROWS rows where S allows; n <=
// HEAD_DW_ROWS is one slice (one chain over every row, as before)
#define HEAD_DW_ROWS 32
#define HEAD_DW_MAX_SLICES 32
#define HEAD_DW_THREADS (1 << 17)
// dx with db_below: C <= HEAD_DXB_MAX_COLS inputs a block, HEAD_DXB_ROWS
// rows a pass (one per thread of warps 1..7), dz's loads HEAD_DXB_KU classes
// at a time; shared memory: w's C rows (stride k | 1 <= 65), then two
// buffers of C columns of a pass (stride HEAD_DXB_STRIDE: 16-byte aligned,
// and 4 banks apart)
#define HEAD_DXB_MAX_COLS 8
#define HEAD_DXB_ROWS (HEAD_BWD_THREADS - 32)
#define HEAD_DXB_STRIDE (HEAD_DXB_ROWS + 4)
#define HEAD_DXB_KU 16
#define HEAD_DXB_WS (HEAD_DXB_MAX_COLS * (CNN_HEAD_MAX_OUT + 1))
#define HEAD_DXB_BUF (HEAD_DXB_MAX_COLS * HEAD_DXB_STRIDE)
// dx without db_below: tiles of HEAD_DX_ROWS rows by HEAD_DX_COLS inputs
// (256 threads: 4 rows by 2 inputs each); shared memory: dz's rows of the
// tile, then w's rows of its inputs (stride k | 1)
#define HEAD_DX_ROWS 32
#define HEAD_DX_COLS 64
#define HEAD_DX_SMEM (HEAD_DX_ROWS * CNN_HEAD_MAX_OUT + HEAD_DX_COLS * (CNN_HEAD_MAX_OUT + 1))
// the loss sums: rows copied to shared memory HEAD_LOSS_CHUNK at a time
#define HEAD_LOSS_CHUNK 1024
#define HEAD_BWD_SMEM_MAX(a, b) ((a) > (b) ? (a) : (b))
#define HEAD_BWD_SMEM                                                                      \
    HEAD_BWD_SMEM_MAX(HEAD_BWD_SMEM_MAX(HEAD_DXB_WS + 2 * HEAD_DXB_BUF, 4 * HEAD_LOSS_CHUNK), \
                      HEAD_BWD_SMEM_MAX(HEAD_DX_SMEM, HEAD_BWD_THREADS))

static_assert(HEAD_DXB_ROWS % 32 == 0, "the column chain reads 32 rows at a time");
static_assert(HEAD_DXB_WS % 4 == 0 && HEAD_DXB_STRIDE % 4 == 0, "float4 reads of the buffers");
static_assert(HEAD_BWD_THREADS / HEAD_DW_MAX_SLICES >= 8, "at least 8 outputs a dw block");
static_assert(HEAD_DX_ROWS == 4 * (HEAD_BWD_THREADS / 32) && HEAD_DX_COLS == 64,
              "head_dx: 4 rows by 2 inputs a thread");
static_assert(HEAD_LOSS_CHUNK % HEAD_BWD_THREADS == 0 && HEAD_LOSS_CHUNK % 32 == 0,
              "whole loss chunks");

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
// One instance per loss (SPARSE: labels, else targets' rows) and softmax
// (with it, the loss on probabilities; without, on logits: the host's check),
// so that each holds only its own tail: the one kernel for all four was 9,000
// instructions, and tiny MNIST's launch (probabilities after a softmax, 27
// rows a thread) missed the SM's instruction cache 2,800 times (ncu, H200:
// 15% of 18,245 requests; LeNet-5's 5% of 9,904) with 42% of its warp
// samples waiting for instructions.
template <bool SPARSE, bool SOFTMAX>
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
        if (SPARSE) {
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
        if (SPARSE) {
            label = labels[i];
            skip = label < 0 || label >= k; // as loss.cu: no loss, no count, a zero gradient
        } else {
            t = targets + (size_t)i * k;
        }
        double loss = 0.0, correct = 0.0;
        loss_args la = h.loss;
        la.logits = !SOFTMAX; // as the host checked: known here, so one branch of the loss
        if (skip) {
            if (SOFTMAX) {
                softmax_row(zs, ps, k, lane);
                for (int j = lane; j < k; j += 32) p[(size_t)i * k + j] = ps[j];
            }
            for (int j = lane; j < k; j += 32) g[j] = 0.0f;
        } else if (SOFTMAX) {
            softmax_row(zs, ps, k, lane);
            __syncwarp(); // ps is read across lanes below
            for (int j = lane; j < k; j += 32) p[(size_t)i * k + j] = ps[j];
            loss = categorical_row(la, ps, SPARSE ? nullptr : t, label, gs, &correct, lane);
            __syncwarp();
            softmax_backward_row(ps, gs, g, k, lane);
        } else {
            loss = categorical_row(la, zs, SPARSE ? nullptr : t, label, g, &correct, lane);
        }
        if (lane == 0) {
            rows[i] = loss;
            rows[n + i] = correct;
        }
    }
}

// sum_m zp[m * zs] for m < cnt, one chain of adds from 0.0f in the order of
// m: head_class_sum with every x one (fmaf(1, z, acc) is acc + z), the
// loads issued the same way.
template <int U>
__device__ __forceinline__ float head_rows_sum(const float *__restrict__ zp, int zs, int cnt)
{
    float acc = 0.0f;
    for (int m0 = 0; m0 < cnt; m0 += U) {
        const int last = cnt - 1 - m0; // >= 0
        float zv[U];
#pragma unroll
        for (int q = 0; q < U; ++q) zv[q] = zp[min(q, last) * zs];
#pragma unroll
        for (int q = 0; q < U; ++q)
            if (q <= last) acc += zv[q];
        zp += (size_t)U * zs;
    }
    return acc;
}

// head_class_sum with its U fitted to cnt (one round of loads up to 32)
__device__ __forceinline__ float head_dot(const float *xp, int xs, const float *wp, int ws, int cnt)
{
    return cnt <= 8    ? head_class_sum<8>(xp, xs, wp, ws, cnt)
           : cnt <= 16 ? head_class_sum<16>(xp, xs, wp, ws, cnt)
                       : head_class_sum<32>(xp, xs, wp, ws, cnt);
}

__device__ __forceinline__ float head_sum(const float *zp, int zs, int cnt)
{
    return cnt <= 8    ? head_rows_sum<8>(zp, zs, cnt)
           : cnt <= 16 ? head_rows_sum<16>(zp, zs, cnt)
                       : head_rows_sum<32>(zp, zs, cnt);
}

// The loss sums (block 0 of head_backward_kernel): lane l of warp 0 adds the
// rows' losses and correct counts r = l, l + 32, ... in ascending r from 0.0,
// then warp_sum's butterfly; thread 0 adds them to sums. The block first
// copies HEAD_LOSS_CHUNK rows at a time into shared memory (every thread a
// few, their loads issued together), so that the lanes' chains wait on no
// global load.
__device__ __forceinline__ void head_loss_sums(int n, const double *__restrict__ rows, float *sums,
                                               double *ls)
{
    double *cs = ls + HEAD_LOSS_CHUNK;
    const int t = threadIdx.x;
    double l = 0.0, cc = 0.0;
    for (int r0 = 0; r0 < n; r0 += HEAD_LOSS_CHUNK) { // the same r0 in every thread
        const int m = min(HEAD_LOSS_CHUNK, n - r0);
        constexpr int per = HEAD_LOSS_CHUNK / HEAD_BWD_THREADS;
        double a[per], b[per];
#pragma unroll
        for (int q = 0; q < per; ++q) { // past m a load repeats row m - 1 (not stored)
            const int i = min(t + q * HEAD_BWD_THREADS, m - 1);
            a[q] = rows[r0 + i];
            b[q] = rows[n + r0 + i];
        }
#pragma unroll
        for (int q = 0; q < per; ++q)
            if (t + q * HEAD_BWD_THREADS < m) {
                ls[t + q * HEAD_BWD_THREADS] = a[q];
                cs[t + q * HEAD_BWD_THREADS] = b[q];
            }
        __syncthreads();
        if (t < 32)
            for (int i = t; i < m; i += 32) {
                l += ls[i];
                cc += cs[i];
            }
        __syncthreads(); // read before the next chunk is written
    }
    if (t < 32) {
        l = warp_sum(l);
        cc = warp_sum(cc);
        if (t == 0) {
            sums[0] += (float)l;
            sums[1] += (float)cc;
        }
    }
}

// The weight and bias gradients of outputs [blk * E, + E) (E = threads / S):
// output e < in k is dw_e (j = e / k, c = e % k), in k + c (with db) is db_c.
// Thread (o, s) (o = t % E) sums slice s of the rows, [s L, s L + L) with
// L = ceil(n / S) (the last slices short or empty): dw a chain of fmaf
// x_rj dz_rc, db of adds dz_rc, in ascending r from 0.0f (head_dot,
// head_sum); then with S > 1 a fixed tree over the slices in shared memory:
// for h = S/2, S/4, ..., 1, slice s < h adds slice s + h's sum to its own.
// A warp's lanes are E consecutive outputs of 32 / E slices (E >= 32: one).
__device__ __forceinline__ void head_dw(const head_args &h, int S, int blk,
                                        const float *__restrict__ x, const float *__restrict__ dz,
                                        float *__restrict__ dw, float *__restrict__ db,
                                        float *part)
{
    const int k = h.loss.k, n = h.loss.n, in = h.in, t = threadIdx.x;
    const int E = HEAD_BWD_THREADS / S;
    const int o = t % E, s = t / E;
    const long long e = (long long)blk * E + o;
    const long long nw = (long long)in * k, total = nw + (db ? k : 0);
    const int L = (n + S - 1) / S;
    const int r0 = min(n, s * L), cnt = min(n - r0, L);
    float v = 0.0f;
    if (e < nw) {
        const int j = (int)(e / k), c = (int)(e - (long long)j * k);
        v = head_dot(x + (size_t)r0 * in + j, in, dz + (size_t)r0 * k + c, k, cnt);
    } else if (e < total) {
        v = head_sum(dz + (size_t)r0 * k + (int)(e - nw), k, cnt);
    }
    if (S > 1) { // block-uniform
        part[t] = v;
        for (int half = S / 2; half > 0; half /= 2) {
            __syncthreads(); // the round before written
            if (s < half) { // reads slots [half, 2 half), writes [0, half)
                v += part[t + half * E];
                part[t] = v;
            }
        }
    }
    if (s == 0) {
        if (e < nw)
            dw[e] = v;
        else if (e < total)
            db[e - nw] = v;
    }
}

// The input gradient without db_below: the role's block blk takes a tile of
// HEAD_DX_ROWS rows by HEAD_DX_COLS inputs, (rt, ct) = (blk / tiles across,
// blk % tiles across). dz's rows of the tile and w's rows of its inputs are
// copied into shared memory (each a contiguous run of global memory, read
// coalesced; w's rows at stride k | 1, odd, so that the lanes' reads of 32
// rows are conflict-free). Thread (warp y, lane l) forms the 8 elements of
// rows y + 8 m (m < 4) and inputs l, l + 32 of the tile: dx_rj = sum_c
// dz_rc w_jc, one chain of fmaf in ascending c from 0.0f (as head_dx_db:
// the same bits), then with relu x_rj > 0 ? dx_rj : 0 as activation.cu's
// ReLU backward; lanes store consecutive inputs.
__device__ __forceinline__ void head_dx(const head_args &h, int blk, const float *__restrict__ x,
                                        const float *__restrict__ w,
                                        const float *__restrict__ dz, float *__restrict__ dx,
                                        float *smem)
{
    const int k = h.loss.k, n = h.loss.n, in = h.in, t = threadIdx.x;
    const int ks = k | 1, lane = t & 31, y = t >> 5;
    const int across = (in + HEAD_DX_COLS - 1) / HEAD_DX_COLS;
    const int r0 = (blk / across) * HEAD_DX_ROWS, j0 = (blk % across) * HEAD_DX_COLS;
    const int rows = min(HEAD_DX_ROWS, n - r0), cols = min(HEAD_DX_COLS, in - j0);
    float *zs = smem, *ws = smem + HEAD_DX_ROWS * CNN_HEAD_MAX_OUT;
    // the ReLU's x first (registers; past the edges a load repeats the last row or input)
    float xv[4][2];
    if (h.relu) {
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
            for (int q = 0; q < 2; ++q)
                xv[m][q] = x[(size_t)(r0 + min(y + 8 * m, rows - 1)) * in + j0 +
                             min(lane + 32 * q, cols - 1)];
    }
    // dz's rows r0.. (rows * k floats from dz + r0 k) and w's rows j0.. (cols * k)
    const float *zsrc = dz + (size_t)r0 * k, *wsrc = w + (size_t)j0 * k;
    const int zn = rows * k, wn = cols * k;
    for (int i0 = 0; i0 < max(zn, wn); i0 += 4 * HEAD_BWD_THREADS) { // the same i0 in every thread
        float zv[4], wv[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int i = i0 + t + q * HEAD_BWD_THREADS;
            zv[q] = zsrc[min(i, zn - 1)];
            wv[q] = wsrc[min(i, wn - 1)];
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int i = i0 + t + q * HEAD_BWD_THREADS;
            if (i < zn) zs[i] = zv[q];
            if (i < wn) {
                const int jj = i / k;
                ws[jj * ks + (i - jj * k)] = wv[q];
            }
        }
    }
    __syncthreads();
    float acc[4][2];
#pragma unroll
    for (int m = 0; m < 4; ++m) acc[m][0] = acc[m][1] = 0.0f;
    const float *w0 = ws + lane * ks, *w1 = ws + (lane + 32) * ks, *z = zs + y * k;
#pragma unroll 2
    for (int c = 0; c < k; ++c) {
        const float a = w0[c], b = w1[c];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
            const float d = z[8 * m * k + c];
            acc[m][0] = fmaf(d, a, acc[m][0]);
            acc[m][1] = fmaf(d, b, acc[m][1]);
        }
    }
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int r = y + 8 * m, j = lane + 32 * q;
            if (r < rows && j < cols) {
                const float v = acc[m][q];
                dx[(size_t)(r0 + r) * in + j0 + j] = h.relu && !(xv[m][q] > 0.0f) ? 0.0f : v;
            }
        }
}

// The input gradient with db_below: the role's block blk takes the C inputs
// j0 = blk C, ..., j0 + C - 1 over every row, HEAD_DXB_ROWS rows a pass.
// w's rows j0.. are staged in shared memory first (stride k | 1, odd: no
// bank conflicts across the C rows). In pass p, thread u of warps 1..7 takes
// row r = p HEAD_DXB_ROWS + u: its dz row's loads issued HEAD_DXB_KU at a
// time, then for each column the chain of fmaf over c in ascending order
// from 0.0f (head_dx's order: the same dx bits), the ReLU's mask, dx
// written and also kept in the pass's buffer (column-major, padded rows of
// HEAD_DXB_STRIDE: the chain's float4 reads are conflict-free). Lane c < C
// of warp 0 adds column c of the previous pass in row order onto its sum
// from 0.0f (the two passes' buffers alternate, one barrier a pass, so the
// chain of pass p - 1 runs beside the products of pass p); the sum ends as
// db_below[j0 + c], the order of cnn_cuda_column_sums (reduce.cu), which the
// dense layer below would run over this dx (the same bits).
__device__ __forceinline__ void head_dx_db(const head_args &h, int C, int blk,
                                           const float *__restrict__ x,
                                           const float *__restrict__ w,
                                           const float *__restrict__ dz, float *__restrict__ dx,
                                           float *__restrict__ db_below, float *smem)
{
    const int k = h.loss.k, n = h.loss.n, in = h.in, t = threadIdx.x;
    const int ks = k | 1;
    const int j0 = blk * C, cols = min(C, in - j0); // cols >= 1
    float *ws = smem, *bufs = smem + HEAD_DXB_WS;
    for (int i = t; i < cols * k; i += HEAD_BWD_THREADS) {
        const int c = i / k, q = i - c * k;
        ws[c * ks + q] = w[(size_t)(j0 + c) * k + q];
    }
    __syncthreads();
    const int passes = (n + HEAD_DXB_ROWS - 1) / HEAD_DXB_ROWS;
    float sum = 0.0f;
    for (int p = 0; p <= passes; ++p) { // the same p in every thread
        if (t >= 32) {
            const int u = t - 32, r = p * HEAD_DXB_ROWS + u;
            if (p < passes && r < n) {
                float *buf = bufs + (p & 1) * HEAD_DXB_BUF;
                float xv[HEAD_DXB_MAX_COLS];
#pragma unroll
                for (int c = 0; c < HEAD_DXB_MAX_COLS; ++c) xv[c] = 1.0f;
                if (h.relu) {
                    const float *xr = x + (size_t)r * in + j0;
#pragma unroll
                    for (int c = 0; c < HEAD_DXB_MAX_COLS; ++c) xv[c] = xr[min(c, cols - 1)];
                }
                float acc[HEAD_DXB_MAX_COLS];
#pragma unroll
                for (int c = 0; c < HEAD_DXB_MAX_COLS; ++c) acc[c] = 0.0f;
                const float *zr = dz + (size_t)r * k;
                for (int q0 = 0; q0 < k; q0 += HEAD_DXB_KU) {
                    const int last = k - 1 - q0; // >= 0
                    float zv[HEAD_DXB_KU];
#pragma unroll
                    for (int q = 0; q < HEAD_DXB_KU; ++q) zv[q] = zr[q0 + min(q, last)];
#pragma unroll
                    for (int c = 0; c < HEAD_DXB_MAX_COLS; ++c)
                        if (c < cols)
#pragma unroll
                            for (int q = 0; q < HEAD_DXB_KU; ++q)
                                if (q <= last) acc[c] = fmaf(zv[q], ws[c * ks + q0 + q], acc[c]);
                }
                float *dxr = dx + (size_t)r * in + j0;
#pragma unroll
                for (int c = 0; c < HEAD_DXB_MAX_COLS; ++c)
                    if (c < cols) {
                        const float v = h.relu && !(xv[c] > 0.0f) ? 0.0f : acc[c];
                        dxr[c] = v;
                        buf[c * HEAD_DXB_STRIDE + u] = v;
                    }
            }
        } else if (p > 0 && t < cols) { // column t of pass p - 1
            const float *col = bufs + ((p - 1) & 1) * HEAD_DXB_BUF + t * HEAD_DXB_STRIDE;
            const int cnt = min(HEAD_DXB_ROWS, n - (p - 1) * HEAD_DXB_ROWS);
            float4 cur[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) cur[i] = reinterpret_cast<const float4 *>(col)[i];
            for (int u0 = 0; u0 < cnt; u0 += 32) {
                // the next 32 rows' loads before this group's adds (past the
                // pass's rows: the last 32 of the buffer again, not added)
                const float4 *nx =
                    reinterpret_cast<const float4 *>(col + min(u0 + 32, HEAD_DXB_ROWS - 32));
                float4 nxt[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) nxt[i] = nx[i];
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const int at = u0 + 4 * i;
                    if (at < cnt) sum += cur[i].x;
                    if (at + 1 < cnt) sum += cur[i].y;
                    if (at + 2 < cnt) sum += cur[i].z;
                    if (at + 3 < cnt) sum += cur[i].w;
                }
#pragma unroll
                for (int i = 0; i < 8; ++i) cur[i] = nxt[i];
            }
        }
        __syncthreads(); // pass p written, pass p - 1 read
    }
    if (t < cols) db_below[j0 + t] = sum;
}

// One launch, every block one of four roles (block-uniform):
// block 0 the loss sums (head_loss_sums); then dx_blocks blocks of the input
// gradient, with db_below head_dx_db (C inputs a block over every row),
// else head_dx (one element a thread); then dw_blocks blocks of the weight
// and bias gradients (head_dw, S slices of the rows). The roles that take
// long at large n (the column chains of db_below) come first, so that their
// blocks start first.
__global__ void __launch_bounds__(HEAD_BWD_THREADS, 2)
head_backward_kernel(head_args h, int slices, int cols, int dx_blocks,
                     const float *__restrict__ x, const float *__restrict__ w,
                     const float *__restrict__ dz, const double *__restrict__ rows,
                     float *__restrict__ dw, float *__restrict__ db, float *__restrict__ dx,
                     float *__restrict__ db_below, float *sums)
{
    cnn_kernel_begin();
    __shared__ __align__(16) float smem[HEAD_BWD_SMEM];
    const int block = blockIdx.x;
    if (block == 0)
        head_loss_sums(h.loss.n, rows, sums, reinterpret_cast<double *>(smem));
    else if (block <= dx_blocks) {
        if (db_below)
            head_dx_db(h, cols, block - 1, x, w, dz, dx, db_below, smem);
        else
            head_dx(h, block - 1, x, w, dz, dx, smem);
    } else {
        head_dw(h, slices, block - 1 - dx_blocks, x, dz, dw, db, smem);
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
    const bool sparse = d->kind == CNN_LOSS_SPARSE_CE;
    auto *head_forward = sparse ? (softmax ? head_forward_kernel<true, true>
                                           : head_forward_kernel<true, false>)
                                : (softmax ? head_forward_kernel<false, true>
                                           : head_forward_kernel<false, false>);
    head_forward<<<n, HEAD_FWD_THREADS, 0, st>>>(h, x, w, b, labels, targets, z, p, dz, rows);
    CNN_CUDA_LAUNCHED("dense_loss_head forward");
    // dw and db: S slices of the rows (head_dw), S a function of n alone (the
    // order of the sums: the same bits for the same n, run to run)
    // and of their count: where the outputs alone fill the GPU (HEAD_DW_THREADS
    // threads, slices included), no more slices than that takes, and 32
    // outputs a warp (slices <= 8: its loads of x and dz from one row)
    const long long dw_outputs = (long long)in * k + (db ? k : 0);
    int slices = 1;
    while (slices < HEAD_DW_MAX_SLICES && (n + slices - 1) / slices > HEAD_DW_ROWS &&
           (slices < 8 || dw_outputs * slices * 2 <= HEAD_DW_THREADS))
        slices *= 2;
    const long long per_block = HEAD_BWD_THREADS / slices;
    const long long dw_blocks = (dw_outputs + per_block - 1) / per_block;
    // with db_below, C inputs a block: 1 below 256 inputs (a block per
    // column), up to 8 (a 32-byte sector of each dx row a block) from 1024;
    // the bits do not depend on C
    int cols = 1;
    while (db_below && cols < HEAD_DXB_MAX_COLS && in >= 256 * cols) cols *= 2;
    const long long dx_blocks = !dx         ? 0
                                : db_below ? ((long long)in + cols - 1) / cols
                                           : ((long long)n + HEAD_DX_ROWS - 1) / HEAD_DX_ROWS *
                                                 (((long long)in + HEAD_DX_COLS - 1) / HEAD_DX_COLS);
    if (1 + dx_blocks + dw_blocks > INT32_MAX)
        return cnn_set_error(CNN_ERR_VALUE, "dense_loss_head: %d x %d inputs are too many", n, in);
    head_backward_kernel<<<(unsigned)(1 + dx_blocks + dw_blocks), HEAD_BWD_THREADS, 0, st>>>(
        h, slices, cols, (int)dx_blocks, x, w, dz, rows, dw, db, dx, db_below, sums);
    CNN_CUDA_LAUNCHED("dense_loss_head backward");
    return CNN_OK;
}
