/* net_check.h: what the C checks of a Net's fusion plans share
 * (pool_col_plan_check.c, pool_im2col_plan_check.c): networks written as a
 * line of layers, seeded inputs, and a run's outputs gathered to compare
 * bit for bit. Static functions: each check is one translation unit. */
#ifndef CNN_TESTS_NET_CHECK_H
#define CNN_TESTS_NET_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

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

/* Two training steps, a forward and backward with the input gradient, on
 * `be`, of the network `text` (parse_layers) on h x w x c images; calls
 * hook(arg, phase) after each training step (phase 0, 1) and after the
 * backward (phase 2), so that a check can count the calls of each. Returns
 * the losses, weights and gradients after the steps, the input gradient
 * of the backward and the gradients after it. */
static out_t run_net(const cnn_backend *be, const char *text, int h, int w, int c, int batch,
                     void (*hook)(void *arg, int phase), void *arg)
{
    cnn_layer_spec layers[MAXL];
    cnn_net_spec spec = {.in_h = h, .in_w = w, .in_c = c, .max_batch = batch,
                         .layers = layers, .n_layers = parse_layers(text, layers),
                         .loss = {.kind = CNN_LOSS_SPARSE_CE, .from_logits = 1},
                         .optimizer = {.kind = CNN_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f,
                                       .beta_2 = 0.999f, .epsilon = 1e-7f},
                         .seed = 11};
    cnn_net *net = NULL;
    CHECK(cnn_net_create(be, 1, &spec, &net));
    const size_t in = (size_t)batch * h * w * c;
    float *x = malloc(in * sizeof(float)), *dx = malloc(in * sizeof(float));
    float dy[4 * 64];
    int32_t labels[64];
    unsigned long long s = 5;
    if (!x || !dx || batch > 64) exit(3);
    for (size_t i = 0; i < in; ++i) x[i] = rnd(&s);
    for (int i = 0; i < batch; ++i) labels[i] = (int32_t)(i % 4);
    for (int i = 0; i < 4 * batch; ++i) dy[i] = rnd(&s);
    out_t o = {0};
    for (int step = 0; step < 2; ++step) {
        float sums[2];
        CHECK(cnn_net_train_batch(net, batch, x, labels, NULL, sums, sums + 1));
        put(&o, sums, 2);
        hook(arg, step);
    }
    put_weights(&o, net, 0);
    put_weights(&o, net, 1);
    CHECK(cnn_net_forward(net, batch, x, 1, NULL));
    CHECK(cnn_net_backward(net, batch, dy, dx));
    hook(arg, 2);
    put(&o, dx, in);
    put_weights(&o, net, 1);
    free(x), free(dx);
    cnn_net_destroy(net);
    return o;
}

/* Whether two runs' outputs are the same bits; else names the first value
 * that differs, with `what` and `detail`, and returns 0. */
static int same_bits(const out_t *a, const out_t *b, const char *what, const char *detail)
{
    if (a->n == b->n && memcmp(a->v, b->v, a->n * sizeof(float)) == 0) return 1;
    size_t k = 0;
    while (k < a->n && k < b->n && memcmp(a->v + k, b->v + k, sizeof(float)) == 0) ++k;
    fprintf(stderr, "%s (%s): value %zu of %zu differs\n", what, detail, k, a->n);
    return 0;
}

#endif
