// adamax.cu: one Adamax step for the cuda engine, Keras 3's form
// (keras/src/optimizers/adamax.py, update_step; as the cpu engine,
// csrc/cpu/adamax.c):
//   m += (g - m)(1 - beta_1); u = max(beta_2 u, |g|);
//   p -= lr_t m / (u + epsilon), lr_t = lr / (1 - beta_1^t) (cnn_adamax_lr_t,
//   cnn.h; t = *step and the hyperparameters read on the device so that a
//   recorded step replays with the values of its time).
// One thread per parameter (grid-stride); the cpu engine's float math
// (__f*_rn: no FMA contraction, bit-identical steps).
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void adamax_kernel(size_t count, const float *__restrict__ hyper,
                              const int64_t *__restrict__ step, float *__restrict__ p,
                              const float *__restrict__ g, float *__restrict__ m,
                              float *__restrict__ u)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    __shared__ float shared[4];
    if (threadIdx.x == 0) {
        const float beta_1 = hyper[CNN_HYPER_BETA_1];
        shared[0] = cnn_adamax_lr_t(hyper[CNN_HYPER_LR], beta_1, *step);
        shared[1] = __fsub_rn(1.0f, beta_1);
        shared[2] = hyper[CNN_HYPER_BETA_2];
        shared[3] = hyper[CNN_HYPER_EPSILON];
    }
    __syncthreads();
    const float lr_t = shared[0], one_b1 = shared[1], b2 = shared[2], eps = shared[3];
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i], m0 = m[i];
        const float mi = __fadd_rn(m0, __fmul_rn(__fsub_rn(gi, m0), one_b1));
        const float bu = __fmul_rn(b2, u[i]), ag = fabsf(gi);
        const float ui = bu > ag ? bu : ag;
        m[i] = mi;
        u[i] = ui;
        p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(mi, lr_t), __fadd_rn(ui, eps)));
    }
}

// p, g, m (momentum), v (norm u): (count); step: device memory, >= 1 (the
// Net checks its own count); hyper: device memory, (CNN_HYPERS)
cnn_status cuda_adamax_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                            size_t count, float *p, const float *g, float *m, float *v)
{
    if (count == 0) return CNN_OK;
    adamax_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, step, p, g, m, v);
    CNN_CUDA_LAUNCHED("adamax_step");
    return CNN_OK;
}
