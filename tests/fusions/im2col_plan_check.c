/* im2col_plan_check.c: the Net's use of gather_batch_im2col and
 * conv2d_forward_col (cnn.h; net/plan.c plan_forward, net/fit.c
 * range_step), on the CPU, and that no pool's forward writes a column
 * matrix any more (the pool+im2col fusion is retired from the engine: its
 * kernel lives on in dev/cuda/pool_im2col_kernels.cuh).
 *
 * Built and run by tests/test_im2col_fusion.py from the C sources of csrc
 * and csrc/cpu, no Python, no GPU. Only the cuda engine has the entries, so
 * here a copy of the cpu engine's table gets stand-ins that check what
 * cnn.h promises the Net passes, then run the entries they replace:
 * gather_batch_im2col checks that the
 * convolution takes the gathered rows and runs the cpu engine's
 * gather_batch (into x, which the cuda engine leaves unwritten);
 * conv2d_forward_col checks that it comes right after it, for
 * the same workspace and with their output as x, and runs the cpu engine's
 * conv2d_forward (or conv2d_forward_relu). Networks trained on that table
 * (train_batch and train_range) and on the cpu table must agree bit for bit
 * (losses, weights, gradients, the input gradient of a backward,
 * predictions), which fails where the Net skips a layer, runs one twice, or
 * hands the convolution the wrong input; and the stand-ins must be called
 * exactly where planned: per step of train_range when the first layer is a
 * convolution, unless CNNCUDA_FUSE_GATHER_IM2COL is "0" (on when unset or
 * any other value); never in another forward, whatever
 * CNNCUDA_FUSE_POOL_IM2COL says (a retired switch, now ignored). Prints
 * "ok" and exits 0, or names what failed.
 *
 * usage: im2col_plan_check
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
static int pool_calls, col_calls, col_relu_calls;
/* the last gather_batch_im2col's workspace and output, until the
 * conv2d_forward_col that must follow it */
static void *pending_ws;
static const float *pending_y;

static int gather_calls;

static cnn_status gather_stand_in(cnn_ctx *ctx, const int32_t *order, int64_t *counters,
                                  int count, long rows, size_t x_row_bytes, const void *src_x,
                                  void *dst_x, size_t t_row_bytes, const void *src_t,
                                  void *dst_t, const cnn_conv_desc *d, void *ws)
{
    if (d->n != count || x_row_bytes != (size_t)d->c * d->h * d->w * sizeof(float) || !ws ||
        pending_ws) {
        fprintf(stderr, "gather_batch_im2col called with n %d for %d rows, %zu-byte rows for "
                        "%dx%dx%d, ws %p, pending %p\n",
                d->n, count, x_row_bytes, d->c, d->h, d->w, ws, pending_ws);
        failures++;
    }
    gather_calls++;
    pending_ws = ws;
    pending_y = dst_x;
    return cpu_gather_batch(ctx, order, counters, count, rows, x_row_bytes, src_x, dst_x,
                            t_row_bytes, src_t, dst_t);
}

static cnn_status col_stand_in(cnn_ctx *ctx, const cnn_conv_desc *d, int relu, const float *x,
                               const float *w, const float *b, float *y, void *ws)
{
    if (!pending_ws || ws != pending_ws || x != pending_y || (relu != 0 && relu != 1)) {
        fprintf(stderr, "conv2d_forward_col called with ws %p, x %p, relu %d after the pool's "
                        "ws %p, y %p\n",
                ws, (const void *)x, relu, pending_ws, (const void *)pending_y);
        failures++;
    }
    pending_ws = NULL;
    pending_y = NULL;
    col_calls++;
    col_relu_calls += relu != 0;
    return relu ? cpu_conv2d_forward_relu(ctx, d, x, w, b, y, ws)
                : cpu_conv2d_forward(ctx, d, x, w, b, y, ws);
}

typedef struct {
    const char *name;
    int h, w, c;
    const char *layers; /* parse_layers */
    /* the fused pairs of every forward, and how many of them run the ReLU
     * after the convolution too (CNNCUDA_FUSE=1) */
    int pairs, relu_pairs;
} case_t;

typedef struct {
    const cnn_backend *be;
    const case_t *t;
    int want, want_relu;
} expect_t;

/* run_net's hook: every phase ran one training forward (steps) or one
 * forward (the backward's phase) */
static void count_calls(void *arg, int phase)
{
    const expect_t *e = arg;
    if (e->be != &cnn_backend_cpu &&
        (pool_calls != e->want || col_calls != e->want || col_relu_calls != e->want_relu)) {
        fprintf(stderr, "%s: phase %d made %d pool and %d conv calls (%d with the ReLU), "
                        "expected %d (%d)\n",
                e->t->name, phase, pool_calls, col_calls, col_relu_calls, e->want,
                e->want_relu);
        failures++;
    }
    if (pending_ws) {
        fprintf(stderr, "%s: a column matrix without its conv2d_forward_col\n",
                e->t->name);
        failures++;
    }
    pool_calls = col_calls = col_relu_calls = 0;
    pending_ws = NULL;
}

