// adamw.cu: one AdamW step for the cuda engine, Keras 3's form (as the cpu
// engine, csrc/cpu/adamw.c): the base optimizer's weight decay
// (keras/src/optimizers/base_optimizer.py, _apply_weight_decay:
// p = p - p wd lr, before the update), then Adam's update (adam.py, adam.cu):
//   p -= p (lr wd);
//   lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)   (cnn_adam_lr_t, cnn.h)
//   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
//   p -= lr_t m / (sqrt(v) + epsilon).
// t = *step and the hyperparameters are read on the device so that a
// recorded step replays with the values of its time. One thread per
// parameter (grid-stride); the cpu engine's float math (__f*_rn: no FMA
// contraction, bit-identical steps).
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void adamw_kernel(size_t count, const float *__restrict__ hyper,
                             const int64_t *__restrict__ step, float *__restrict__ p,
                             const float *__restrict__ g, float *__restrict__ m,
                             float *__restrict__ v)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    __shared__ float shared[5];
    if (threadIdx.x == 0) {
        const float lr = hyper[CNN_HYPER_LR];
        const float beta_1 = hyper[CNN_HYPER_BETA_1], beta_2 = hyper[CNN_HYPER_BETA_2];
        shared[0] = __fmul_rn(lr, hyper[CNN_HYPER_WEIGHT_DECAY]);
        shared[1] = cnn_adam_lr_t(lr, beta_1, beta_2, *step);
        shared[2] = __fsub_rn(1.0f, beta_1);
        shared[3] = __fsub_rn(1.0f, beta_2);
        shared[4] = hyper[CNN_HYPER_EPSILON];
    }
    __syncthreads();
    const float decay = shared[0], lr_t = shared[1], one_b1 = shared[2], one_b2 = shared[3];
    const float eps = shared[4];
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i], m0 = m[i], v0 = v[i], p0 = p[i];
        const float pi = __fsub_rn(p0, __fmul_rn(p0, decay));
        const float mi = __fadd_rn(m0, __fmul_rn(__fsub_rn(gi, m0), one_b1));
        const float vi = __fadd_rn(v0, __fmul_rn(__fsub_rn(__fmul_rn(gi, gi), v0), one_b2));
        m[i] = mi;
        v[i] = vi;
        p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(mi, lr_t), __fadd_rn(__fsqrt_rn(vi), eps)));
    }
}

// p, g, m, v: (count); step: device memory, >= 1 (the Net checks its own
// count); hyper: device memory, (CNN_HYPERS)
cnn_status cuda_adamw_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                           size_t count, float *p, const float *g, float *m, float *v)
{
    if (count == 0) return CNN_OK;
    adamw_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, step, p, g, m, v);
    CNN_CUDA_LAUNCHED("adamw_step");
    return CNN_OK;
}
