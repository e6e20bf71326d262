// gemm_wide_kernels.cuh: the cuda engine's SGEMM for large products (gemm.cu
// chooses it; gemm_kernels.cuh keeps the tile kernel for small ones). In a header so that dev/cuda/sgemm.cu launches
// the very kernels the engine runs.
//
// C (m, n) = alpha op(A) op(B) + beta C, row-major, as in gemm_kernels.cuh.
// One block computes a BM x 128 tile of C (BM = 32, 64 or 128) with
// BM * 2 threads, each owning 8 x 8 outputs: rows ty*4 + [0, 4) and
// BM/2 + ty*4 + [0, 4), columns tx*4 + [0, 4) and 64 + tx*4 + [0, 4), so that
// each k step reads two float4 of A and two float4 of B from shared memory
// for 64 multiply-adds (the 4x4 tile: 8 scalar reads for 16). K goes through
// shared memory 16 at a time in a pipeline of 3 stages (2 for 128 rows):
// the tiles of the next steps are copied from global to shared memory
// asynchronously (cp.async, one float each, so any layout and leading
// dimension; zeros past the edges) while the current one is multiplied, one
// barrier per step, no registers held for the copies. Strict fp32: fmaf in
// the order of k, one chain per output (no atomics), so a product without
// split-K gives the same bits as the tile kernel. The opt-in tensor-core
// instances (precisions "tf32", "bf16", "fp16") multiply on tensor cores
// instead (see below).
//
// Operands and output may also be in the "batched" layout of a
// convolution's tensors: a matrix X (R, n*P) stored as a tensor (n, R, P),
// X[r, i*P + p] at ((i*R + r)*P + p). A (not transposed, R = m), B (not
// transposed, R = k) and C (R = m) take it when their ap, bp, cp is P > 0
// (0: plain row-major with the leading dimension). So the convolution's
// GEMMs read dy and write y in NCHW without a rearranging pass. bias (may be
// NULL) adds bias[row] to every output of that row (bias[column] to every
// output of that column with bias_columns), and relu then clamps it at 0,
// before beta * C. The forward's (A and B not transposed) outputs are stored
// from the registers; the others' through shared memory, as float4s where
// C's rows allow (the epilogue says why).
#ifndef CNN_GEMM_WIDE_KERNELS_CUH
#define CNN_GEMM_WIDE_KERNELS_CUH

#include <type_traits>

#include "async_copy.cuh"
#include "cuda_common.cuh"

