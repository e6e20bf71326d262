/* graph.c: Nets whose layers form a graph rather than a chain (Keras's
 * functional models with Add and Concatenate: a residual block, branches
 * joined along the channels).
 *
 * Each layer names the outputs it reads (cnn_layer_spec.inputs; a chain's
 * layer reads the one before it). The layers come in an order where each
 * reads only earlier ones, and the last is the network's output, so the
 * forward plan runs them in their order as for a chain (plan.c, run.c: a
 * layer's input is net_layer_input). The backward plan runs them in the
 * reverse order; each layer's output gradient has its own buffer
 * (layer.dy; the last layer's is grad_a, where the loss writes), complete
 * once every layer that reads the output has run its backward, since those
 * come later in the order. A step writing the gradient of an input that an
 * earlier step of the plan has written already (the output is read by
 * several layers, or twice by one) writes into grad_b and adds it on
 * (be->add; an Add layer's backward adds its output's gradient on
 * directly), so the sums run in a fixed order: the readers' order, last
 * first. A graph's Net plans no fusion (the planning rules read their
 * neighbours in the list as a chain's): net_graph_plan turns them off.
 */
#include "net_private.h"

static int is_merge(int kind) { return kind == CNN_LAYER_ADD || kind == CNN_LAYER_CONCAT; }

/* Layer i's inputs from its spec, checked: each an earlier layer or -1
 * (the network's input); one for every kind but Add and Concatenate. */
cnn_status net_graph_inputs(cnn_net *net, int i)
{
    layer *L = &net->layers[i];
    const cnn_layer_spec *s = &L->spec;
    const char *name = net_kind_name(s->kind);
    if (s->n_inputs == 0) { /* a chain's: the layer before */
        L->n_in = 1;
        L->in[0] = i - 1;
    } else {
        if (s->n_inputs < 0 || s->n_inputs > CNN_MAX_INPUTS)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): expected 1 to %d inputs, got %d", i, name,
                                 CNN_MAX_INPUTS, s->n_inputs);
        L->n_in = s->n_inputs;
        for (int k = 0; k < L->n_in; k++) {
            const int j = s->inputs[k];
            if (j < -1 || j >= i)
                return cnn_set_error(CNN_ERR_VALUE,
                                     "layer %d (%s): input %d is layer %d; a layer reads the "
                                     "network's input (-1) or an earlier layer (0 to %d)",
                                     i, name, k, j, i - 1);
            L->in[k] = j;
        }
    }
    if (is_merge(s->kind) && L->n_in < 2)
        return cnn_set_error(CNN_ERR_VALUE, "layer %d (%s) needs at least 2 inputs, got %d", i,
                             name, L->n_in);
    if (!is_merge(s->kind) && L->n_in != 1)
        return cnn_set_error(CNN_ERR_VALUE, "layer %d (%s) takes one input, got %d", i, name,
                             L->n_in);
    return CNN_OK;
}

/* Whether the layers form a graph (net->graph); every output but the
 * last layer's must be read. A graph's Net plans no fusion. Before the
 * buffers are sized. */
cnn_status net_graph_plan(cnn_net *net)
{
    const int n = net->n_layers;
    int *readers = calloc((size_t)n + 1, sizeof *readers); /* [0]: the input's */
    if (!readers) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
    net->graph = 0;
    for (int i = 0; i < n; i++) {
        const layer *L = &net->layers[i];
        if (L->n_in != 1 || L->in[0] != i - 1) net->graph = 1;
        for (int k = 0; k < L->n_in; k++) readers[L->in[k] + 1]++;
    }
    for (int j = 0; j < n; j++) {
        if (readers[j + 1] > 1) net->graph = 1;
        if (j < n - 1 && readers[j + 1] == 0) {
            free(readers);
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): its output is read by no layer; the last layer "
                                 "(%d) is the network's output",
                                 j, net_kind_name(net->layers[j].spec.kind), n - 1);
        }
    }
    free(readers);
    if (net->graph) {
        cnn_switches *sw = &net->sw;
        sw->fuse = sw->fuse_dense = sw->fuse_flatten = sw->fuse_head = sw->fuse_softmax = 0;
        sw->fuse_pool_col2im = sw->fuse_gather_im2col = 0;
    }
    return CNN_OK;
}

