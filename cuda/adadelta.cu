// adadelta.cu: one Adadelta step for the cuda engine, Keras 3's form
// (keras/src/optimizers/adadelta.py, update_step; as the cpu engine,
// csrc/cpu/adadelta.c):
//   accumulated_grad = rho accumulated_grad + (1 - rho) g^2;
//   delta = -sqrt(accumulated_delta_var + epsilon) g / sqrt(accumulated_grad + epsilon);
//   accumulated_delta_var = rho accumulated_delta_var + (1 - rho) delta^2;
//   p += lr delta.
// Adam's signature; the step is not read. One thread per parameter
// (grid-stride); lr, rho and epsilon read on the device (hyper[CNN_HYPER_*])
// so that a recorded step replays with the values of its time. The cpu
// engine's float math (__f*_rn: no FMA contraction, bit-identical steps).
#include <math.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

__global__ void adadelta_kernel(size_t count, const float *__restrict__ hyper,
                                float *__restrict__ p, const float *__restrict__ g,
                                float *__restrict__ acc_g, float *__restrict__ acc_d)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    const float lr = hyper[CNN_HYPER_LR], rho = hyper[CNN_HYPER_RHO];
    const float one_rho = __fsub_rn(1.0f, rho), eps = hyper[CNN_HYPER_EPSILON];
    CNN_GRID_LOOP(i, count) {
        const float gi = g[i], d0 = acc_d[i];
        const float ag = __fadd_rn(__fmul_rn(rho, acc_g[i]), __fmul_rn(one_rho, __fmul_rn(gi, gi)));
        acc_g[i] = ag;
        const float delta = -__fdiv_rn(__fmul_rn(__fsqrt_rn(__fadd_rn(d0, eps)), gi),
                                       __fsqrt_rn(__fadd_rn(ag, eps)));
        acc_d[i] = __fadd_rn(__fmul_rn(rho, d0), __fmul_rn(one_rho, __fmul_rn(delta, delta)));
        p[i] = __fadd_rn(p[i], __fmul_rn(lr, delta));
    }
}

// p, g, accumulated_grad (m), accumulated_delta_var (v): (count);
// hyper: device memory, (CNN_HYPERS); step: unused
cnn_status cuda_adadelta_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                              size_t count, float *p, const float *g, float *m, float *v)
{
    (void)step;
    if (count == 0) return CNN_OK;
    adadelta_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, hyper, p, g, m, v);
    CNN_CUDA_LAUNCHED("adadelta_step");
    return CNN_OK;
}