static out_t run(const cnn_backend *be, const case_t *t, int batch, int planned, int fuse_relu)
{
    const expect_t e = {be, t, planned ? t->pairs : 0, planned && fuse_relu ? t->relu_pairs : 0};
    pool_calls = col_calls = col_relu_calls = 0;
    pending_ws = NULL;
    return run_net(be, t->layers, t->h, t->w, t->c, batch, count_calls, (void *)&e);
}

/* Predictions of batch `batch` through the table (a forward that is not a
 * training step, in chunks of max_batch 3): the stand-ins in every chunk. */
static void predict_both(const cnn_backend *with, const case_t *t, int planned)
{
    cnn_layer_spec layers[MAXL];
    cnn_net_spec spec = {.in_h = t->h, .in_w = t->w, .in_c = t->c, .max_batch = 3,
                         .layers = layers, .n_layers = parse_layers(t->layers, layers),
                         .loss = {.kind = CNN_LOSS_SPARSE_CE, .from_logits = 1},
                         .optimizer = {.kind = CNN_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f,
                                       .beta_2 = 0.999f, .epsilon = 1e-7f},
                         .seed = 3};
    const int n = 7;
    const size_t in = (size_t)n * t->h * t->w * t->c;
    float *x = malloc(in * sizeof(float)), out[2][7 * 4];
    unsigned long long s = 9;
    if (!x) exit(3);
    for (size_t i = 0; i < in; ++i) x[i] = rnd(&s);
    const cnn_backend *tables[2] = {with, &cnn_backend_cpu};
    for (int k = 0; k < 2; ++k) {
        cnn_net *net = NULL;
        CHECK(cnn_net_create(tables[k], 1, &spec, &net));
        pool_calls = col_calls = 0;
        const cnn_host_array xa = {x, CNN_DTYPE_F32, "x", 0};
        CHECK(cnn_net_predict(net, n, &xa, out[k]));
        const int want = k == 0 && planned ? 3 * t->pairs : 0; /* chunks 3 + 3 + 1 */
        if (k == 0 && (pool_calls != want || col_calls != want || pending_ws)) {
            fprintf(stderr, "%s: predict made %d pool and %d conv calls, expected %d\n", t->name,
                    pool_calls, col_calls, want);
            failures++;
        }
        pending_ws = NULL;
        cnn_net_destroy(net);
    }
    if (memcmp(out[0], out[1], sizeof out[0]) != 0) {
        fprintf(stderr, "%s: predictions differ\n", t->name);
        failures++;
    }
    free(x);
}

/* Three epochs of train_range over 23 resident samples in batches of 7
 * (the last of each epoch 2 rows) through the table: the running sums and
 * the weights; checks the gather stand-in ran once per step where `gather`
 * says it is planned, and the pool stand-ins in every step's forward where
 * `planned` says they are. */
static out_t range_run(const cnn_backend *be, const case_t *t, int planned, int gather)
{
    cnn_layer_spec layers[MAXL];
    cnn_net_spec spec = {.in_h = t->h, .in_w = t->w, .in_c = t->c, .max_batch = 7,
                         .layers = layers, .n_layers = parse_layers(t->layers, layers),
                         .loss = {.kind = CNN_LOSS_SPARSE_CE, .from_logits = 1},
                         .optimizer = {.kind = CNN_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f,
                                       .beta_2 = 0.999f, .epsilon = 1e-7f},
                         .seed = 7};
    const long n = 23;
    const size_t in = (size_t)n * t->h * t->w * t->c;
    float *x = malloc(in * sizeof(float));
    int32_t labels[23], order[23];
    unsigned long long s = 13;
    if (!x) exit(3);
    for (size_t i = 0; i < in; ++i) x[i] = rnd(&s);
    for (int i = 0; i < n; ++i) labels[i] = (int32_t)(i % 4);
    cnn_net *net = NULL;
    CHECK(cnn_net_create(be, 1, &spec, &net));
    const cnn_host_array xa = {x, CNN_DTYPE_F32, "x", 0};
    CHECK(cnn_net_set_data(net, n, &xa, labels, NULL));
    out_t o = {0};
    for (int epoch = 0; epoch < 3; ++epoch) {
        for (int i = 0; i < n; ++i) order[i] = (int32_t)((i * 5 + epoch * 3) % n);
        CHECK(cnn_net_set_order(net, order));
        pool_calls = col_calls = gather_calls = 0;
        CHECK(cnn_net_train_range(net, 0, n, 7));
        const int steps = 4, want_gather = gather ? steps : 0;
        const int want_pool = planned ? steps * t->pairs : 0;
        if (be != &cnn_backend_cpu &&
            (gather_calls != want_gather || pool_calls != want_pool ||
             col_calls != want_gather + want_pool || pending_ws)) {
            fprintf(stderr, "%s: train_range made %d gather, %d pool and %d conv calls, "
                            "expected %d, %d and %d\n",
                    t->name, gather_calls, pool_calls, col_calls, want_gather, want_pool,
                    want_gather + want_pool);
            failures++;
        }
        pending_ws = NULL;
        double sums[2];
        CHECK(cnn_net_read_sums(net, 1, sums, sums + 1));
        const float f[2] = {(float)sums[0], (float)sums[1]};
        put(&o, f, 2);
    }
    put_weights(&o, net, 0);
    cnn_net_destroy(net);
    free(x);
    return o;
}

