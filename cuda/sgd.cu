// sgd.cu: one SGD step for the cuda engine, in Keras's form:
//   momentum 0: p -= lr g;
//   else v = momentum v - lr g, then p += v, or with nesterov
//   p += momentum v - lr g.
// One thread per parameter (grid-stride) over the flat block, with the cpu
// engine's float math (no FMA contraction: bit-identical steps).
#include "cuda_common.cuh"
#include "cuda_ops.h"

// p, g, velocity: (count); MODE 0 plain, 1 momentum, 2 nesterov
template <int MODE>
__global__ void sgd_kernel(size_t count, float lr, float mom, float *__restrict__ p,
                           const float *__restrict__ g, float *__restrict__ velocity)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float lg = __fmul_rn(lr, g[i]);
        if (MODE == 0) {
            p[i] = __fsub_rn(p[i], lg);
        } else {
            const float vi = __fsub_rn(__fmul_rn(mom, velocity[i]), lg);
            velocity[i] = vi;
            if (MODE == 2)
                p[i] = __fadd_rn(p[i], __fsub_rn(__fmul_rn(mom, vi), lg));
            else
                p[i] = __fadd_rn(p[i], vi);
        }
    }
}

// p, g, velocity: (count); velocity is unused (may be NULL) without momentum
cnn_status cuda_sgd_step(cnn_ctx *ctx, const cnn_optimizer_desc *o, size_t count, float *p,
                         const float *g, float *velocity)
{
    const float lr = o->lr, mom = o->momentum;
    if (mom != 0.0f && !velocity)
        return cnn_set_error(CNN_ERR_VALUE, "sgd: momentum without a velocity buffer");
    if (count == 0) return CNN_OK;
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    cudaStream_t st = cnn_stream(ctx);
    if (mom == 0.0f)
        sgd_kernel<0><<<blocks, CNN_THREADS, 0, st>>>(count, lr, mom, p, g, velocity);
    else if (o->nesterov)
        sgd_kernel<2><<<blocks, CNN_THREADS, 0, st>>>(count, lr, mom, p, g, velocity);
    else
        sgd_kernel<1><<<blocks, CNN_THREADS, 0, st>>>(count, lr, mom, p, g, velocity);
    CNN_CUDA_LAUNCHED("sgd_step");
    return CNN_OK;
}