namespace cnn_gemm {
namespace { // internal linkage: every .cu that includes this has its own copy

constexpr int WBN = 128, WBK = 16;
// the epilogue's rows of C in shared memory at a time (a 128-row tile in
// two passes: its 67 KB would pass the 48 KB of static shared memory), and
// their padding
constexpr int WIDE_CROWS = 64, WIDE_CPAD = 4;

// threads of a BM-row tile: (bm / 8) * (WBN / 8) with 8x8 outputs each in
// fp32; on tensor cores (mma: a precision other than CNN_PRECISION_FLOAT32,
// cnn.h; true is TF32), (bm / 32) * 4 warps of 32x32 outputs (32 a thread)
__host__ __device__ constexpr int wide_threads(int bm, int mma = 0)
{
    return mma ? bm * 4 : bm * 2;
}
// blocks per SM the launch bounds ask for (the registers a thread may use)
__host__ __device__ constexpr int wide_min_blocks(int bm, int mma)
{
    return mma ? (bm == 128 ? 1 : bm == 64 ? 3 : 5)
               : (bm == 128 ? 2 : bm == 64 ? 3 : 5);
}
// stages of the shared-memory pipeline: 3, or 2 for 128-row tiles (whose
// three would pass the 48 KB of static shared memory)
__host__ __device__ constexpr int wide_stages(int bm) { return bm >= 128 ? 2 : 3; }

// Where the element (r, j) of a matrix of `rows` rows lies: plain row-major
// with leading dimension ld, or batched with image size p.
__device__ __forceinline__ size_t wide_offset(int r, int j, int rows, int ld, int p)
{
    if (p <= 0) return (size_t)r * ld + j;
    const int i = j / p;
    return ((size_t)i * rows + r) * p + (j - i * p);
}

// Extra arguments of the wide kernel: the layouts, the bias, the ReLU
// (cuda_common.cuh).
typedef cnn_sgemm_extra WideExtra;

// TF32 tensor cores (sm_80 and later): D = A B + D on a 16x8 tile over 8 of
// k, one warp, A and B already rounded to TF32 (wide_tf32), fp32 sums.
// Fragments (PTX ISA, mma.m16n8k8 .tf32): lane = 4 g + t; a0..a3 hold A
// (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); b0, b1 hold B (t, g),
// (t + 4, g); d0..d3 hold D (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
__device__ __forceinline__ void wide_mma_tf32(float (&d)[4], const unsigned (&a)[4],
                                              const unsigned (&b)[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(CNN_HOST_EMULATION) // dev/emu: the warp's mma on the host
    emu::mma_m16n8k8_tf32(d, a, b);
#endif
}

// x rounded to TF32 (10 bits of mantissa; to nearest, ties away from zero),
// as the bits the mma takes.
__device__ __forceinline__ unsigned wide_tf32(float x)
{
    unsigned r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#else
    // the same on the host (dev/emu): half the dropped 13 bits' range added
    // to the magnitude, then dropped (a carry moves the exponent on); inf
    // and NaN as they are
    r = __float_as_uint(x);
    if ((r & 0x7f800000u) != 0x7f800000u) r = (r + 0x1000u) & 0xffffe000u;
#endif
    return r;
}

// 16-bit tensor cores (sm_80 and later), precisions "bf16" (PREC =
// CNN_PRECISION_BF16) and "fp16": D = A B + D on a 16x8 tile over 16 of k,
// one warp, fp32 sums. Each .b32 operand register holds two 16-bit values,
// the one of the lower k in its low half (wide_pack16).
// Fragments (PTX ISA, mma.m16n8k16 .bf16/.f16): lane = 4 g + t; a0..a3 hold
// A (g, 2t..2t+1), (g + 8, 2t..2t+1), (g, 2t+8..2t+9), (g + 8, 2t+8..2t+9);
// b0, b1 hold B (2t..2t+1, g), (2t+8..2t+9, g); d0..d3 as m16n8k8's above.
template <int PREC>
__device__ __forceinline__ void wide_mma_16(float (&d)[4], const unsigned (&a)[4],
                                            const unsigned (&b)[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (PREC == CNN_PRECISION_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(CNN_HOST_EMULATION) // dev/emu: the warp's mma on the host
    emu::mma_m16n8k16(d, a, b, PREC == CNN_PRECISION_BF16);
#endif
}

// Four 8x8 matrices of 16-bit values from shared memory, one warp: lane L
// gives the address of row L % 8 of matrix L / 8 (16 bytes, 16-byte
// aligned); register i gets matrix i's row g, columns 2t and 2t + 1 (lane =
// 4 g + t; the lower column in the low half), or with TRANS its rows 2t and
// 2t + 1 of column g: as an m16n8k16 B fragment wants them from a tile
// stored with n (TRANS: with k) along its rows. (ldmatrix, sm_75 and later.)
template <bool TRANS>
__device__ __forceinline__ void wide_ldmatrix4(unsigned (&r)[4], const unsigned short *row)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(row);
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s));
#elif defined(CNN_HOST_EMULATION) // dev/emu: the warp's ldmatrix on the host
    emu::ldmatrix_x4(r, row, TRANS);
#else
    r[0] = r[1] = r[2] = r[3] = 0u;
#endif
}

// A 16-bit value (bfloat16 for PREC = CNN_PRECISION_BF16, else float16) as
// a float.
template <int PREC>
__device__ __forceinline__ float wide_from16(unsigned short h)
{
    if constexpr (PREC == CNN_PRECISION_BF16) {
        const unsigned u = (unsigned)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    } else {
        __half v;
        memcpy(&v, &h, sizeof v);
        return __half2float(v);
    }
}

// lo and hi rounded to the 16-bit precision and packed as the mma takes
// them (cnn_pack16, cuda_common.cuh)
template <int PREC>
__device__ __forceinline__ unsigned wide_pack16(float lo, float hi)
{
    return cnn_pack16<PREC>(lo, hi);
}

// PREC = CNN_PRECISION_TF32 (true): the same tiles, copies and epilogue, the multiply on tensor
// cores (precision "tf32", sm_80 and later; gemm.cu launches it only
// there), with twice the threads: the BM / 32 x 4 warps each take a 32 x 32
// piece of the tile, two rows of 16 by four columns of 8 mma tiles, 32 sums
// a thread (more warps to hide the copies' latency than the fp32 kernel's 64
// sums a thread leave room for). The shared rows are padded by 8 instead of 4, so that a
// warp's fragment loads (rows t and t + 4, 8 consecutive floats each) hit
// 32 different banks. The sums are the tensor cores' (their order within a
// k step of 8 is the hardware's): deterministic, not the fp32 kernel's bits.
// PREC = CNN_PRECISION_BF16 or _FP16: the same warps and outputs, one
// m16n8k16 mma per tile of k (16) with the operands rounded to bfloat16 or
// float16 as they are read from the fp32 shared tiles (wide_pack16): the
// products' inputs in 16 bits, the sums in fp32 (precisions "bf16", "fp16";
// the activations and weights stay fp32 in memory).
// B16 (16-bit precisions, A not transposed): B is stored in 16 bits, the
// precision's own (a convolution's column matrix that im2col wrote rounded),
// plain or transposed, never batched, with its rows 16-byte aligned (ldb a
// multiple of 8, b aligned): its tiles come in 16 bytes (8 values) a copy and
// stay 16-bit in shared memory, with n along their rows (plain) or k
// (transposed), and reach the mma through ldmatrix (.trans where plain),
// four registers a load, without a conversion; the products' inputs are
// the same values as with B in float32 rounded here, so the same sums.
template <bool B16> struct wide_b { typedef float type; };
template <> struct wide_b<true> { typedef unsigned short type; };

template <int BM, bool TRANS_A, bool TRANS_B, int PREC = CNN_PRECISION_FLOAT32, bool B16 = false>
__global__ void __launch_bounds__(wide_threads(BM, PREC), wide_min_blocks(BM, PREC))
sgemm_wide(int m, int n, int k, int k_slice, float alpha, const float *__restrict__ a, int lda,
           const typename wide_b<B16>::type *__restrict__ b, int ldb, float beta,
           float *__restrict__ c, int ldc, float *__restrict__ partial, WideExtra x)
{
    cnn_kernel_begin();
    constexpr bool TF32 = PREC == CNN_PRECISION_TF32;
    constexpr bool MMA = PREC != CNN_PRECISION_FLOAT32;   // on tensor cores
    static_assert(!B16 || (MMA && !TF32 && !TRANS_A), "B in 16 bits: 16-bit precisions, A plain");
    constexpr int T = wide_threads(BM, PREC), S = wide_stages(BM);
    // the tile of C stored through shared memory (the epilogue says why not
    // in the forward)
    constexpr bool STAGE_C = TRANS_A || TRANS_B;
    constexpr int EA = BM * WBK / T;      // 8 (TF32: 4)
    constexpr int EB = WBN * WBK / T;     // 32, 16 or 8 (TF32: 16, 8 or 4)
    constexpr int NJ = T >= WBN ? 1 : WBN / T; // distinct columns of B (not transposed) per thread
    // rows padded so that a warp's fragment loads hit 32 banks: TF32's
    // (rows t, 8 floats each) with 8; the 16-bit ones' (rows 2t or 2t + 1,
    // a stride of two rows) with 4, as the float32 kernel's float4 reads
    constexpr int PAD = TF32 ? 8 : 4;
    // as[kk][i] = op(A)(row0 + i, k0 + kk), bs[kk][j] = op(B)(k0 + kk, col0 + j);
    // after the last step the same memory holds the tile of C on its way out
    // (cs: CR rows at a time)
    constexpr int CR = BM < WIDE_CROWS ? BM : WIDE_CROWS;
    typedef float ATiles[S][WBK][BM + PAD];
    // B16: 16-bit rows padded by 8 values (16 bytes), so that the 8 rows an
    // ldmatrix reads (272 or 48 bytes apart) fall in 8 different 16-byte
    // columns of the banks
    typedef float BTiles32[S][WBK][WBN + PAD];
    typedef unsigned short BTiles16[S][TRANS_B ? WBN : WBK][(TRANS_B ? WBK : WBN) + 8];
    typedef std::conditional_t<B16, BTiles16, BTiles32> BTiles;
    typedef float CRows[CR][WBN + WIDE_CPAD];
    constexpr size_t AB_FLOATS = sizeof(ATiles) / 4 + sizeof(BTiles) / 4;
    constexpr size_t SMEM_FLOATS = AB_FLOATS > sizeof(CRows) / 4 ? AB_FLOATS : sizeof(CRows) / 4;
    __shared__ __align__(16) float smem[SMEM_FLOATS];
    ATiles &as = *reinterpret_cast<ATiles *>(smem);
    BTiles &bs = *reinterpret_cast<BTiles *>(smem + sizeof(ATiles) / 4);
    CRows &cs = *reinterpret_cast<CRows *>(smem);
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * WBN;
    const int k_begin = blockIdx.z * k_slice;
    const int k_end = min(k, k_begin + k_slice);
    const int steps = k_begin < k_end ? (k_end - k_begin + WBK - 1) / WBK : 0;

    // Each thread copies EA elements of A's tile and EB of B's per step, in
    // the stored layout's order (a warp reads consecutive addresses).
    // A (m, k): column kk = tid % 16, rows tid / 16 + q * T / 16; A (k, m):
    // row i = tid % BM, columns tid / BM + q * T / BM (2q; TF32: 4q). B (k, n): columns
    // (tid + q * T) % 128, rows (tid + q * T) / 128; B (n, k): column
    // kk = tid % 16, rows tid / 16 + q * T / 16.
    // The copies' addresses: for each operand a pointer to the thread's
    // first element of the step's tile, moved on at each step, plus a fixed
    // offset per copy; whether a copy is inside the matrix: its row (or
    // column) once, its k per step. (Worked out per copy, with A's layout
    // tested at each, they cost conv2's forward at batch 512 3% more
    // instructions, and its filter gradient 40 more registers: ncu, H100,
    // 2026-11-28. 39% of the kernel's instructions are still not its
    // multiply-adds: BENCHMARKS.md.)
    // A batched (ap = P): column gk of op(A) is image gk / P, pixel gk % P,
    // followed step by step without a division.
    constexpr int A_Q = TRANS_A ? T / BM : T / WBK;   // rows (A) or k (A^T) between copies
    const int a_i = TRANS_A ? tid % BM : tid / WBK;   // the first copy's row of op(A) in the tile
    const int a_kk = TRANS_A ? tid / BM : tid % WBK;  // and its k in the step
    const bool a_batched = !TRANS_A && x.ap > 0;
    int a_img = 0, a_pix = 0;
    if (a_batched) {
        const int gk = k_begin + a_kk;
        a_img = gk / x.ap;
        a_pix = gk - a_img * x.ap;
    }
    // A^T: the rows of op(A) (columns of the stored A) are fixed; A: the
    // rows of each copy, a bit each
    unsigned a_rows_in = 0;
#pragma unroll
    for (int q = 0; q < EA; ++q)
        if (row0 + a_i + (TRANS_A ? 0 : q * A_Q) < m) a_rows_in |= 1u << q;
    const size_t a_q = TRANS_A ? (size_t)A_Q * lda : (size_t)A_Q * (a_batched ? x.ap : lda);
    // the thread's first element of the step's tile of A
    auto a_first = [&](int k0) -> const float * {
        if (TRANS_A) return a + (size_t)(k0 + a_kk) * lda + (row0 + a_i);
        if (a_batched) return a + ((size_t)a_img * m + row0 + a_i) * x.ap + a_pix;
        return a + (size_t)(row0 + a_i) * lda + (k0 + a_kk);
    };
    // B not transposed: the offsets of this thread's columns (rows added per
    // step); B transposed: its column kk = tid % 16, rows tid / 16 + q T / 16
    size_t b_col[NJ];
    bool b_in[NJ];
#pragma unroll
    for (int u = 0; u < NJ; ++u) {
        const int gj = col0 + (tid + u * T) % WBN;
        b_in[u] = gj < n;
        b_col[u] = 0;
        if (!TRANS_B && b_in[u]) b_col[u] = x.bp > 0 ? wide_offset(0, gj, k, 0, x.bp) : (size_t)gj;
    }
    const size_t b_row_step = x.bp > 0 ? (size_t)x.bp : (size_t)ldb;
    constexpr int B_Q = T / WBK; // B transposed: rows between copies
    // With x.row_sums (B transposed; float32, bf16 or fp16: gemm.cu's
    // wide_row_sums_fit), B's row n holds ones (the caller's:
    // CNN_ROW_SUMS_READ_B), copied as the others: the product's
    // column n is op(A)'s row sums (a convolution's bias gradient), stored
    // apart from C. (Ones set in shared memory instead cost conv2's filter
    // gradient at batch 512 20%: 129.1 -> 155.1 us, H100, ncu; the stores
    // made the compiler load the fragments again.)
    const bool sums = TRANS_B && x.row_sums;
    const int nc = sums ? n + 1 : n; // the product's columns, the ones' included
    unsigned b_rows_in = 0;
    if (TRANS_B) {
#pragma unroll
        for (int q = 0; q < EB; ++q)
            if (col0 + tid / WBK + q * B_Q < nc) b_rows_in |= 1u << q;
    }
    const size_t b_q = (size_t)B_Q * ldb;
    // B (k, n) plain with its rows 16-byte aligned (a convolution's column
    // matrix in the forward): four columns a copy. Only in the 64-row
    // instances with A not transposed (a forward's): H100, batch 512, conv2's
    // forward 129.9 -> 121.2 us; in the instances with A transposed (the
    // data gradient, whose B is never plain) its registers alone made
    // conv2's data gradient spill and 177.8 -> 211.0 us.
    constexpr bool B_VEC = !TRANS_A && !TRANS_B && BM == 64;
    const bool b_vec = B_VEC && x.bp == 0 && ldb % 4 == 0 && ((uintptr_t)b & 15) == 0;

    int k_next = k_begin; // the k of the next tile to copy
    auto issue = [&](int stage) {
        const int k0 = k_next;
        const float *a_at = a_first(k0);
        const bool a_k_in = TRANS_A || k0 + a_kk < k_end;
#pragma unroll
        for (int q = 0; q < EA; ++q) {
            const bool ok = TRANS_A ? (a_rows_in & 1u) && k0 + a_kk + q * A_Q < k_end
                                    : (a_rows_in >> q & 1u) && a_k_in;
            float *dst = TRANS_A ? &as[stage][a_kk + q * A_Q][a_i] : &as[stage][a_kk][a_i + q * A_Q];
            async_copy(dst, ok ? a_at + q * a_q : a, ok);
        }
        if constexpr (B16) {
            // 16-byte pieces of the tile, 8 values each: a plain tile's rows
            // of 128 n in 16 pieces, a transposed one's rows of 16 k in 2
            // (the transposed rows to nc: B's row n of ones with x.row_sums)
            constexpr int PIECES = WBN * WBK / 8, PER_ROW = TRANS_B ? WBK / 8 : WBN / 8;
#pragma unroll
            for (int q = 0; q < (PIECES + T - 1) / T; ++q) {
                const int l = tid + q * T;
                if (PIECES % T != 0 && l >= PIECES) break;
                const int row = l / PER_ROW, at = 8 * (l % PER_ROW);
                if (TRANS_B) { // row: column col0 + row of op(B); at: its k in the step
                    const int count =
                        col0 + row < nc ? max(0, min(8, k_end - (k0 + at))) : 0;
                    async_copy16(&bs[stage][row][at],
                                 count > 0 ? b + (size_t)(col0 + row) * ldb + k0 + at : b, count);
                } else {       // row: k0 + row; at: the column in the tile
                    const int count = k0 + row < k_end ? max(0, min(8, n - col0 - at)) : 0;
                    async_copy16(&bs[stage][row][at],
                                 count > 0 ? b + (size_t)(k0 + row) * ldb + col0 + at : b, count);
                }
            }
        } else if (TRANS_B) {
            const float *b_at = b + (size_t)(col0 + tid / WBK) * ldb + (k0 + tid % WBK);
            const bool b_k_in = k0 + tid % WBK < k_end;
#pragma unroll
            for (int q = 0; q < EB; ++q) {
                const bool ok = (b_rows_in >> q & 1u) && b_k_in;
                async_copy(&bs[stage][tid % WBK][tid / WBK + q * B_Q], ok ? b_at + q * b_q : b,
                           ok);
            }
        } else if (B_VEC && b_vec) {
            // four columns a copy: rows (tid + q T) / 32, columns 4 ((tid + q T) % 32)
            const float *b_row = b + (size_t)k0 * ldb + col0;
#pragma unroll
            for (int q = 0; q < EB / 4; ++q) {
                const int l = tid + q * T, j = 4 * (l % (WBN / 4)), kk = l / (WBN / 4);
                const int count = k0 + kk < k_end ? max(0, min(4, n - col0 - j)) : 0;
                async_copy16(&bs[stage][kk][j], count > 0 ? b_row + (size_t)kk * ldb + j : b,
                             count);
            }
        } else {
            const float *b_at[NJ];
#pragma unroll
            for (int u = 0; u < NJ; ++u) b_at[u] = b + b_col[u] + (size_t)k0 * b_row_step;
#pragma unroll
            for (int q = 0; q < EB; ++q) {
                const int l = tid + q * T, j = l % WBN, kk = l / WBN, u = q % NJ;
                const bool ok = b_in[u] && k0 + kk < k_end;
                async_copy(&bs[stage][kk][j], ok ? b_at[u] + (size_t)kk * b_row_step : b, ok);
            }
        }
        k_next += WBK;
        if (a_batched) {
            a_pix += WBK;
            while (a_pix >= x.ap) {
                a_pix -= x.ap;
                ++a_img;
            }
        }
    };

    // acc[r][s]: the output (row_of(r), col_of(s)) of the tile; 8 x 8, or
    // with TF32 4 x 8: r = 2 mi + h (row wm 32 + 16 mi + g + 8 h), s = 2 ni
    // + e (column wn 32 + 8 ni + 2 t + e) of the warp's mma tiles
    constexpr int RR = MMA ? 4 : 8, CC = 8;
    const int lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int wm = (tid >> 5) % (BM / 32), wn = (tid >> 5) / (BM / 32);
    auto row_of = [&](int r) {
        if (MMA) return wm * 32 + (r >> 1) * 16 + g + (r & 1) * 8;
        return r < 4 ? ty * 4 + r : BM / 2 + ty * 4 + r - 4;
    };
    auto col_of = [&](int s) {
        if (MMA) return wn * 32 + (s >> 1) * 8 + 2 * t4 + (s & 1);
        return s < 4 ? tx * 4 + s : WBN / 2 + tx * 4 + s - 4;
    };
    float acc[RR][CC];
#pragma unroll
    for (int r = 0; r < RR; ++r)
#pragma unroll
        for (int s = 0; s < CC; ++s) acc[r][s] = 0.0f;

    // S - 1 tiles in flight before the first multiply; then, at each step,
    // wait for this step's tile, let every thread see it (the barrier also
    // says that the stage read at the previous step is free), start the
    // copy of the tile S - 1 steps ahead into that stage, and multiply.
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < steps) issue(s);
        async_commit();
    }
    for (int st = 0; st < steps; ++st) {
        async_wait<S - 2>();
        __syncthreads();
        if (st + S - 1 < steps) issue((st + S - 1) % S);
        async_commit();
        const int cur = st % S;
        if constexpr (MMA) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
            // no tensor cores (gemm.cu does not launch it there; here for a
            // build whose PTX is compiled for a later GPU): fp32 sums
            auto b_val = [&](int kk, int j) -> float {
                if constexpr (B16)
                    return wide_from16<PREC>(TRANS_B ? bs[cur][j][kk] : bs[cur][kk][j]);
                else
                    return bs[cur][kk][j];
            };
#pragma unroll
            for (int kk = 0; kk < WBK; ++kk)
#pragma unroll
                for (int r = 0; r < RR; ++r)
#pragma unroll
                    for (int s = 0; s < CC; ++s)
                        acc[r][s] = fmaf(as[cur][kk][row_of(r)], b_val(kk, col_of(s)), acc[r][s]);
#else
            if constexpr (!TF32) {
                // 16-bit operands: one k16 mma per tile
                unsigned af[2][4], bf[4][2];
                const int k0 = 2 * t4;
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
                    const int i = wm * 32 + mi * 16 + g;
                    af[mi][0] = wide_pack16<PREC>(as[cur][k0][i], as[cur][k0 + 1][i]);
                    af[mi][1] = wide_pack16<PREC>(as[cur][k0][i + 8], as[cur][k0 + 1][i + 8]);
                    af[mi][2] = wide_pack16<PREC>(as[cur][k0 + 8][i], as[cur][k0 + 9][i]);
                    af[mi][3] = wide_pack16<PREC>(as[cur][k0 + 8][i + 8], as[cur][k0 + 9][i + 8]);
                }
                if constexpr (B16) {
                    // two ldmatrix: lane L the row L % 8 of matrix L / 8,
                    // which is (ni 2 h + L / 16, k 8 ((L / 8) % 2)): each
                    // gives two ni's b0 and b1
                    const int mat = lane >> 3, r8 = lane & 7;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int j0 = wn * 32 + (2 * h + (mat >> 1)) * 8, kk0 = 8 * (mat & 1);
                        unsigned r[4];
                        wide_ldmatrix4<!TRANS_B>(r, TRANS_B ? &bs[cur][j0 + r8][kk0]
                                                            : &bs[cur][kk0 + r8][j0]);
                        bf[2 * h][0] = r[0];
                        bf[2 * h][1] = r[1];
                        bf[2 * h + 1][0] = r[2];
                        bf[2 * h + 1][1] = r[3];
                    }
                } else {
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni) {
                        const int j = wn * 32 + ni * 8 + g;
                        bf[ni][0] = wide_pack16<PREC>(bs[cur][k0][j], bs[cur][k0 + 1][j]);
                        bf[ni][1] = wide_pack16<PREC>(bs[cur][k0 + 8][j], bs[cur][k0 + 9][j]);
                    }
                }