static int has_weights(const layer *L)
{
    return L->w_off != NO_OFFSET || L->gamma_off != NO_OFFSET || L->alpha_off != NO_OFFSET ||
           L->mean_off != NO_OFFSET;
}

/* Whether a layer with weights is upstream of layer i (planned already):
 * one of the layers its inputs come from, theirs, and so on. */
int net_graph_weights_above(const cnn_net *net, int i)
{
    int found = 0, top = 0;
    int *stack = malloc(((size_t)i + 1) * sizeof *stack);
    unsigned char *seen = calloc((size_t)i + 1, 1);
    if (!stack || !seen) {
        free(stack);
        free(seen);
        return 1; /* out of memory: refuse rather than guess */
    }
    stack[top++] = i;
    while (top > 0 && !found) {
        const layer *L = &net->layers[stack[--top]];
        for (int k = 0; k < L->n_in; k++) {
            const int j = L->in[k];
            if (j < 0 || seen[j]) continue;
            seen[j] = 1;
            if (has_weights(&net->layers[j])) found = 1;
            stack[top++] = j;
        }
    }
    free(stack);
    free(seen);
    return found;
}

/* Whether a gradient passes back into layer j's output: not into an input
 * slice or an augmentation layer. */
static int passes_back(const cnn_net *net, int j)
{
    const int kind = net->layers[j].spec.kind;
    return kind != CNN_LAYER_INPUT_SLICE && !cnn_layer_is_augment(kind);
}

/* Appends a graph backward step writing the gradient of input k of layer i
 * (`written`: which outputs' gradients have a step already, [j + 1]). */
static step *graph_step(const cnn_net *net, step_plan *p, step_kind kind, int i, int k,
                        unsigned char *written)
{
    step *st = &p->steps[p->n++];
    *st = (step){.kind = kind, .layer = i, .last = i, .input = k};
    const char *what = kind == STEP_CONV_BACKWARD_FILTER || kind == STEP_DENSE_BACKWARD_FILTER
                           ? "backward_filter"
                       : kind == STEP_CONV_BACKWARD_DATA || kind == STEP_DENSE_BACKWARD_DATA
                           ? "backward_data"
                           : "backward";
    if (net->layers[i].n_in > 1)
        snprintf(st->name, sizeof st->name, "%s_%d.%s%d", net_kind_name(net->layers[i].spec.kind),
                 i, what, k);
    else
        snprintf(st->name, sizeof st->name, "%s_%d.%s", net_kind_name(net->layers[i].spec.kind),
                 i, what);
    if (written && kind != STEP_CONV_BACKWARD_FILTER && kind != STEP_DENSE_BACKWARD_FILTER) {
        const int j = net->layers[i].in[k];
        st->acc = written[j + 1];
        written[j + 1] = 1;
    }
    return st;
}

/* Whether the gradient of input k of layer i is wanted: see
 * net_graph_plan_backward. */
static int wanted(const cnn_net *net, int i, int k, int floor, int want_dx)
{
    const int j = net->layers[i].in[k];
    if (j < 0) return want_dx;
    return net_has_slices(net) ? passes_back(net, j) : j >= floor;
}

/* A graph's backward: layers n - 1 down to 0, each input's gradient
 * written or added on (see the top of the file); want_dx, the network
 * input's gradient too (into grad_x). Where no gradient is wanted: a
 * network of one input stops at its floor (below its augmentation layers
 * no layer has weights); a network of several inputs follows each path
 * back from the output and stops at the input slices and augmentation
 * layers (no layer upstream of those has weights: shapes.c, augment.c),
 * so a branch's augmentation layer may come after another branch's
 * weights in the order. */
