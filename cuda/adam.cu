// adam.cu: one Adam step for the cuda engine, in Keras's form:
//   lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)   (host, double, then float)
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
__global__ void adam_kernel(size_t count, float lr_t, float one_b1, float one_b2, float eps,
                            float *__restrict__ p, const float *__restrict__ g,
                            float *__restrict__ m, float *__restrict__ v)
{
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
cnn_status cuda_adam_step(cnn_ctx *ctx, const cnn_optimizer_desc *o, long step, size_t count,
                          float *p, const float *g, float *m, float *v)
{
    if (step < 1) return cnn_set_error(CNN_ERR_VALUE, "adam: step %ld must count from 1", step);
    if (count == 0) return CNN_OK;
    const double t = (double)step;
    const float lr_t = (float)((double)o->lr * sqrt(1.0 - pow((double)o->beta_2, t)) /
                               (1.0 - pow((double)o->beta_1, t)));
    const float one_b1 = 1.0f - o->beta_1, one_b2 = 1.0f - o->beta_2;
    adam_kernel<<<cnn_blocks(count, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, lr_t, one_b1, one_b2, o->epsilon, p, g, m, v);
    CNN_CUDA_LAUNCHED("adam_step");
    return CNN_OK;
}
