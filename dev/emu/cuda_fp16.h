// Host emulation (cuda_runtime.h): the float16 names gemm_wide_kernels.cuh
// uses, declared only: the emulated checks run its float32 instances, which
// call none of them.
#pragma once
struct __half2 { unsigned short x, y; };
__half2 __floats2half2_rn(float lo, float hi);