cnn_status net_graph_plan_backward(const cnn_net *net, step_plan *p, int want_dx)
{
    const int n = net->n_layers;
    unsigned char *w = calloc((size_t)n + 1, 1);
    unsigned char *reached = calloc((size_t)n + 1, 1);
    if (!w || !reached) {
        free(w);
        free(reached);
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
    }
    p->n = 0;
    const int sliced = net_has_slices(net);
    /* below an augmentation layer no layer has weights: no gradient is
     * wanted there unless the input's is (which cnn_net_backward refuses) */
    const int floor = want_dx || sliced ? 0 : net->aug_floor;
    reached[n - 1] = 1;
    for (int i = n - 1; i >= floor; i--) {
        const layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        if (sliced) {
            if (!reached[i]) continue; /* no gradient comes back to its output */
            for (int k = 0; k < L->n_in; k++)
                if (L->in[k] >= 0 && wanted(net, i, k, floor, want_dx)) reached[L->in[k]] = 1;
        }
        /* input 0's gradient is wanted: another layer's above the floor, or
         * the network input's where want_dx */
        const int need = wanted(net, i, 0, floor, want_dx);
        switch (s->kind) {
        case CNN_LAYER_CONV2D:
            graph_step(net, p, STEP_CONV_BACKWARD_FILTER, i, 0, NULL)->with_db = s->use_bias;
            if (need) graph_step(net, p, STEP_CONV_BACKWARD_DATA, i, 0, w);
            break;
        case CNN_LAYER_MAXPOOL:
        case CNN_LAYER_AVGPOOL:
            if (need) graph_step(net, p, STEP_POOL_BACKWARD, i, 0, w);
            break;
        case CNN_LAYER_FLATTEN:
            if (need) graph_step(net, p, STEP_FLATTEN_BACKWARD, i, 0, w);
            break;
        case CNN_LAYER_DENSE:
            graph_step(net, p, STEP_DENSE_BACKWARD_FILTER, i, 0, NULL)->with_db = s->use_bias;
            if (need) graph_step(net, p, STEP_DENSE_BACKWARD_DATA, i, 0, w);
            break;
        case CNN_LAYER_ACTIVATION:
            if (need) graph_step(net, p, STEP_ACTIVATION_BACKWARD, i, 0, w);
            break;
        case CNN_LAYER_DROPOUT:
            if (need) graph_step(net, p, STEP_DROPOUT_BACKWARD, i, 0, w);
            break;
        case CNN_LAYER_BATCHNORM: /* always: it writes dgamma and dbeta too */
            graph_step(net, p, STEP_BATCHNORM_BACKWARD, i, 0, need ? w : NULL);
            break;
        case CNN_LAYER_PRELU: /* always: it writes dalpha too (dx where wanted: swap) */
            graph_step(net, p, STEP_PRELU_BACKWARD, i, 0, need ? w : NULL)->swap = need;
            break;
        case CNN_LAYER_ADD:
        case CNN_LAYER_CONCAT:
            for (int k = 0; k < L->n_in; k++)
                if (wanted(net, i, k, floor, want_dx))
                    graph_step(net, p,
                               s->kind == CNN_LAYER_ADD ? STEP_ADD_BACKWARD : STEP_CONCAT_BACKWARD,
                               i, k, w);
            break;
        default:
            if (s->kind >= CNN_LAYER_SHAPE_FIRST && s->kind <= CNN_LAYER_SHAPE_LAST && need)
                graph_step(net, p, STEP_SHAPE_BACKWARD, i, 0, w);
            break; /* an augmentation layer or an input slice: no backward */
        }
    }
    free(w);
    free(reached);
    return CNN_OK;
}

/* Concatenate layer i's inputs into y (n samples). */
cnn_status net_concat_forward(cnn_net *net, int i, int n, float *y)
{
    const layer *L = &net->layers[i];
    const int hw = L->out_h * L->out_w;
    int offset = 0;
    for (int k = 0; k < L->n_in; k++) {
        const int j = L->in[k];
        const int c = j >= 0 ? net->layers[j].out_c : net->in_c;
        CNN_TRY(net->be->concat_forward(net->ctx, n, c, hw, L->out_c, offset,
                                        net_layer_input(net, i, k), y));
        offset += c;
    }
    return CNN_OK;
}

