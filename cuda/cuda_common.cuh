// cuda_common.cuh: what every file of the cuda engine shares: the context,
// error checking that records a message instead of exiting, launch sizes.
#ifndef CNN_CUDA_COMMON_CUH
#define CNN_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "cnn.h"

// lo and hi rounded to bfloat16 (PREC = CNN_PRECISION_BF16) or float16 (to
// nearest even; float16 overflows to inf past 65504 and flushes nothing: its
// subnormals are kept), packed in 32 bits with lo in the low half (as the
// 16-bit mma takes a pair of k, and as a 16-bit value is stored: the low
// half alone). The wide SGEMM's operands, conv2d_kernels.cuh's 16-bit
// column matrices.
template <int PREC>
__device__ __forceinline__ unsigned cnn_pack16(float lo, float hi)
{
    unsigned r;
    if constexpr (PREC == CNN_PRECISION_BF16) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        memcpy(&r, &v, sizeof r);
    } else {
        const __half2 v = __floats2half2_rn(lo, hi);
        memcpy(&r, &v, sizeof r);
    }
    return r;
}

// Device memory of a context for kernels whose blocks meet at the end: the
// last block to take a ticket (an integer atomic, handed back to 0 by that
// block) finishes the kernel's work, so no float atomics are needed and the
// sums come out in one order. Zeroed when the context is made; a kernel that
// uses a ticket is never in flight twice (one stream, kernels in order).
enum { CNN_TICKET_GATHER = 0, CNN_TICKET_LOSS = 1, CNN_TICKETS = 8 };
#define CNN_LOSS_MAX_BLOCKS 1024 // the loss kernel's grid (its rows grid-stride)
struct cnn_cuda_meet {
    unsigned int tickets[CNN_TICKETS];
    double loss_parts[2][CNN_LOSS_MAX_BLOCKS]; // per block: loss sum, correct count
};

// The cuda context's impl: the stream every kernel of one Net runs on, and
// scratch for the SGEMM's split-K partial sums, allocated once.
struct cnn_cuda_impl {
    cudaStream_t stream;
    int device;
    int sm_count;
    float *scratch;
    size_t scratch_floats;
    cnn_cuda_meet *meet; // device memory, zeroed at creation
    cudaEvent_t marks[CNN_TIMER_MARKS]; // record.cu's timer, each made on first use
    int tensor_cores;     // compute capability 8.0 or later: TF32 mma (gemm.cu)
    int early_launch;     // record.cu: recordings launch each kernel early (see
                          // cnn_kernel_begin); set by the cuda engine's table on
                          // sm_90 and later unless CNNCUDA_EARLY_LAUNCH=0
    struct cnn_cuda_uploader *uploader; // upload_samples.cu: made on first use
};

#define CNN_CUDA_SCRATCH_FLOATS ((size_t)4 << 20) // 16 MiB

// backend_cuda.cu: make and release an impl (the cudnn engine's impl starts
// with one). init validates `device` and leaves it current; fini runs with
// impl->device current, between enter (which makes `device` current and
// returns the caller's device) and leave (which restores it).
cnn_status cnn_cuda_impl_init(cnn_cuda_impl *impl, int device);
// upload_samples.cu: the uploader's buffers, streams and events back
void cnn_cuda_uploader_free(cnn_cuda_impl *impl);
// layout.cu: cuda_nchw_from_nhwc on another stream than the context's
cnn_status cnn_cuda_nchw_from_nhwc_on(cudaStream_t stream, int n, int h, int w, int c,
                                      const float *x, float *y);
void cnn_cuda_impl_fini(cnn_cuda_impl *impl);
int cnn_cuda_device_enter(int device);
void cnn_cuda_device_leave(int previous, int device);

static inline cudaStream_t cnn_stream(cnn_ctx *ctx)
{
    return ((cnn_cuda_impl *)ctx->impl)->stream;
}

