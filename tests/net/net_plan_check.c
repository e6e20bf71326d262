/* net_plan_check.c: prints the steps a Net plans for a training step (cnn.h
 * cnn_net_plan_length, cnn_net_plan_step_name) on the cpu engine.
 *
 * Built and run by tests/test_net_plan.py from the C sources of csrc and
 * csrc/cpu, no Python. The network is given on the command line, one argument a layer,
 * after the input shape and the loss:
 *   net_plan_check H W C LOSS FROM_LOGITS LAYER...
 * LOSS: sparse, categorical or binary; LAYER: conv:UNITS:K[:same], maxpool:K,
 * avgpool:K, flatten, dense:UNITS, act:relu|sigmoid|tanh|softmax|linear,
 * batchnorm, dropout:RATE. Prints "forward: NAME NAME ..." and
 * "backward: NAME ...", one line each; exits non-zero on an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"
#include "cpu/cpu.h"

#define MAX_LAYERS 64

static int activation_of(const char *name)
{
    static const char *names[] = {"linear", "relu", "sigmoid", "tanh", "softmax"};
    for (int a = 0; a < 5; a++)
        if (strcmp(name, names[a]) == 0) return a;
    fprintf(stderr, "unknown activation '%s'\n", name);
    exit(2);
}

/* One layer from its argument, as the usage above says. */
static cnn_layer_spec parse_layer(const char *arg)
{
    cnn_layer_spec s = {.use_bias = 1, .momentum = 0.99f, .epsilon = 1e-3f, .sh = 1, .sw = 1};
    char kind[32] = "", rest[64] = "";
    sscanf(arg, "%31[^:]:%63s", kind, rest);
    if (strcmp(kind, "conv") == 0) {
        char pad[16] = "";
        s.kind = CNN_LAYER_CONV2D;
        sscanf(rest, "%d:%d:%15s", &s.units, &s.kh, pad);
        s.kw = s.kh;
        s.same = strcmp(pad, "same") == 0;
    } else if (strcmp(kind, "maxpool") == 0 || strcmp(kind, "avgpool") == 0) {
        s.kind = kind[0] == 'm' ? CNN_LAYER_MAXPOOL : CNN_LAYER_AVGPOOL;
        s.kh = s.kw = s.sh = s.sw = atoi(rest);
    } else if (strcmp(kind, "flatten") == 0) {
        s.kind = CNN_LAYER_FLATTEN;
    } else if (strcmp(kind, "dense") == 0) {
        s.kind = CNN_LAYER_DENSE;
        s.units = atoi(rest);
    } else if (strcmp(kind, "act") == 0) {
        s.kind = CNN_LAYER_ACTIVATION;
        s.activation = activation_of(rest);
    } else if (strcmp(kind, "batchnorm") == 0) {
        s.kind = CNN_LAYER_BATCHNORM;
    } else if (strcmp(kind, "dropout") == 0) {
        s.kind = CNN_LAYER_DROPOUT;
        s.rate = (float)atof(rest);
    } else {
        fprintf(stderr, "unknown layer '%s'\n", arg);
        exit(2);
    }
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 7 || argc - 6 > MAX_LAYERS) {
        fprintf(stderr, "usage: net_plan_check H W C LOSS FROM_LOGITS LAYER...\n");
        return 2;
    }
    cnn_layer_spec layers[MAX_LAYERS];
    const int n = argc - 6;
    for (int i = 0; i < n; i++) layers[i] = parse_layer(argv[6 + i]);
    const char *loss = argv[4];
    cnn_net_spec spec = {
        .in_h = atoi(argv[1]), .in_w = atoi(argv[2]), .in_c = atoi(argv[3]), .max_batch = 2,
        .layers = layers, .n_layers = n,
        .loss = {.kind = strcmp(loss, "sparse") == 0        ? CNN_LOSS_SPARSE_CE
                         : strcmp(loss, "categorical") == 0 ? CNN_LOSS_CATEGORICAL_CE
                                                            : CNN_LOSS_BINARY_CE,
                 .from_logits = atoi(argv[5])},
        .optimizer = {.kind = CNN_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                      .epsilon = 1e-7f},
        .seed = 1};
    cnn_net *net = NULL;
    if (cnn_net_create(&cnn_backend_cpu, 1, &spec, &net) != CNN_OK) {
        fprintf(stderr, "cnn_net_create: %s\n", cnn_last_error());
        return 1;
    }
    for (int backward = 0; backward < 2; backward++) {
        printf("%s:", backward ? "backward" : "forward");
        const int len = cnn_net_plan_length(net, backward);
        for (int i = 0; i < len; i++) printf(" %s", cnn_net_plan_step_name(net, backward, i));
        if (cnn_net_plan_step_name(net, backward, len) != NULL) {
            fprintf(stderr, "a name past the plan's end\n");
            return 1;
        }
        printf("\n");
    }
    cnn_net_destroy(net);
    return 0;
}
