// sgd.cu: one SGD step for the cuda engine, in Keras's form:
//   momentum 0 (or no velocity buffer): p -= lr g;
//   else v = momentum v - lr g, then p += v, or with nesterov
//   p += momentum v - lr g.
// One thread per parameter (grid-stride) over the flat block, with the cpu
// engine's float math (no FMA contraction: bit-identical steps). lr,
// momentum and nesterov are read on the device (hyper[CNN_HYPER_*]), so that
// a recorded step replays with the values of its time.
#include "cuda_common.cuh"
#include "cuda_ops.h"

// p, g, velocity: (count); VELOCITY 0: none (plain SGD); else momentum 0 is
// plain SGD too (the velocity left as it is), as the cpu engine
template <int VELOCITY>
__global__ void sgd_kernel(size_t count, const float *__restrict__ hyper,
                           float *__restrict__ p, const float *__restrict__ g,
                           float *__restrict__ velocity)
{
    cnn_kernel_begin();
    if (hyper[CNN_HYPER_SKIP] != 0.0f) return; // loss scaling skips this step (every thread alike)
    const float lr = hyper[CNN_HYPER_LR];
    const float mom = VELOCITY ? hyper[CNN_HYPER_MOMENTUM] : 0.0f;
    const bool nesterov = VELOCITY && hyper[CNN_HYPER_NESTEROV] != 0.0f;
    CNN_GRID_LOOP(i, count) {
        const float lg = __fmul_rn(lr, g[i]);
        if (mom == 0.0f) {
            p[i] = __fsub_rn(p[i], lg);
        } else {
            const float vi = __fsub_rn(__fmul_rn(mom, velocity[i]), lg);
            velocity[i] = vi;
            if (nesterov)
                p[i] = __fadd_rn(p[i], __fsub_rn(__fmul_rn(mom, vi), lg));
            else
                p[i] = __fadd_rn(p[i], vi);
        }
    }
}

// p, g, velocity: (count); velocity is unused (may be NULL) without
// momentum (the Net refuses momentum for a net built without a velocity);
// hyper: device memory, (CNN_HYPERS)
cnn_status cuda_sgd_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                         const float *g, float *velocity)
{
    if (count == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    cudaStream_t st = cnn_stream(ctx);
    if (velocity)
        sgd_kernel<1><<<blocks, CNN_THREADS, 0, st>>>(count, hyper, p, g, velocity);
    else
        sgd_kernel<0><<<blocks, CNN_THREADS, 0, st>>>(count, hyper, p, g, velocity);
    CNN_CUDA_LAUNCHED("sgd_step");
    return CNN_OK;
}
