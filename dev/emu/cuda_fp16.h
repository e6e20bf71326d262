// Host emulation (cuda_runtime.h): the float16 names gemm_wide_kernels.cuh
// uses. The conversion to float16 rounds as the GPU's does: to nearest, ties to even,
// subnormals kept, from 65520 (halfway past the largest finite value, 65504)
// to inf, a NaN kept a (quiet) NaN.
#pragma once
#include <cmath>
#include <cstring>

struct __half2 { unsigned short x, y; }; // x: the low half

// float32 -> float16 bits
static inline unsigned short emu_float16_rn(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
    const unsigned mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return sign | 0x7e00u;               // NaN
    if (mag >= 0x477ff000u) return sign | 0x7c00u;              // 65520 and up: inf
    if (mag < 0x38800000u) {                                    // below 2^-14: subnormal
        // in units of float16's smallest subnormal, 2^-24 (exact in double);
        // nearbyint rounds ties to even, and 1024 units is the smallest normal
        const double units = std::nearbyint((double)fabsf(f) * 16777216.0);
        return sign | (unsigned short)units;
    }
    // normal: exponent rebased (127 -> 15), 23 bits of fraction to 10
    unsigned h = ((mag >> 23) - 112u) << 10 | (mag >> 13 & 0x3ffu);
    const unsigned rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; // a carry moves the exponent on
    return sign | (unsigned short)h;
}

struct __half { unsigned short x; };

// float16 bits -> float (exact: subnormals, inf and NaN included)
static inline float __half2float(__half h)
{
    const unsigned e = h.x >> 10 & 31u, f = h.x & 1023u;
    const float sign = h.x & 0x8000u ? -1.0f : 1.0f;
    if (e == 31) return f ? NAN : sign * INFINITY;
    return sign * (e ? ldexpf(1024.0f + f, (int)e - 25) : ldexpf((float)f, -24));
}

static inline __half2 __floats2half2_rn(float lo, float hi)
{
    return {emu_float16_rn(lo), emu_float16_rn(hi)};
}
