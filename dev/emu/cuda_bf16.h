// Host emulation (cuda_runtime.h): the bfloat16 names gemm_wide_kernels.cuh
// uses. The conversion rounds as the GPU's does: to nearest, ties to even,
// past bfloat16's largest finite value to inf, a NaN kept a (quiet) NaN.
#pragma once
#include <cstring>

struct __nv_bfloat162 { unsigned short x, y; }; // x: the low half

// float32 -> bfloat16 bits: the top 16 bits, rounded on the 16 dropped
static inline unsigned short emu_bfloat16_rn(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); // half the dropped range, less one where the kept bits are even
    return (unsigned short)(u >> 16);
}

static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi)
{
    return {emu_bfloat16_rn(lo), emu_bfloat16_rn(hi)};
}