static inline cnn_cuda_meet *cnn_meet(cnn_ctx *ctx)
{
    return ((cnn_cuda_impl *)ctx->impl)->meet;
}

// Called by thread 0 of every block, once, after the block's part that the
// others must not overtake (its reads, or its writes of partial results,
// which __threadfence makes visible to the last block first): true in the
// block that takes the last ticket, which also hands the ticket back to 0
// for the kernel's next launch.
__device__ __forceinline__ bool cnn_last_block(unsigned int *ticket)
{
    __threadfence();
    const unsigned int t = atomicAdd(ticket, 1u);
    if (t != gridDim.x - 1) return false;
    __threadfence(); // the others' writes before their tickets are seen from here on
    *ticket = 0u;
    return true;
}

// The start of a train_range step's gather kernel (gather.cu,
// gather_im2col.cu), after cnn_kernel_begin: every block reads the Net's
// CNN_COUNT_POSITION counter once and gets it back; the block that takes
// the last ticket (cnn_last_block) has then seen every block's read behind
// it and moves the counters on for the step (a training forward begins,
// one optimizer step, the position by `rows`), so no block can read a
// moved position. Every thread of every block must call it.
__device__ __forceinline__ int64_t cnn_step_position(int64_t *counters, unsigned int *ticket,
                                                     long long rows)
{
    __shared__ int64_t position;
    if (threadIdx.x == 0) {
        position = counters[CNN_COUNT_POSITION];
        if (cnn_last_block(ticket)) {
            counters[CNN_COUNT_MASK] = counters[CNN_COUNT_FORWARDS]++;
            counters[CNN_COUNT_STEPS] += 1;
            counters[CNN_COUNT_POSITION] = position + rows;
        }
    }
    __syncthreads();
    return position;
}

// Turns a CUDA error into a recorded message and a status.
static inline cnn_status cnn_cuda_status(cudaError_t err, const char *what)
{
    if (err == cudaSuccess) return CNN_OK;
    cudaGetLastError(); // clear a non-sticky error so the Net stays usable
    if (err == cudaErrorMemoryAllocation)
        return cnn_set_error(CNN_ERR_MEMORY, "%s: CUDA out of memory (%s)", what,
                             cudaGetErrorString(err));
    return cnn_set_error(CNN_ERR_DEVICE, "%s: %s (%s)", what, cudaGetErrorString(err),
                         cudaGetErrorName(err));
}

#define CNN_CUDA_TRY(call, what)                                  \
    do {                                                          \
        cnn_status cnn_cuda_s_ = cnn_cuda_status((call), (what)); \
        if (cnn_cuda_s_ != CNN_OK) return cnn_cuda_s_;            \
    } while (0)

// After a launch: a bad configuration shows here (asynchronous faults show
// at the next synchronising call, which is checked too).
#define CNN_CUDA_LAUNCHED(what) CNN_CUDA_TRY(cudaGetLastError(), (what))

static inline unsigned cnn_blocks(size_t count, unsigned threads)
{
    size_t b = (count + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535u * 32u) b = 65535u * 32u; // kernels use grid-stride loops
    return (unsigned)b;
}

#define CNN_THREADS 256

// The first statement of every kernel of the engine. In a recorded training
// step (record.cu) each kernel is launched before the one ahead of it has
// finished (programmatic dependent launch, sm_90 and later) and waits here
// until that kernel is done and its writes are visible. A kernel must not
// read or write device memory before this line. Outside a recording, or on
// older GPUs, it does nothing.
//
// No kernel releases the next one early (griddepcontrol.launch_dependents):
// the next kernel is placed as the blocks of this one exit. Measured on an
// H100 (BENCHMARKS.md, "Early launch"): releasing at the start placed the
// SGEMM's blocks on the SMs the kernel before left free, unevenly, and made
// the CIFAR step 11% slower; releasing at exit was the fastest of the four
// ways tried.
__device__ __forceinline__ void cnn_kernel_begin()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}