#pragma unroll
                for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni) {
                        float d[4] = {acc[2 * mi][2 * ni], acc[2 * mi][2 * ni + 1],
                                      acc[2 * mi + 1][2 * ni], acc[2 * mi + 1][2 * ni + 1]};
                        wide_mma_16<PREC>(d, af[mi], bf[ni]);
                        acc[2 * mi][2 * ni] = d[0];
                        acc[2 * mi][2 * ni + 1] = d[1];
                        acc[2 * mi + 1][2 * ni] = d[2];
                        acc[2 * mi + 1][2 * ni + 1] = d[3];
                    }
            } else {
#pragma unroll
            for (int k8 = 0; k8 < WBK; k8 += 8) {
                unsigned af[2][4], bf[4][2];
#pragma unroll
                for (int mi = 0; mi < 2; ++mi) {
                    const int i = wm * 32 + mi * 16 + g;
                    af[mi][0] = wide_tf32(as[cur][k8 + t4][i]);
                    af[mi][1] = wide_tf32(as[cur][k8 + t4][i + 8]);
                    af[mi][2] = wide_tf32(as[cur][k8 + t4 + 4][i]);
                    af[mi][3] = wide_tf32(as[cur][k8 + t4 + 4][i + 8]);
                }
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) {
                    const int j = wn * 32 + ni * 8 + g;
                    bf[ni][0] = wide_tf32(bs[cur][k8 + t4][j]);
                    bf[ni][1] = wide_tf32(bs[cur][k8 + t4 + 4][j]);
                }
#pragma unroll
                for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                    for (int ni = 0; ni < 4; ++ni) {
                        float d[4] = {acc[2 * mi][2 * ni], acc[2 * mi][2 * ni + 1],
                                      acc[2 * mi + 1][2 * ni], acc[2 * mi + 1][2 * ni + 1]};
                        wide_mma_tf32(d, af[mi], bf[ni]);
                        acc[2 * mi][2 * ni] = d[0];
                        acc[2 * mi][2 * ni + 1] = d[1];
                        acc[2 * mi + 1][2 * ni] = d[2];
                        acc[2 * mi + 1][2 * ni + 1] = d[3];
                    }
            }
            }
