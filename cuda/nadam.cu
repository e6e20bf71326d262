// nadam.cu: one Nadam step for the cuda engine, Keras 3's form
// (keras/src/optimizers/nadam.py, update_step; as the cpu engine,
// csrc/cpu/nadam.c), with the step's coefficients c from
// cnn_nadam_coefficients (cnn.h; t = *step and the hyperparameters read on
// the device so that a recorded step replays with the values of its time):
//   m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
//   m_hat = c[0] m + c[1] g; v_hat = v / c[2];
//   p -= lr m_hat / (sqrt(v_hat) + epsilon).
// One thread per parameter (grid-stride); the cpu engine's float math
// (__f*_rn: no FMA contraction, bit-identical steps).
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void nadam_kernel(size_t count, const float *__restrict__ hyper,
                             const int64_t *__restrict__ step, float *__restrict__ p,
                             const float *__restrict__ g, float *__restrict__ m,
                             float *__restrict__ v)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    __shared__ float shared[7];
    if (threadIdx.x == 0) {
        const float beta_1 = hyper[CNN_HYPER_BETA_1], beta_2 = hyper[CNN_HYPER_BETA_2];
        float c[3];
        cnn_nadam_coefficients(beta_1, beta_2, *step, c);
        shared[0] = hyper[CNN_HYPER_LR];
        shared[1] = __fsub_rn(1.0f, beta_1);
        shared[2] = __fsub_rn(1.0f, beta_2);
        shared[3] = hyper[CNN_HYPER_EPSILON];
        shared[4] = c[0];
        shared[5] = c[1];
        shared[6] = c[2];
    }
    __syncthreads();
    const float lr = shared[0], one_b1 = shared[1], one_b2 = shared[2], eps = shared[3];
    const float cm = shared[4], cg = shared[5], bc2 = shared[6];
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i], m0 = m[i], v0 = v[i];
        const float mi = __fadd_rn(m0, __fmul_rn(__fsub_rn(gi, m0), one_b1));
        const float vi = __fadd_rn(v0, __fmul_rn(__fsub_rn(__fmul_rn(gi, gi), v0), one_b2));
        m[i] = mi;
        v[i] = vi;
        const float m_hat = __fadd_rn(__fmul_rn(cm, mi), __fmul_rn(cg, gi));
        const float v_hat = __fdiv_rn(vi, bc2);
        p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(m_hat, lr), __fadd_rn(__fsqrt_rn(v_hat), eps)));
    }
}

// p, g, m (momentum), v (velocity): (count); step: device memory, >= 1 (the
// Net checks its own count); hyper: device memory, (CNN_HYPERS)
cnn_status cuda_nadam_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                           size_t count, float *p, const float *g, float *m, float *v)
{
    if (count == 0) return CNN_OK;
    nadam_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, step, p, g, m, v);
    CNN_CUDA_LAUNCHED("nadam_step");
    return CNN_OK;
}