/* The channel where input k of Concatenate layer i starts in its output. */
static int concat_offset(const cnn_net *net, int i, int k)
{
    const layer *L = &net->layers[i];
    int offset = 0;
    for (int q = 0; q < k; q++) offset += L->in[q] >= 0 ? net->layers[L->in[q]].out_c : net->in_c;
    return offset;
}

/* Runs a graph's backward plan after the last training forward, from the
 * gradient of the last layer's output in grad_a; fills the gradient block,
 * and with PLAN_BACKWARD_DX the input's gradient (*dx_out: grad_x). */
cnn_status net_graph_backward(cnn_net *net, plan_kind which, float **dx_out)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const step_plan *p = &net->plans[which];
    const int n = net->last_n;
    for (int q = 0; q < p->n; q++) {
        const step *st = &p->steps[q];
        if (net->prof) CNN_TRY(net_profile_mark(net, st->name));
        const int i = st->layer, k = st->input;
        layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const float *in = net_layer_input(net, i, k);
        const float *dy = L->dy;
        const int j = L->in[k];
        /* where the input's gradient goes: its buffer, or grad_b to be added on
         * (or, for a batchnorm whose input gradient nobody wants, grad_b alone) */
        float *target = j >= 0 ? net->layers[j].dy : net->grad_x;
        float *dx = st->acc || (s->kind == CNN_LAYER_BATCHNORM && j < 0 && which != PLAN_BACKWARD_DX)
                        ? net->grad_b
                        : target;
        size_t count = j >= 0 ? net->layers[j].out_count : net->in_count;
        switch (st->kind) {
        case STEP_CONV_BACKWARD_FILTER:
        case STEP_DENSE_BACKWARD_FILTER: /* the weights' gradients only */
            CNN_TRY(net_backward_step(net, st, n, in, dy, NULL));
            continue;
        case STEP_BATCHNORM_BACKWARD:
            CNN_TRY(net_backward_step(net, st, n, in, dy, dx));
            if (dx != target && !st->acc) continue; /* nobody wants it */
            break;
        case STEP_PRELU_BACKWARD:
            CNN_TRY(net_backward_step(net, st, n, in, dy, st->swap ? dx : NULL));
            if (!st->swap) continue; /* only dalpha */
            break;
        case STEP_CONV_BACKWARD_DATA:
        case STEP_POOL_BACKWARD:
        case STEP_FLATTEN_BACKWARD:
        case STEP_DENSE_BACKWARD_DATA:
        case STEP_ACTIVATION_BACKWARD:
        case STEP_DROPOUT_BACKWARD:
        case STEP_SHAPE_BACKWARD:
            CNN_TRY(net_backward_step(net, st, n, in, dy, dx));
            break;
        case STEP_ADD_BACKWARD: /* the output's gradient itself, or added on */
            if (st->acc)
                CNN_TRY(be->add(ctx, n, (int)count, target, dy, target));
            else
                CNN_TRY(be->copy(ctx, dx, dy, (size_t)n * count * sizeof(float)));
            continue;
        case STEP_CONCAT_BACKWARD: {
            const int c = j >= 0 ? net->layers[j].out_c : net->in_c;
            CNN_TRY(be->concat_backward(ctx, n, c, L->out_h * L->out_w, L->out_c,
                                        concat_offset(net, i, k), dy, dx));
            break;
        }
        default:
            return cnn_set_error(CNN_ERR_INTERNAL, "step %s: not a backward step", st->name);
        }
        if (st->acc) CNN_TRY(be->add(ctx, n, (int)count, target, net->grad_b, target));
    }
    if (dx_out) *dx_out = net->grad_x;
    net->last_n = 0; /* a backward consumes its forward: workspaces now hold its gradients */
    return CNN_OK;
}
