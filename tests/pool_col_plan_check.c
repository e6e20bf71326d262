/* pool_col_plan_check.c: the Net's use of conv2d_backward_data_pool (cnn.h;
 * net.c plan_pool_col and backward_device), on the CPU.
 *
 * Built and run by tests/test_pool_col2im_fusion.py: csrc/*.c and
 * csrc/cpu/*.c, no Python, no GPU. Only the cuda engine has the entry, so
 * here a copy of the cpu engine's table gets a stand-in that checks what
 * cnn.h promises the Net passes (the pool's output is the convolution's
 * input, disjoint windows, an argmax for max) and then runs the cpu
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

#include "check.h"
#include "cnn.h"
#include "cpu/cpu.h"

extern const cnn_backend cnn_backend_cpu;

static int failures;
static int calls, calls_with_y;

/* The stand-in: cnn.h's preconditions, then the two entries apart. */
static cnn_status stand_in(cnn_ctx *ctx, const cnn_conv_desc *d, const cnn_pool_desc *p,
                           const float *dy, const float *w, const int32_t *argmax,
                           const float *y, float *dx, void *ws)
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

#define MAXL 16

/* A network as a line of layers: "C5,3" conv of 5 filters 3x3 (",2":
 * strides 2, ",s": padding 'same', ",n": no bias, in any order after the
 * size), "M2" and "A2" max and average pools 2x2 (",3": strides 3, ",s":
 * 'same'), "R" ReLU, "B" batchnorm, "F" flatten, "D4" dense of 4 units.
 * Returns the layer count. */
static int parse_layers(const char *text, cnn_layer_spec *out)
{
    int n = 0;
    for (const char *p = text; *p && n < MAXL;) {
        cnn_layer_spec s = {.use_bias = 1, .momentum = 0.99f, .epsilon = 1e-3f};
        const char kind = *p++;
        const int size = (int)strtol(p, (char **)&p, 10);
        s.kind = kind == 'C'   ? CNN_LAYER_CONV2D
                 : kind == 'M' ? CNN_LAYER_MAXPOOL
                 : kind == 'A' ? CNN_LAYER_AVGPOOL
                 : kind == 'R' ? CNN_LAYER_ACTIVATION
                 : kind == 'B' ? CNN_LAYER_BATCHNORM
                 : kind == 'F' ? CNN_LAYER_FLATTEN
                               : CNN_LAYER_DENSE;
        s.activation = CNN_ACT_RELU;
        s.units = size;
        s.kh = s.kw = s.sh = s.sw = kind == 'C' ? 1 : size;
        if (kind == 'C' && *p == ',') s.kh = s.kw = (int)strtol(p + 1, (char **)&p, 10);
        while (*p == ',') {
            ++p;
            if (*p == 's') s.same = 1, ++p;
            else if (*p == 'n') s.use_bias = 0, ++p;
            else s.sh = s.sw = (int)strtol(p, (char **)&p, 10);
        }
        while (*p == ' ') ++p;
        out[n++] = s;
    }
    return n;
}

typedef struct {
    const char *name;
    int h, w, c;
    const char *layers; /* parse_layers */
    /* the stand-in's calls per training step and per backward that wants
     * the input gradient, and how many of them fuse a ReLU (CNNCUDA_FUSE=1) */
    int train_calls, dx_calls, relu_calls;
} case_t;

static float rnd(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 33) % 2000001) / 1000000.0f - 1.0f;
}

/* Everything a run leaves to compare: losses, weights, gradients, the
 * input gradient of a backward. */
typedef struct {
    float *v;
    size_t n, cap;
} out_t;

static void put(out_t *o, const float *p, size_t count)
{
    if (o->n + count > o->cap) {
        o->cap = 2 * (o->n + count);
        o->v = realloc(o->v, o->cap * sizeof(float));
        if (!o->v) exit(3);
    }
    memcpy(o->v + o->n, p, count * sizeof(float));
    o->n += count;
}

