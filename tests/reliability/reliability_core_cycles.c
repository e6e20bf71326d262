/* reliability_core_cycles.c: the C core alone, in cycles, for LeakSanitizer.
 *
 * Built and run by tests/test_reliability_leaks.py with
 * -fsanitize=address,undefined (LeakSanitizer is part of AddressSanitizer):
 * csrc/*.c and csrc/cpu/*.c, no Python. Each cycle builds a small network on
 * every host engine compiled in, trains it through both paths (train_batch,
 * and set_data / set_order / train_range), evaluates, predicts, reads and
 * writes weights and optimizer state, takes the error paths (a bad batch, a
 * backward without a forward, a network whose buffers cannot be allocated,
 * a bad layer), and destroys it. At exit LeakSanitizer reports any block the
 * core lost; the exit status is non-zero on any report.
 *
 * usage: reliability_core_cycles [cycles]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"

#define CHECK(expr)                                                                   \
    do {                                                                              \
        cnn_status s_ = (expr);                                                       \
        if (s_ != CNN_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,      \
                    cnn_last_error());                                                \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

#define EXPECT_FAIL(expr)                                                             \
    do {                                                                              \
        if ((expr) == CNN_OK) {                                                       \
            fprintf(stderr, "%s:%d: %s should have failed\n", __FILE__, __LINE__, #expr); \
            exit(2);                                                                  \
        }                                                                             \
    } while (0)

enum { N = 24, H = 8, W = 8, C = 2, K = 3, MB = 8 };

static cnn_layer_spec layer(int kind)
{
    cnn_layer_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.kh = s.kw = s.sh = s.sw = 1;
    s.use_bias = 1;
    s.momentum = 0.99f;
    s.epsilon = 1e-3f;
    return s;
}

static void one_cycle(const cnn_backend *be, int threads, int cycle, const float *x,
                      const int32_t *labels)
{
    cnn_layer_spec ls[8];
    ls[0] = layer(CNN_LAYER_CONV2D);
    ls[0].units = 4;
    ls[0].kh = ls[0].kw = 3;
    ls[0].same = 1;
    ls[1] = layer(CNN_LAYER_BATCHNORM);
    ls[2] = layer(CNN_LAYER_ACTIVATION);
    ls[2].activation = CNN_ACT_RELU;
    ls[3] = layer(CNN_LAYER_MAXPOOL);
    ls[3].kh = ls[3].kw = ls[3].sh = ls[3].sw = 2;
    ls[4] = layer(CNN_LAYER_AVGPOOL);
    ls[4].kh = ls[4].kw = 2;
    ls[4].sh = ls[4].sw = 1;
    ls[5] = layer(CNN_LAYER_DROPOUT);
    ls[5].rate = 0.25f;
    ls[6] = layer(CNN_LAYER_FLATTEN);
    ls[7] = layer(CNN_LAYER_DENSE);
    ls[7].units = K;

    cnn_net_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.in_h = H;
    spec.in_w = W;
    spec.in_c = C;
    spec.max_batch = MB;
    spec.layers = ls;
    spec.n_layers = 8;
    spec.loss.kind = CNN_LOSS_SPARSE_CE;
    spec.loss.from_logits = 1;
    spec.optimizer.kind = cycle % 2 ? CNN_OPT_SGD : CNN_OPT_ADAM;
    spec.optimizer.lr = 0.01f;
    spec.optimizer.beta_1 = 0.9f;
    spec.optimizer.beta_2 = 0.999f;
    spec.optimizer.epsilon = 1e-7f;
    spec.optimizer.momentum = 0.9f;
    spec.seed = (uint64_t)cycle;

    cnn_net *net = NULL;
    CHECK(cnn_net_create(be, threads, &spec, &net));
    float loss, correct;
    double dloss, dcorrect;
    CHECK(cnn_net_train_batch(net, MB, x, labels, NULL, &loss, &correct));
    CHECK(cnn_net_compute_gradients(net, MB, x, labels, NULL, &loss, &correct));
    CHECK(cnn_net_apply_gradients(net));

    /* fit's path, twice: set_data drops the previous data */
    int32_t order[N];
    const cnn_host_array xa = {x, CNN_DTYPE_F32, "x", 0};
    for (int r = 0; r < 2; r++) {
        CHECK(cnn_net_set_data(net, N, &xa, labels, NULL));
        for (int i = 0; i < N; i++) order[i] = (i * 7 + r) % N;
        CHECK(cnn_net_set_order(net, order));
        CHECK(cnn_net_train_range(net, 0, N, 5));
        CHECK(cnn_net_read_sums(net, 1, &dloss, &dcorrect));
    }
    CHECK(cnn_net_evaluate(net, N, &xa, labels, NULL, &dloss, &dcorrect));
    float *y = malloc((size_t)N * K * sizeof(float));
    CHECK(cnn_net_predict(net, N, &xa, y));

    /* a training forward and a backward of our own */
    float dy[MB * K];
    for (int i = 0; i < MB * K; i++) dy[i] = 0.01f * (float)(i % 5);
    float *dx = malloc((size_t)MB * H * W * C * sizeof(float));
    CHECK(cnn_net_forward(net, MB, x, 1, NULL));
    CHECK(cnn_net_backward(net, MB, dy, dx));
    EXPECT_FAIL(cnn_net_backward(net, MB, dy, dx)); /* a backward consumes its forward */

    /* weights, gradients, optimizer state out and back in */
    for (int i = 0; i < cnn_net_weight_count(net); i++) {
        const cnn_weight_info *w = cnn_net_weight(net, i);
        float *host = malloc(w->count * sizeof(float));
        CHECK(cnn_net_get_weight(net, i, host));
        CHECK(cnn_net_set_weight(net, i, host));
        if (w->trainable) {
            CHECK(cnn_net_get_gradient(net, i, host));
            for (int s = 0; s < cnn_net_optimizer_slots(net); s++) {
                CHECK(cnn_net_get_slot(net, i, s, host));
                CHECK(cnn_net_set_slot(net, i, s, host));
            }
        } else {
            EXPECT_FAIL(cnn_net_get_gradient(net, i, host));
        }
        free(host);
    }
    CHECK(cnn_net_set_counters(net, cnn_net_step_count(net), cnn_net_train_forward_count(net)));

    /* error paths on a live network */
    EXPECT_FAIL(cnn_net_train_batch(net, MB + 1, x, labels, NULL, &loss, &correct));
    EXPECT_FAIL(cnn_net_train_range(net, N - 1, 5, 5));
    EXPECT_FAIL(cnn_net_train_range(net, 0, 1, 0));
    EXPECT_FAIL(cnn_net_get_weight(net, 99, y));
    cnn_net_destroy(net);
    free(y);
    free(dx);

    /* a network refused while planning, and one whose buffers cannot all be
     * allocated: the test runs this with max_allocation_size_mb=64, and
     * max_batch 2**25 of a one-value input needs 128 MiB for its inputs
     * alone (2.3 GiB in all) -- the parameters are allocated by then and the
     * partly built network must be freed */
    spec.n_layers = 8;
    ls[7].units = 0;
    EXPECT_FAIL(cnn_net_create(be, threads, &spec, &net));
    ls[7].units = K;
    spec.in_h = spec.in_w = 0;
    spec.in_c = 1;
    spec.layers = &ls[7];
    spec.n_layers = 1;
    spec.max_batch = 1 << 25;
    EXPECT_FAIL(cnn_net_create(be, threads, &spec, &net));
}