int main(void)
{
    /* 15x13x3 images (odd: the 2x2 pools drop a row or a column) and the
     * seeds (the last dense layer of 4 units, as the labels) */
    const case_t cases[] = {
        /* conv after a max pool (fused), conv 'same' after a max pool (not:
         * padding to fill), conv after nothing but a ReLU (not) */
        {"max_relu", 15, 13, 3, "C5,3 R M2 C7,3 R M2,s C6,2,s R C3,1 F D4", 1, 1},
        /* average pools, a strided conv after one (fused), conv 1x1 */
        {"avg_relu", 15, 13, 3, "C6,5,s R A2 C16,3,2 R A2 C3,1 F D4", 2, 1},
        /* no ReLU after the convs; a conv without bias */
        {"no_relu", 15, 13, 3, "C4,3 M2 C5,3,n A2 C3,1 F D4", 2, 0},
        /* a pool first; overlapping windows (3x3, strides 2) */
        {"pool_first", 15, 13, 3, "M2 C4,3 R M3,2 C3,1 F D4", 2, 1},
        /* a pool before batchnorm, a pool as the last layer before flatten,
         * a pool followed by a pool */
        {"not_a_conv", 15, 13, 3, "C4,3 M2 B C5,3 R M2 M1 F D4", 0, 0},
        {"cifar10_cnn", 32, 32, 3, "C32,3 R M2 C64,3 R M2 C64,3 R F D64 R D4", 2, 2},
        {"lenet5", 28, 28, 1, "C6,5,s R A2 C16,5 R A2 F D120 R D84 R D4", 1, 1},
    };
    cnn_fused_ops with_fused = *cnn_backend_cpu.fused;
    with_fused.conv2d_forward_col = col_stand_in;
    with_fused.gather_batch_im2col = gather_stand_in;
    cnn_backend with_entries = cnn_backend_cpu;
    with_entries.fused = &with_fused;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        const case_t *t = &cases[i];
        /* CNNCUDA_FUSE_POOL_IM2COL, retired, must change nothing: mode 2
         * unset, the others "0", "1" and "yes" */
        for (int mode = 0; mode < 4; ++mode) {
            const int planned = 0; /* no pool's forward writes a column matrix */
            for (int fuse_relu = 0; fuse_relu < 2; ++fuse_relu) {
                for (int batch = 1; batch <= 7; batch += 6) {
                    if (mode == 2)
                        unsetenv("CNNCUDA_FUSE_POOL_IM2COL");
                    else
                        setenv("CNNCUDA_FUSE_POOL_IM2COL", mode == 1 ? "1" : mode ? "yes" : "0",
                               1);
                    setenv("CNNCUDA_FUSE", fuse_relu ? "1" : "0", 1);
                    out_t a = run(&with_entries, t, batch, planned, fuse_relu);
                    out_t b = run(&cnn_backend_cpu, t, batch, planned, fuse_relu);
                    char detail[96];
                    snprintf(detail, sizeof detail, "mode %d, CNNCUDA_FUSE %d, batch %d", mode,
                             fuse_relu, batch);
                    if (!same_bits(&a, &b, t->name, detail)) failures++;
                    free(a.v), free(b.v);
                }
            }
            predict_both(&with_entries, t, planned);
            /* train_range, with and without the gather fusion: on when
             * the variable is unset (mode 2), "1" (mode 1) or "on" (modes 0
             * and 3), off when it is "0" */
            for (int gather = 0; gather < 2; ++gather) {
                if (gather && mode == 2)
                    unsetenv("CNNCUDA_FUSE_GATHER_IM2COL");
                else
                    setenv("CNNCUDA_FUSE_GATHER_IM2COL", gather ? (mode == 1 ? "1" : "on") : "0",
                           1);
                setenv("CNNCUDA_FUSE", "1", 1);
                const int first_conv = t->layers[0] == 'C';
                out_t a = range_run(&with_entries, t, planned, gather && first_conv);
                out_t b = range_run(&cnn_backend_cpu, t, planned, gather && first_conv);
                char detail[96];
                snprintf(detail, sizeof detail, "train_range, mode %d, gather %d", mode, gather);
                if (!same_bits(&a, &b, t->name, detail)) failures++;
                free(a.v), free(b.v);
            }
            unsetenv("CNNCUDA_FUSE_GATHER_IM2COL");
        }
    }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
