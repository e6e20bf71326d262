// Host emulation of the CUDA features dense_head.cu uses (and pool.cu,
// dev/cuda/pool_im2col_kernels.cuh, gather.cu, gather_im2col.cu,
// conv2d_kernels.cuh's im2col, the augmentation kernels, random_*.cu, and
// the SGEMM kernels of gemm_wide_kernels.cuh (its tensor-core instances
// too), gemm_kernels.cuh and gemm_short_kernels.cuh: 1-d blocks on grids of
// 1 to 3 dimensions): threads are fibers (own stacks, switched with
// setjmp), __syncthreads a block barrier (checked: every live thread at the
// same line), warp shuffles, mma.sync and ldmatrix two-phase warp exchanges. Blocks
// run one after another; within a phase the fibers run in a random order.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <algorithm>
#include <functional>

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) uint4 { unsigned x, y, z, w; }; // gather.cu's 16-byte unit

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
static inline const char *cudaGetErrorString(cudaError_t) { return "emu error"; }
static inline const char *cudaGetErrorName(cudaError_t) { return "emuError"; }
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
enum cudaMemcpyKind { cudaMemcpyDeviceToDevice = 3 };
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                          cudaMemcpyKind, cudaStream_t)
{
    memcpy(dst, src, bytes);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t)
{
    memset(p, v, bytes);
    return cudaSuccess;
}

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

namespace emu {
struct fiber_state;
extern fiber_state *cur;
extern uint3 bid;
extern dim3 bdim, gdim;
const uint3 &tid_of(fiber_state *f);
void sync_block(int line);
void sync_warp(int line);
void *slot(); // this fiber's exchange slot (32 bytes)
void *partner_slot(int lane);
int lane();
float *block_smem(size_t floats); // per block, NaN-filled at the block's start
void run_grid(dim3 g, dim3 b, std::function<void()> body);
// mma.sync of one warp (every lane calls it at the same line): D = A B + D,
// m16n8k8 on TF32 operands, m16n8k16 on bfloat16 (bf16) or float16 ones
void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]);
void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], bool bf16);
// ldmatrix .x4 (.trans) .b16 of one warp: this lane's row address in, its
// four registers out
void ldmatrix_x4(unsigned (&r)[4], const void *row, bool trans);
}
// the kernels' host branches that need the emulation (a warp's mma)
#define CNN_HOST_EMULATION 1
#define threadIdx (emu::tid_of(emu::cur))
#define blockIdx (emu::bid)
#define blockDim (emu::bdim)
#define gridDim (emu::gdim)
#define __syncthreads() emu::sync_block(__LINE__)
#define __syncwarp(...) emu::sync_warp(__LINE__)

template <typename T> static inline T emu_shfl_xor(T v, int o, int line)
{
    memcpy(emu::slot(), &v, sizeof(T));
    emu::sync_warp(line);
    T r;
    memcpy(&r, emu::partner_slot(emu::lane() ^ o), sizeof(T));
    emu::sync_warp(line);
    return r;
}
#define __shfl_xor_sync(mask, v, o) emu_shfl_xor((v), (o), __LINE__)

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p += v; return o; }
static inline void __threadfence() {}

#define EMU_LAUNCH(kernel, g, b, ...) emu::run_grid(dim3(g), dim3(b), [&]() { kernel(__VA_ARGS__); })
static inline unsigned __float_as_uint(float v) { unsigned r; memcpy(&r, &v, 4); return r; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
