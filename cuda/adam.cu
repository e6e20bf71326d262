// adam.cu: one Adam step for the cuda engine, in Keras's form:
//   lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)   (cnn_adam_lr_t, as the cpu
//   engine; t = *step and the hyperparameters hyper[CNN_HYPER_*], read on
//   the device so that a recorded step replays with the values of its time)
//   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
//   p -= lr_t m / (sqrt(v) + epsilon).
// One thread per parameter (grid-stride) over the flat block. The float
// math is that of the cpu engine, written with the __f*_rn intrinsics so
// that nothing is fused into an FMA: the step matches the cpu engine's bit
// for bit.
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

// p, g, m, v: (count)
// hyper: (CNN_HYPERS), cnn.h
__global__ void adam_kernel(size_t count, const float *__restrict__ hyper,
                            const int64_t *__restrict__ step, float *__restrict__ p,
                            const float *__restrict__ g, float *__restrict__ m,
                            float *__restrict__ v)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    __shared__ float shared[4];
    if (threadIdx.x == 0) {
        const float beta_1 = hyper[CNN_HYPER_BETA_1], beta_2 = hyper[CNN_HYPER_BETA_2];
        shared[0] = cnn_adam_lr_t(hyper[CNN_HYPER_LR], beta_1, beta_2, *step);
        shared[1] = __fsub_rn(1.0f, beta_1);
        shared[2] = __fsub_rn(1.0f, beta_2);
        shared[3] = hyper[CNN_HYPER_EPSILON];
    }
    __syncthreads();
    const float lr_t = shared[0], one_b1 = shared[1], one_b2 = shared[2], eps = shared[3];
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i], m0 = m[i], v0 = v[i];
        const float mi = __fadd_rn(m0, __fmul_rn(__fsub_rn(gi, m0), one_b1));
        const float vi = __fadd_rn(v0, __fmul_rn(__fsub_rn(__fmul_rn(gi, gi), v0), one_b2));
        m[i] = mi;
        v[i] = vi;
        p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(mi, lr_t), __fadd_rn(__fsqrt_rn(vi), eps)));
    }
}

// p, g, m, v: (count)
// step: device memory, >= 1 (the Net checks its own count)
// hyper: device memory, (CNN_HYPERS)
cnn_status cuda_adam_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                          size_t count, float *p, const float *g, float *m, float *v)
{
    if (count == 0) return CNN_OK;
    adam_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, step, p, g, m, v);
    CNN_CUDA_LAUNCHED("adam_step");
    return CNN_OK;
}