static void put_weights(out_t *o, cnn_net *net, int gradients)
{
    for (int i = 0; i < cnn_net_weight_count(net); ++i) {
        const cnn_weight_info *wi = cnn_net_weight(net, i);
        if (gradients && !wi->trainable) continue;
        float *buf = malloc(wi->count * sizeof(float));
        if (!buf) exit(3);
        CHECK(gradients ? cnn_net_get_gradient(net, i, buf) : cnn_net_get_weight(net, i, buf));
        put(o, buf, wi->count);
        free(buf);
    }
}

/* Two training steps, a backward with the input gradient, and a gradient
 * computation, on `be`; checks the stand-in's calls against the case. */
static out_t run(const cnn_backend *be, const case_t *t, int batch, int planned, int fuse_relu)
{
    cnn_layer_spec layers[MAXL];
    cnn_net_spec spec = {.in_h = t->h, .in_w = t->w, .in_c = t->c, .max_batch = batch,
                         .layers = layers, .n_layers = parse_layers(t->layers, layers),
                         .loss = {.kind = CNN_LOSS_SPARSE_CE, .from_logits = 1},
                         .optimizer = {.kind = CNN_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f,
                                       .beta_2 = 0.999f, .epsilon = 1e-7f},
                         .seed = 11};
    cnn_net *net = NULL;
    CHECK(cnn_net_create(be, 1, &spec, &net));
    const size_t in = (size_t)batch * t->h * t->w * t->c;
    float *x = malloc(in * sizeof(float)), *dx = malloc(in * sizeof(float));
    float dy[4 * 64];
    int32_t labels[64];
    unsigned long long s = 5;
    if (!x || !dx || batch > 64) exit(3);
    for (size_t i = 0; i < in; ++i) x[i] = rnd(&s);
    for (int i = 0; i < batch; ++i) labels[i] = (int32_t)(i % 4);
    for (int i = 0; i < 4 * batch; ++i) dy[i] = rnd(&s);
    out_t o = {0};
    const int want_train = planned ? t->train_calls : 0, want_dx = planned ? t->dx_calls : 0;
    const int want_relu = planned && fuse_relu ? t->relu_calls : 0;
    for (int step = 0; step < 2; ++step) {
        float sums[2];
        calls = calls_with_y = 0;
        CHECK(cnn_net_train_batch(net, batch, x, labels, NULL, sums, sums + 1));
        put(&o, sums, 2);
        if (be != &cnn_backend_cpu && (calls != want_train || calls_with_y != want_relu)) {
            fprintf(stderr, "%s: a training step made %d calls (%d with y), expected %d (%d)\n",
                    t->name, calls, calls_with_y, want_train, want_relu);
            failures++;
        }
    }
    put_weights(&o, net, 0);
    put_weights(&o, net, 1);
    calls = 0;
    CHECK(cnn_net_forward(net, batch, x, 1, NULL));
    CHECK(cnn_net_backward(net, batch, dy, dx));
    if (be != &cnn_backend_cpu && calls != want_dx) {
        fprintf(stderr, "%s: a backward with the input gradient made %d calls, expected %d\n",
                t->name, calls, want_dx);
        failures++;
    }
    put(&o, dx, in);
    put_weights(&o, net, 1);
    free(x), free(dx);
    cnn_net_destroy(net);
    return o;
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
    cnn_backend with_entry = cnn_backend_cpu;
    with_entry.conv2d_backward_data_pool = stand_in;
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
                    if (a.n != b.n || memcmp(a.v, b.v, a.n * sizeof(float)) != 0) {
                        size_t k = 0;
                        while (k < a.n && k < b.n && memcmp(a.v + k, b.v + k, sizeof(float)) == 0)
                            ++k;
                        fprintf(stderr, "%s (mode %d, CNNCUDA_FUSE %d, batch %d): value %zu "
                                        "of %zu differs\n",
                                t->name, mode, fuse_relu, batch, k, a.n);
                        failures++;
                    }
                    free(a.v), free(b.v);
                }
            }
        }
    }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