// Grid-stride loop over [0, n).
#define CNN_GRID_LOOP(i, n)                                                    \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)blockDim.x * gridDim.x)

// gemm.cu: C (m, n) = alpha op(A) op(B) + beta C, row-major, on the stream.
// beta == 0 never reads C.
cnn_status cnn_cuda_sgemm(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc);
// Whether cnn_cuda_sgemm multiplies on TF32 tensor cores (its wide kernel):
// the Net asked for precision "tf32" and the GPU has them.
bool cnn_cuda_sgemm_tf32(cnn_ctx *ctx);
// The precision cnn_cuda_sgemm's wide kernel multiplies in (cnn_precision):
// the Net's where the GPU has tensor cores, else CNN_PRECISION_FLOAT32.
int cnn_cuda_sgemm_precision(cnn_ctx *ctx);
// Whether cnn_cuda_sgemm runs a product of this size on the wide kernel:
// m * n * k of at least 2^27 multiply-adds (the same for every transpose).
bool cnn_cuda_sgemm_wide_fits(int m, int n, int k);
// How cnn_cuda_sgemm_ex takes the row sums (cnn_sgemm_extra) of an m x n x k
// product with B transposed (a convolution's bias gradient):
enum cnn_row_sums_plan {
    CNN_ROW_SUMS_NONE = 0, // it does not: the caller sums apart
    CNN_ROW_SUMS_MADE,     // its kernel makes the column of ones: the tile kernel
                           // below the wide threshold, above it the narrow
                           // products of n + 1 <= 32 columns (every precision)
    CNN_ROW_SUMS_READ_B    // the wide kernel reads it from B's row n (b + n ldb),
                           // which the caller fills with ones: outside TF32,
                           // where n is not a multiple of its tile's 128 columns
};
int cnn_cuda_sgemm_row_sums(cnn_ctx *ctx, int m, int n, int k);
// The SGEMM's extras (gemm_wide_kernels.cuh, gemm_kernels.cuh): A (not
// transposed), B (not transposed) and C in the batched layout (n, rows, P)
// of a convolution's tensors when ap, bp, cp = P > 0 (0: plain row-major);
// bias[row] added to C (NULL: none), or bias[column] with bias_columns (a
// dense layer's y (n, out)); relu: C = max(C, 0) after the bias; then
// beta * C added. row_sums: the sums of op(A)'s rows as one more column of
// the product (with op(B)'s column n all ones), written apart from C.
struct cnn_sgemm_extra {
    int ap, bp, cp;
    const float *bias;
    int relu;
    int bias_columns; // bias[column] instead (a dense layer's y (n, out))
    float *row_sums;  // also op(A)'s row sums, to row_sums[row]: a column
                      // of ones after op(B)'s last (trans_b, beta == 0 only:
                      // a convolution's bias gradient; cnn_cuda_sgemm_row_sums)
};
// cnn_cuda_sgemm with extras (NULL: none); both kernels take them.
cnn_status cnn_cuda_sgemm_ex(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc, const cnn_sgemm_extra *extra);

// B stored in 16 bits (the precision's: bfloat16 or float16; a convolution's
// column matrix that im2col wrote rounded), A plain: where the context's
// precision is bf16 or fp16 and cnn_cuda_sgemm_ex would run the product on
// the wide kernel (row_sums: whether the extra will ask for them), its
// 16-bit instances take B as it is stored, 16 bytes a copy, with the same
// sums as B in float32 rounded by the kernel. B plain or transposed, not
// batched, ldb a multiple of 8 and b 16-byte aligned; else CNN_ERR_INTERNAL.
bool cnn_cuda_sgemm_b16_fits(cnn_ctx *ctx, int trans_b, int m, int n, int k, int row_sums);
cnn_status cnn_cuda_sgemm_b16(cnn_ctx *ctx, int trans_b, int m, int n, int k, float alpha,
                              const float *a, int lda, const uint16_t *b, int ldb, float beta,
                              float *c, int ldc, const cnn_sgemm_extra *extra);

