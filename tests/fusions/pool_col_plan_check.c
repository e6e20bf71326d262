/* pool_col_plan_check.c: the Net's use of conv2d_backward_data_pool (cnn.h;
 * net/plan.c plan_pool_col and plan_backward), on the CPU.
 *
 * Built and run by tests/test_pool_col2im_fusion.py: csrc/*.c and
 * csrc/cpu/*.c, no Python, no GPU. Only the cuda engine has the entry, so
 * here a copy of the cpu engine's table gets a stand-in that checks what
 * cnn.h promises the Net passes (the pool's output is the convolution's
 * input, disjoint windows, an argmax for max; pool_y, the pool's output as
 * its forward left it: after a ReLU and a max pool, the ReLU's output at
 * each argmax, bit for bit, which the cuda engine tests in place of y) and
 * then runs the cpu
 * engine's conv2d_backward_data into a buffer of its own and the pool's
 * backward (pool_backward_relu with y): the bits of the two apart by
 * definition. Networks trained on that table and on the cpu table itself
 * must then agree bit for bit (weights, gradients, losses, the input
 * gradient of a backward), which fails where the Net skips a layer it
 * should run, runs one twice, leaves a gradient in the other ping-pong
 * buffer, or reads the pool's output gradient the fused call no longer
 * writes; and the stand-in must be called exactly where planned: per
 * convolution after a disjoint pool whose backward runs, with the ReLU's
 * output where a ReLU before the pool is fused (CNNCUDA_FUSE), never with
 * CNNCUDA_FUSE_POOL_COL2IM=0, and as with "1" when it is unset (on by
 * default). Prints "ok" and exits 0, or names what failed.
 *
 * usage: pool_col_plan_check
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"
#include "cpu/cpu.h"
#include "net_check.h"

extern const cnn_backend cnn_backend_cpu;

static int failures;
static int calls, calls_with_y, pool_y_checked;

/* The stand-in: cnn.h's preconditions, then the two entries apart. */
static cnn_status stand_in(cnn_ctx *ctx, const cnn_conv_desc *d, const cnn_pool_desc *p,
                           const float *dy, const float *w, const int32_t *argmax,
                           const float *y, const float *pool_y, float *dx, void *ws)
{
    if (p->n != d->n || p->c != d->c || p->oh != d->h || p->ow != d->w || p->ph > p->sh ||
        p->pw > p->sw || p->pad_top < 0 || p->pad_left < 0 ||
        (p->mode == CNN_POOL_MAX && !argmax) || (p->mode != CNN_POOL_MAX && argmax)) {
        fprintf(stderr, "conv2d_backward_data_pool called with pool %dx%d stride %dx%d out "
                        "%dx%d for a conv input %dx%d\n",
                p->ph, p->pw, p->sh, p->sw, p->oh, p->ow, d->h, d->w);
        failures++;
    }
    calls++;
    calls_with_y += y != NULL;
    if (!pool_y) {
        fprintf(stderr, "conv2d_backward_data_pool called without the pool's output\n");
        failures++;
    } else if (y && p->mode == CNN_POOL_MAX) {
        /* the pool's output holds the ReLU's output at each argmax */
        const size_t planes = (size_t)p->n * p->c, out = (size_t)p->oh * p->ow,
                     in = (size_t)p->h * p->w;
        for (size_t o = 0; o < planes * out; ++o) {
            if (argmax[o] < 0) continue;
            const float at = y[(o / out) * in + (size_t)argmax[o]];
            if (memcmp(&at, &pool_y[o], sizeof at) != 0) {
                fprintf(stderr, "pool_y[%zu] = %g, the ReLU's output at its argmax %g\n", o,
                        pool_y[o], at);
                failures++;
                break;
            }
        }
        pool_y_checked++;
    }
    const size_t count = (size_t)d->n * d->c * d->h * d->w;
    float *dpool = malloc((count ? count : 1) * sizeof(float));
    if (!dpool) exit(3);
    cnn_status st = cpu_conv2d_backward_data(ctx, d, dy, w, dpool, ws);
    if (st == CNN_OK)
        st = y ? cpu_pool_backward_relu(ctx, p, dpool, argmax, y, dx)
               : cpu_pool_backward(ctx, p, dpool, argmax, dx);
    free(dpool);
    return st;
}

typedef struct {
    const char *name;
    int h, w, c;
    const char *layers; /* parse_layers */
    /* the stand-in's calls per training step and per backward that wants
     * the input gradient, and how many of them fuse a ReLU (CNNCUDA_FUSE=1) */
    int train_calls, dx_calls, relu_calls;
} case_t;

