// Host emulation (cuda_runtime.h): the bfloat16 names gemm_wide_kernels.cuh
// uses, declared only: the emulated checks run its float32 instances, which
// call none of them.
#pragma once
struct __nv_bfloat162 { unsigned short x, y; };
__nv_bfloat162 __floats2bfloat162_rn(float lo, float hi);