// The SGEMM's two kernels reached by name, whatever the product's size: the
// wide kernel (TF32 where cnn_cuda_sgemm_tf32), or the tile kernel with
// tiles `tile` (CNN_TILE_*; the engine's are SHAPED). cnn_cuda_sgemm_ex
// picks between them by cnn_cuda_sgemm_wide_fits; dev/cuda's sgemm stages
// call them directly to time each kernel on every product.
enum {
    CNN_TILE_SHAPED = 0, // 16/32/64 x 32/64 fitted to the product, 16-byte shared loads
    CNN_TILE_SQUARE = 1, // the same kernel at 64x64 only
    CNN_TILE_SCALAR = 2  // 64x64 with scalar shared loads and stores: the
                         // engine's tile until 2026-11-25 (the same bits as SQUARE)
};
cnn_status cnn_cuda_sgemm_wide(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float *a, int lda, const float *b, int ldb,
                               float beta, float *c, int ldc, const cnn_sgemm_extra *extra);
cnn_status cnn_cuda_sgemm_tile(cnn_ctx *ctx, int tile, int trans_a, int trans_b, int m, int n,
                               int k, float alpha, const float *a, int lda, const float *b,
                               int ldb, float beta, float *c, int ldc,
                               const cnn_sgemm_extra *extra);

// conv2d.cu: the column matrix of convolution d over x (n, c, h, w) into col
// (K, NP), im2col_kernel on the engine's grid (the columns over x, the
// input channels over y).
cnn_status cnn_cuda_im2col(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x, float *col);
// conv2d.cu: how convolution d stores its column matrix in its workspace:
// CNN_PRECISION_BF16 or _FP16 (16 bits, rounded) where the context's
// precision is that one and both products that read col take B in 16 bits
// (cnn_cuda_sgemm_b16_fits) with np a multiple of 8; else
// CNN_PRECISION_FLOAT32. Every writer of col (im2col, gather_im2col.cu)
// and reader asks this.
int cnn_cuda_conv2d_col16(cnn_ctx *ctx, const cnn_conv_desc *d);

// conv2d.cu: a convolution's backward-data product, dcol (K, NP) = W^T dy,
// into the start of its workspace ws (what checks d); the first half of
// cuda_conv2d_backward_data, whose col2im follows.
cnn_status cnn_cuda_conv2d_dcol(cnn_ctx *ctx, const char *what, const cnn_conv_desc *d,
                                const float *dy, const float *w, void *ws);

// pool.cu: CNN_ERR_VALUE, naming `what`, for a descriptor the pooling
// kernels do not take (mode, sizes, an image plane past an int32 argmax).
cnn_status cnn_cuda_check_pool_desc(const char *what, const cnn_pool_desc *d);

// reduce.cu: bias gradients.
// out[j] = sum_r x[r * cols + j] for x (rows, cols): one thread per column.
cnn_status cnn_cuda_column_sums(cnn_ctx *ctx, int rows, int cols, const float *x, float *out);

// channel_bias.cu: a convolution's bias over NCHW tensors (n, c, hw).
// y[i, ch, :] += b[ch]
cnn_status cnn_cuda_add_channel_bias(cnn_ctx *ctx, int n, int c, int hw, const float *b,
                                     float *y);
// y = relu(y + b[ch]) (b may be NULL: relu(y)), in the one pass.
cnn_status cnn_cuda_add_channel_bias_relu(cnn_ctx *ctx, int n, int c, int hw, const float *b,
                                          float *y);
// out[ch] = sum of x[i, ch, :] over i (deterministic)
cnn_status cnn_cuda_channel_sums(cnn_ctx *ctx, int n, int c, int hw, const float *x, float *out);

#endif