/* What a run of one case on `be` expects of the stand-in (run_net's hook):
 * its calls per training step and per backward that wants the input
 * gradient, and how many of them fuse a ReLU. */
typedef struct {
    const cnn_backend *be;
    const case_t *t;
    int want_train, want_dx, want_relu;
} expect_t;

static void count_calls(void *arg, int phase)
{
    const expect_t *e = arg;
    if (e->be != &cnn_backend_cpu && phase < 2 &&
        (calls != e->want_train || calls_with_y != e->want_relu)) {
        fprintf(stderr, "%s: a training step made %d calls (%d with y), expected %d (%d)\n",
                e->t->name, calls, calls_with_y, e->want_train, e->want_relu);
        failures++;
    }
    if (e->be != &cnn_backend_cpu && phase == 2 && calls != e->want_dx) {
        fprintf(stderr, "%s: a backward with the input gradient made %d calls, expected %d\n",
                e->t->name, calls, e->want_dx);
        failures++;
    }
    calls = calls_with_y = 0;
}

/* Two training steps, a backward with the input gradient, and a gradient
 * computation, on `be`; checks the stand-in's calls against the case. */
static out_t run(const cnn_backend *be, const case_t *t, int batch, int planned, int fuse_relu)
{
    const expect_t e = {be, t, planned ? t->train_calls : 0, planned ? t->dx_calls : 0,
                        planned && fuse_relu ? t->relu_calls : 0};
    calls = calls_with_y = 0;
    return run_net(be, t->layers, t->h, t->w, t->c, batch, count_calls, (void *)&e);
}

int main(void)
{
    /* the cases of tests/test_pool_col2im_fusion.py (15x13x3 images) and
     * the CIFAR-10 and LeNet-5 seeds */
    const case_t cases[] = {
        {"max_relu", 15, 13, 3, "C5,3 R M2 C33,3,s R M2 C6,2 F D4", 2, 2, 2},
        {"avg_relu", 15, 13, 3, "C6,5,s R A2 C16,3,2 R A2 C3,1 F D4", 2, 2, 2},
        {"no_relu", 15, 13, 3, "C4,3 M2 C5,3,n A2 C3,1 F D4", 2, 2, 0},
        {"padded_and_gaps", 15, 13, 3, "C4,3 R M3,s C5,2 R A2,3,s C3,1 F D4", 2, 2, 2},
        {"pool_first", 15, 13, 3, "M2 C4,3 R M2 C3,1 F D4", 1, 2, 1},
        {"relu_first", 15, 13, 3, "R A2 C4,3 R M2 C3,2 F D4", 2, 2, 2},
        {"batchnorm", 15, 13, 3, "C4,3 B R M2 C5,3 F D4", 1, 1, 1},
        {"overlapping", 15, 13, 3, "C4,3 R M3,2 C5,2 R A3,2,s C3,1 F D4", 0, 0, 0},
        {"cifar10_cnn", 32, 32, 3, "C32,3 R M2 C64,3 R M2 C64,3 R F D64 R D4", 2, 2, 2},
        {"lenet5", 28, 28, 1, "C6,5,s R A2 C16,5 R A2 F D120 R D84 R D4", 1, 1, 1},
    };
    cnn_fused_ops with_fused = *cnn_backend_cpu.fused;
    with_fused.conv2d_backward_data_pool = stand_in;
    cnn_backend with_entry = cnn_backend_cpu;
    with_entry.fused = &with_fused;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        const case_t *t = &cases[i];
        /* mode 2: the variable unset, which must plan as "1" (on by default) */
        for (int mode = 0; mode < 3; ++mode) {
            const int planned = mode != 0;
            for (int fuse_relu = 0; fuse_relu < 2; ++fuse_relu) {
                for (int batch = 1; batch <= 7; batch += 6) {
                    if (mode == 2)
                        unsetenv("CNNCUDA_FUSE_POOL_COL2IM");
                    else
                        setenv("CNNCUDA_FUSE_POOL_COL2IM", planned ? "1" : "0", 1);
                    setenv("CNNCUDA_FUSE", fuse_relu ? "1" : "0", 1);
                    out_t a = run(&with_entry, t, batch, planned, fuse_relu);
                    out_t b = run(&cnn_backend_cpu, t, batch, planned, fuse_relu);
                    char detail[96];
                    snprintf(detail, sizeof detail, "mode %d, CNNCUDA_FUSE %d, batch %d", mode,
                             fuse_relu, batch);
                    if (!same_bits(&a, &b, t->name, detail)) failures++;
                    free(a.v), free(b.v);
                }
            }
        }
    }
    if (pool_y_checked == 0) {
        fprintf(stderr, "no call had a max pool after a ReLU: pool_y never checked\n");
        failures++;
    }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