/* The shape and image layers (every one, per-channel rescaling, both
 * upsamplings, reshapes that regroup channels) trained, predicted, and run
 * forward and backward by hand. */
static void shape_cycle(const cnn_backend *be, int threads, int cycle, const float *x,
                        const int32_t *labels)
{
    const float values[2 * C] = {0.5f, -2.0f, 0.25f, 1.0f}; /* scales, then offsets */
    cnn_layer_spec ls[9];
    ls[0] = layer(CNN_LAYER_RESCALING);
    ls[0].channel_values = values;
    ls[0].channels = C;
    ls[1] = layer(CNN_LAYER_ZERO_PADDING); /* (11, 9, 2) */
    ls[1].pad[0] = 1, ls[1].pad[1] = 2, ls[1].pad[3] = 1;
    ls[2] = layer(CNN_LAYER_UPSAMPLING); /* (11, 18, 2) */
    ls[2].kh = 1, ls[2].kw = 2, ls[2].interpolation = 1;
    ls[3] = layer(CNN_LAYER_CROPPING); /* (8, 15, 2) */
    ls[3].pad[0] = 2, ls[3].pad[1] = 1, ls[3].pad[2] = 3;
    ls[4] = layer(CNN_LAYER_SPATIAL_DROPOUT);
    ls[4].rate = 0.3f;
    ls[5] = layer(CNN_LAYER_RESHAPE); /* (16, 15, 1) */
    ls[5].target_h = 16, ls[5].target_w = 15, ls[5].target_c = 1;
    ls[6] = layer(CNN_LAYER_UPSAMPLING); /* (32, 15, 1) */
    ls[6].kh = 2;
    ls[7] = layer(CNN_LAYER_RESHAPE); /* (480,) */
    ls[7].target_c = 480;
    ls[8] = layer(CNN_LAYER_DENSE);
    ls[8].units = K;
    cnn_net_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.in_h = H;
    spec.in_w = W;
    spec.in_c = C;
    spec.max_batch = MB;
    spec.layers = ls;
    spec.n_layers = 9;
    spec.loss.kind = CNN_LOSS_SPARSE_CE;
    spec.loss.from_logits = 1;
    spec.optimizer.kind = CNN_OPT_SGD;
    spec.optimizer.lr = 0.01f;
    spec.seed = (uint64_t)cycle;
    cnn_net *net = NULL;
    CHECK(cnn_net_create(be, threads, &spec, &net));
    float loss, correct;
    double dloss, dcorrect;
    CHECK(cnn_net_train_batch(net, MB, x, labels, NULL, &loss, &correct));
    int32_t order[N];
    for (int i = 0; i < N; i++) order[i] = (i * 5 + cycle) % N;
    const cnn_host_array xa = {x, CNN_DTYPE_F32, "x", 0};
    CHECK(cnn_net_set_data(net, N, &xa, labels, NULL));
    CHECK(cnn_net_set_order(net, order));
    CHECK(cnn_net_train_range(net, 0, N, 5));
    CHECK(cnn_net_read_sums(net, 1, &dloss, &dcorrect));
    float *y = malloc((size_t)N * K * sizeof(float));
    CHECK(cnn_net_predict(net, N, &xa, y));
    float dy[MB * K];
    for (int i = 0; i < MB * K; i++) dy[i] = 0.01f * (float)(i % 7);
    float *dx = malloc((size_t)MB * H * W * C * sizeof(float));
    CHECK(cnn_net_forward(net, MB, x, 1, NULL));
    CHECK(cnn_net_backward(net, MB, dy, dx));
    cnn_net_destroy(net);
    /* refused while planning: a crop past the image, a reshape of another size */
    ls[3].pad[1] = 8;
    EXPECT_FAIL(cnn_net_create(be, threads, &spec, &net));
    ls[3].pad[1] = 1;
    ls[7].target_c = 481;
    EXPECT_FAIL(cnn_net_create(be, threads, &spec, &net));
    free(y);
    free(dx);
}

int main(int argc, char **argv)
{
    int cycles = argc > 1 ? atoi(argv[1]) : 10;
    static float x[N * H * W * C];
    static int32_t labels[N];
    for (int i = 0; i < N * H * W * C; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < N; i++) labels[i] = i % K;
    const char *names[] = {"cpu", "omp"};
    int engines = 0;
    for (int e = 0; e < 2; e++) {
        cnn_status st;
        const cnn_backend *be = cnn_backend_find(names[e], &st);
        if (!be) {
            printf("%s: not built (%s)\n", names[e], cnn_last_error());
            continue;
        }
        for (int c = 0; c < cycles; c++) {
            one_cycle(be, e == 0 ? 1 : 2, c, x, labels);
            shape_cycle(be, e == 0 ? 1 : 2, c, x, labels);
        }
        printf("%s: %d cycles\n", names[e], cycles);
        engines++;
    }
    return engines ? 0 : 3;
}
