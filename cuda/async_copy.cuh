// async_copy.cuh: copies from global to shared memory that do not hold the
// thread (cp.async, sm_80 and later: the copy is issued and the thread goes
// on; async_commit closes a group of them, async_wait waits for groups),
// and the plain copies they fall back to on older GPUs and in the host
// emulation (dev/emu), where they happen at once. Used by the wide and
// narrow SGEMMs' pipelines and the plane kernel of col2im with the pool's
// backward (conv2d_pool_backward_kernels.cuh).
#ifndef CNN_ASYNC_COPY_CUH
#define CNN_ASYNC_COPY_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace { // internal linkage: every .cu that includes this has its own copy

// One float (or int: any 4-byte T) from global to shared memory,
// asynchronously where the GPU can (sm_80 and later: cp.async; zeros when
// !ok, reading nothing), else at once.
template <typename T>
__device__ __forceinline__ void async_copy(T *dst, const T *src, bool ok)
{
    static_assert(sizeof(T) == 4, "async_copy copies 4 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(ok ? 4 : 0)
                 : "memory");
#else
    *dst = ok ? *src : T(0);
#endif
}

// Sixteen bytes from global to shared memory (both 16-byte aligned): four
// floats or eight 16-bit values (T), the first `count` of them read and the
// rest zeros: cp.async.cg of 16 bytes on sm_80 and later, else at once.
template <typename T>
__device__ __forceinline__ void async_copy16(T *dst, const T *src, int count)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 2, "async_copy16 copies floats or halves");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"((int)sizeof(T) * count)
                 : "memory");
#else
#ifndef __CUDA_ARCH__ // the host emulation (dev/emu): the GPU's alignment rule enforced
    if (count > 0 && (((uintptr_t)src | (uintptr_t)dst) & 15)) __builtin_trap();
#endif
    for (int e = 0; e < 16 / (int)sizeof(T); ++e) dst[e] = e < count ? src[e] : T(0);
#endif
}

__device__ __forceinline__ void async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// waits until at most N of the committed groups are still in flight
template <int N>
__device__ __forceinline__ void async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

} // namespace

#endif
