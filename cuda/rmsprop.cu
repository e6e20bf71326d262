// rmsprop.cu: one RMSprop step for the cuda engine, Keras 3's form
// (keras/src/optimizers/rmsprop.py, update_step; as the cpu engine,
// csrc/cpu/rmsprop.c):
//   velocity = rho velocity + (1 - rho) g^2;
//   centered: average_gradient = rho average_gradient + (1 - rho) g,
//             denominator = velocity - average_gradient^2 + epsilon;
//   else      denominator = velocity + epsilon;
//   increment = lr g / sqrt(denominator);
//   momentum > 0: momentum_slot = momentum momentum_slot + increment,
//                 p -= momentum_slot;
//   else          p -= increment.
// One thread per parameter (grid-stride) over the flat block; lr, rho,
// momentum and epsilon are read on the device (hyper[CNN_HYPER_*]) so that a
// recorded step replays with the values of its time. The cpu engine's float
// math, written with the __f*_rn intrinsics so that nothing is fused into an
// FMA: the step matches the cpu engine's bit for bit.
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

// MOMENTUM: a momentum slot exists; CENTERED: an average_gradient slot exists
template <int MOMENTUM, int CENTERED>
__global__ void rmsprop_kernel(size_t count, const float *__restrict__ hyper,
                               float *__restrict__ p, const float *__restrict__ g,
                               float *__restrict__ vel, float *__restrict__ mom_s,
                               float *__restrict__ avg)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    const float lr = hyper[CNN_HYPER_LR], rho = hyper[CNN_HYPER_RHO];
    const float one_rho = __fsub_rn(1.0f, rho), eps = hyper[CNN_HYPER_EPSILON];
    const float mom = MOMENTUM ? hyper[CNN_HYPER_MOMENTUM] : 0.0f;
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i];
        const float vi = __fadd_rn(__fmul_rn(rho, vel[i]), __fmul_rn(one_rho, __fmul_rn(gi, gi)));
        vel[i] = vi;
        float denom;
        if (CENTERED) {
            const float ai = __fadd_rn(__fmul_rn(rho, avg[i]), __fmul_rn(one_rho, gi));
            avg[i] = ai;
            denom = __fadd_rn(__fsub_rn(vi, __fmul_rn(ai, ai)), eps);
        } else {
            denom = __fadd_rn(vi, eps);
        }
        const float inc = __fdiv_rn(__fmul_rn(lr, gi), __fsqrt_rn(denom));
        if (MOMENTUM && mom > 0.0f) {
            const float mi = __fadd_rn(__fmul_rn(mom, mom_s[i]), inc);
            mom_s[i] = mi;
            p[i] = __fsub_rn(p[i], mi);
        } else {
            p[i] = __fsub_rn(p[i], inc);
        }
    }
}

// p, g, velocity: (count); momentum, average_gradient: (count) or NULL (the
// Net refuses momentum for a net built without its slot);
// hyper: device memory, (CNN_HYPERS)
cnn_status cuda_rmsprop_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                             const float *g, float *velocity, float *momentum,
                             float *average_gradient)
{
    if (count == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    cudaStream_t st = cnn_stream(ctx);
    if (momentum && average_gradient)
        rmsprop_kernel<1, 1><<<blocks, CNN_THREADS, 0, st>>>(count, hyper, p, g, velocity,
                                                             momentum, average_gradient);
    else if (momentum)
        rmsprop_kernel<1, 0><<<blocks, CNN_THREADS, 0, st>>>(count, hyper, p, g, velocity,
                                                             momentum, average_gradient);
    else if (average_gradient)
        rmsprop_kernel<0, 1><<<blocks, CNN_THREADS, 0, st>>>(count, hyper, p, g, velocity,
                                                             momentum, average_gradient);
    else
        rmsprop_kernel<0, 0><<<blocks, CNN_THREADS, 0, st>>>(count, hyper, p, g, velocity,
                                                             momentum, average_gradient);
    CNN_CUDA_LAUNCHED("rmsprop_step");
    return CNN_OK;
}