#endif
        } else {
#pragma unroll
            for (int kk = 0; kk < WBK; ++kk) {
                const float4 a0 = *reinterpret_cast<const float4 *>(&as[cur][kk][ty * 4]);
                const float4 a1 = *reinterpret_cast<const float4 *>(&as[cur][kk][BM / 2 + ty * 4]);
                const float4 b0 = *reinterpret_cast<const float4 *>(&bs[cur][kk][tx * 4]);
                const float4 b1 = *reinterpret_cast<const float4 *>(&bs[cur][kk][WBN / 2 + tx * 4]);
                const float ar[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float br[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                for (int r = 0; r < 8; ++r)
#pragma unroll
                    for (int s = 0; s < 8; ++s) acc[r][s] = fmaf(ar[r], br[s], acc[r][s]);
            }
        }
    }

    // The epilogue. Each output: alpha * its sum into partial (split-K: nc
    // columns a row, the column of ones' included), or into C with the bias
    // (bv: the row's; by column read here), the ReLU and beta C; the column
    // of ones' into x.row_sums.
    float *out0 = partial ? partial + (size_t)blockIdx.z * m * nc : c;
    const size_t c_row_step = partial ? (size_t)nc : x.cp > 0 ? (size_t)x.cp : (size_t)ldc;
    const int n_out = partial ? nc : n; // the columns stored through out0
    auto put = [&](float *out, float sum, int gj, float bv) {
        float v = alpha * sum;
        if (partial) {
            *out = v;
            return;
        }
        if (x.bias) v += x.bias_columns ? x.bias[gj] : bv;
        if (x.relu) v = v < 0.0f ? 0.0f : v;
        *out = beta == 0.0f ? v : v + beta * *out;
    };
    auto row_bias = [&](int gi) {
        return x.bias && !partial && !x.bias_columns ? x.bias[gi] : 0.0f;
    };
    // four consecutive outputs of a row, as put() forms each, in one store
    // (put()'s own arithmetic repeated: one helper for both changed where the
    // compiler fuses alpha * sum + bias into an fma, in every epilogue)
    auto put4 = [&](float *out, float4 sum, int gj, float bv) {
        float v[4] = {alpha * sum.x, alpha * sum.y, alpha * sum.z, alpha * sum.w};
        if (!partial) {
            float4 old = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (beta != 0.0f) old = *reinterpret_cast<const float4 *>(out);
            const float o[4] = {old.x, old.y, old.z, old.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (x.bias) v[e] += x.bias_columns ? x.bias[gj + e] : bv;
                if (x.relu) v[e] = v[e] < 0.0f ? 0.0f : v[e];
                v[e] = beta == 0.0f ? v[e] : v[e] + beta * o[e];
            }
        }
        *reinterpret_cast<float4 *>(out) = make_float4(v[0], v[1], v[2], v[3]);
    };
    // where column gj of C starts (a division where C is batched); 0 past n_out
    auto column_at = [&](int gj) {
        return gj >= n_out ? 0 : partial ? (size_t)gj : wide_offset(0, gj, m, ldc, x.cp);
    };
    if constexpr (!STAGE_C) {
        // the forward's (A and B not transposed: a convolution's, whose C is
        // y in NCHW), from the registers: through shared memory (below) it
        // was no faster (H200, batch 512: conv2's 117.8 -> 118.3 us, conv3's
        // 23.6 -> 26.4; its rows of 32 columns span images)
        size_t c_col[CC];
#pragma unroll
        for (int s = 0; s < CC; ++s) c_col[s] = column_at(col0 + col_of(s));
#pragma unroll
        for (int r = 0; r < RR; ++r) {
            const int gi = row0 + row_of(r);
            if (gi >= m) continue;
            const float bv = row_bias(gi);
#pragma unroll
            for (int s = 0; s < CC; ++s)
                if (col0 + col_of(s) < n)
                    put(out0 + c_col[s] + (size_t)gi * c_row_step, acc[r][s], col0 + col_of(s), bv);
        }
    } else {
        // through shared memory: each thread's outputs (rows of 4
        // consecutive columns, 4 floats apart across a warp: stored from the
        // registers, a store uses a quarter of each 32-byte sector) put in
        // cs, CR rows of the tile at a time, then stored a row at a time,
        // the threads of a warp on 32 consecutive columns (H100, batch 512:
        // conv2's data gradient 179.4 -> 160.5 us, conv3's 47.6 -> 36.3; the
        // filter gradients 132.3 -> 129.2 and 29.6 -> 27.1)
        constexpr int TW = T < WBN ? T : WBN; // threads along a row
        constexpr int SC = WBN / TW;          // columns a thread stores (2 when T = 64)
        constexpr int SR = T / TW;            // rows stored at once
        const int sj = tid % TW, si = tid / TW;
        // C's rows plain (or the partial sums'), 16-byte aligned, and their
        // columns in whole float4s: stored as float4s
        const bool vec = (partial || x.cp == 0) && c_row_step % 4 == 0 && n_out % 4 == 0 &&
                         ((uintptr_t)out0 & 15) == 0;
        async_wait<0>();
        __syncthreads(); // every thread done with the last step's tiles
#pragma unroll
        for (int pass = 0; pass < BM / CR; ++pass) {
            if (pass > 0) __syncthreads(); // the rows before stored
#pragma unroll
            for (int r = 0; r < RR; ++r) {
                const int i = row_of(r) - pass * CR;
                if (i < 0 || i >= CR) continue;
                if constexpr (MMA) { // columns 2 t + e: pairs
#pragma unroll
                    for (int s = 0; s < CC; s += 2)
                        *reinterpret_cast<float2 *>(&cs[i][col_of(s)]) =
                            make_float2(acc[r][s], acc[r][s + 1]);
                } else { // columns tx 4 + [0, 4) and 64 + tx 4 + [0, 4): float4s
#pragma unroll
                    for (int s = 0; s < CC; s += 4)
                        *reinterpret_cast<float4 *>(&cs[i][col_of(s)]) =
                            make_float4(acc[r][s], acc[r][s + 1], acc[r][s + 2], acc[r][s + 3]);
                }
            }
            __syncthreads();
            if (vec) {
                // a warp on a row's 128 columns, T / 32 rows at once (ncu, H200:
                // half of conv2's data gradient's warp samples were below)
                constexpr int VR = T / 32;
                const int vj = 4 * (tid % 32), gj = col0 + vj;
#pragma unroll 4
                for (int i = tid / 32; i < CR; i += VR) {
                    const int gi = row0 + pass * CR + i;
                    if (gi >= m) break;
                    const float bv = row_bias(gi);
                    const float4 v = *reinterpret_cast<const float4 *>(&cs[i][vj]);
                    if (gj < n_out) // then its four columns are
                        put4(out0 + (size_t)gi * c_row_step + gj, v, gj, bv);
                    else if (sums && gj == n) // one slice: the row sums apart from C
                        x.row_sums[gi] = alpha * v.x;
                }
                continue;
            }
            // the thread's columns in C (worked out here, where the sums are
            // no longer held: fewer registers)
            size_t c_col[SC];
#pragma unroll
            for (int u = 0; u < SC; ++u) c_col[u] = column_at(col0 + sj + u * TW);
            for (int i = si; i < CR; i += SR) {
                const int gi = row0 + pass * CR + i;
                if (gi >= m) break;
                const float bv = row_bias(gi);
#pragma unroll
                for (int u = 0; u < SC; ++u) {
                    const int gj = col0 + sj + u * TW;
                    if (gj < n_out)
                        put(out0 + c_col[u] + (size_t)gi * c_row_step, cs[i][sj + u * TW], gj,
                            bv);
                    else if (sums && gj == n) // one slice: the row sums apart from C
                        x.row_sums[gi] = alpha * cs[i][sj + u * TW];
                }
            }
        }
    }
}

