/* regularize.c: a weight's regularizer (Keras's L1L2) for the cpu and omp
 * engines: g += l1 sign(p) + (2 l2) p, and sums[0] += scale (l1 sum|p| +
 * l2 sum p^2), the sums in double in index order. One pass on one thread
 * (the weights are small next to a step's activations), so omp gives the
 * cpu engine's bits. */
#include <math.h>

#include "cpu.h"

cnn_status cpu_regularize(cnn_ctx *ctx, size_t count, float l1, float l2, float scale,
                          const float *p, float *g, float *sums)
{
    (void)ctx;
    const float two_l2 = 2.0f * l2;
    double abs_sum = 0.0, square_sum = 0.0;
    for (size_t i = 0; i < count; ++i) {
        const float w = p[i];
        if (g) {
            const float sign = w > 0.0f ? 1.0f : w < 0.0f ? -1.0f : 0.0f;
            const float a = l1 * sign, b = two_l2 * w;
            g[i] += a + b;
        }
        abs_sum += fabs((double)w);
        square_sum += (double)w * (double)w;
    }
    if (sums)
        sums[0] += (float)((double)scale * ((double)l1 * abs_sum + (double)l2 * square_sum));
    return CNN_OK;
}
