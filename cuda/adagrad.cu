// adagrad.cu: one Adagrad step for the cuda engine, Keras 3's form
// (keras/src/optimizers/adagrad.py, update_step; as the cpu engine,
// csrc/cpu/adagrad.c):
//   accumulator += g^2;
//   p -= lr g / sqrt(accumulator + epsilon).
// One thread per parameter (grid-stride) over the flat block; lr and
// epsilon are read on the device (hyper[CNN_HYPER_*]) so that a recorded
// step replays with the values of its time. The cpu engine's float math
// (__f*_rn: no FMA contraction, bit-identical steps).
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void adagrad_kernel(size_t count, const float *__restrict__ hyper,
                               float *__restrict__ p, const float *__restrict__ g,
                               float *__restrict__ acc)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    const float lr = hyper[CNN_HYPER_LR], eps = hyper[CNN_HYPER_EPSILON];
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i];
        const float ai = __fadd_rn(acc[i], __fmul_rn(gi, gi));
        acc[i] = ai;
        p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(lr, gi), __fsqrt_rn(__fadd_rn(ai, eps))));
    }
}

// p, g, accumulator: (count); hyper: device memory, (CNN_HYPERS)
cnn_status cuda_adagrad_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                             const float *g, float *accumulator)
{
    if (count == 0) return CNN_OK;
    if (!accumulator)
        return cnn_set_error(CNN_ERR_VALUE, "adagrad: no accumulator buffer");
    adagrad_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, p, g, accumulator);
    CNN_CUDA_LAUNCHED("adagrad_step");
    return CNN_OK;
}