// C (m, n) = sum over the slices of partial (slices, m, n) (+ bias[row],
// then the ReLU) + beta C, C plain or batched (x.cp > 0). With x.row_sums,
// the partial tiles' last column n - 1 is the row sums of the tile kernel's
// column of ones, and C has n - 1 columns.
// A block of 256 threads sums 256 / G consecutive outputs: group g
// (threadIdx.y, G groups) adds the slices g, g + G, ... in order, then the
// first group adds the groups' sums in order. A fixed order for a given
// slice count, so deterministic. G is the smallest power of two (at most
// 32) that leaves each thread at most SUM_CHAIN slices: their loads are
// all in flight at once, and a long chain of dependent loads (a 32x28
// filter gradient summed over 258 slices) is taken apart, while a short
// one (4 slices of a convolution's forward) does not leave threads idle.
constexpr int SUM_THREADS = 256, SUM_CHAIN = 8;

template <int G>
__global__ void __launch_bounds__(SUM_THREADS)
sum_slices_wide(int m, int n, int slices, const float *__restrict__ partial, float beta,
                float *__restrict__ c, int ldc, WideExtra x)
{
    cnn_kernel_begin();
    constexpr int COLS = SUM_THREADS / G;
    __shared__ float part[G][COLS];
    const size_t total = (size_t)m * n;
    for (size_t base = (size_t)blockIdx.x * COLS; base < total; base += (size_t)gridDim.x * COLS) {
        const size_t t = base + threadIdx.x;
        float sum = 0.0f;
        if (t < total) {
#pragma unroll SUM_CHAIN // loads ahead of the adds, which stay in order
            for (int z = threadIdx.y; z < slices; z += G) sum += partial[(size_t)z * total + t];
        }
        if (G > 1) {
            part[threadIdx.y][threadIdx.x] = sum;
            __syncthreads();
        }
        if (threadIdx.y == 0 && t < total) {
            if (G > 1) {
                sum = part[0][threadIdx.x];
                for (int g = 1; g < G && g < slices; ++g) sum += part[g][threadIdx.x];
            }
            const int gi = (int)(t / n), gj = (int)(t % n);
            if (x.row_sums && gj == n - 1) { // the column of ones (gemm_kernels.cuh)
                x.row_sums[gi] = sum;
            } else {
                if (x.bias) sum += x.bias[x.bias_columns ? gj : gi];
                if (x.relu) sum = sum < 0.0f ? 0.0f : sum;
                float *out = c + wide_offset(gi, gj, m, ldc, x.cp);
                *out = beta == 0.0f ? sum : sum + beta * *out;
            }
        }
        if (G > 1) __syncthreads(); // part is written again at the next base
    }
}

// Launches sum_slices_wide over the (m, n) outputs.
inline void launch_sum_slices_wide(cudaStream_t st, int m, int n, int slices,
                                   const float *partial, float beta, float *c, int ldc,
                                   WideExtra x)
{
    const size_t total = (size_t)m * n;
#define CNN_SUM_LAUNCH(G)                                                                       \
    sum_slices_wide<G><<<cnn_blocks(total, SUM_THREADS / G), dim3(SUM_THREADS / G, G), 0, st>>>( \
        m, n, slices, partial, beta, c, ldc, x)
    if (slices <= SUM_CHAIN) CNN_SUM_LAUNCH(1);
    else if (slices <= 2 * SUM_CHAIN) CNN_SUM_LAUNCH(2);
    else if (slices <= 4 * SUM_CHAIN) CNN_SUM_LAUNCH(4);
    else if (slices <= 8 * SUM_CHAIN) CNN_SUM_LAUNCH(8);
    else if (slices <= 16 * SUM_CHAIN) CNN_SUM_LAUNCH(16);
    else CNN_SUM_LAUNCH(32);
#undef CNN_SUM_LAUNCH
}

} // namespace
} // namespace cnn_gemm

#endif
