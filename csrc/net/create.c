/* create.c: making a Net (cnn_net_create: validation, shapes, the engine
 * context, the plans, every buffer once, the initial weights) and destroying
 * it. */
#include "net_private.h"

#include <math.h>

static cnn_status net_alloc(cnn_net *net, void *pp, size_t bytes)
{
    void **p = pp;
    if (net->counting) {
        size_t add = bytes ? bytes : 4;
        net->planned = add > SIZE_MAX - net->planned ? SIZE_MAX : net->planned + add;
        return CNN_OK;
    }
    CNN_TRY(net->be->alloc(net->ctx, p, bytes ? bytes : 4));
    return net->be->zero(net->ctx, *p, bytes ? bytes : 4);
}

void cnn_net_destroy(cnn_net *net)
{
    if (!net) return;
    if (net->ctx) {
        const cnn_backend *be = net->be;
        cnn_ctx *ctx = net->ctx;
        if (net->recording) be->recording_free(ctx, net->recording);
        for (int i = 0; net->layers && i < net->n_layers; i++) {
            layer *L = &net->layers[i];
            if (L->y && !L->alias_in) be->free(ctx, L->y);
            if (L->dy && L->dy != net->grad_a) be->free(ctx, L->dy);
            if (L->ws) be->free(ctx, L->ws);
            if (L->argmax) be->free(ctx, L->argmax);
            if (L->save_mean) be->free(ctx, L->save_mean);
            if (L->save_invstd) be->free(ctx, L->save_invstd);
            if (L->rescale) be->free(ctx, L->rescale);
        }
        void *blocks[] = {net->params, net->grads,  net->opt_m,  net->opt_v,   net->opt_a, net->state,
                          net->x_stage, net->y_stage, net->grad_a, net->grad_b,
                          net->labels, net->targets, net->sums, net->run_sums,
                          net->counters, net->data_x, net->data_labels, net->data_targets, net->order,
                          net->val_x, net->val_labels, net->val_targets, net->val_sums,
                          net->head_ws, net->grad_x, net->part_t, net->part_dy,
                          net->part_scale, net->part_labels};
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++)
            if (blocks[k]) be->free(ctx, blocks[k]);
        if (net->x && net->x != net->x_stage) be->free(ctx, net->x);
        if (net->hyper) be->free(ctx, net->hyper);
        be->ctx_destroy(ctx);
    }
    for (int k = 0; k < PLAN_COUNT; k++) free(net->plans[k].steps);
    free(net->layers);
    free(net->weights);
    free(net);
}


static cnn_status validate_spec(const cnn_net_spec *spec)
{
    if (spec->max_batch < 1)
        return cnn_set_error(CNN_ERR_VALUE, "max_batch must be >= 1, got %d", spec->max_batch);
    if (spec->n_layers < 1 || !spec->layers)
        return cnn_set_error(CNN_ERR_VALUE, "a network needs at least one layer, got %d",
                             spec->n_layers);
    if (spec->in_c < 1 || spec->in_h < 0 || spec->in_w < 0 || (spec->in_h == 0) != (spec->in_w == 0))
        return cnn_set_error(CNN_ERR_VALUE,
                             "input shape must be (height, width, channels) or (features,) "
                             "with every size >= 1, got (%d, %d, %d)",
                             spec->in_h, spec->in_w, spec->in_c);
    for (int i = 0; i < spec->n_layers; i++) {
        const cnn_layer_spec *s = &spec->layers[i];
        const float f[4] = {s->kernel_l1, s->kernel_l2, s->bias_l1, s->bias_l2};
        for (int k = 0; k < 4; k++)
            if (!(f[k] >= 0.0f && f[k] < INFINITY))
                return cnn_set_error(CNN_ERR_VALUE, "layer %d: regularizer factors must be "
                                     "finite and >= 0, got %g", i, (double)f[k]);
        if ((f[0] || f[1] || f[2] || f[3]) && s->kind != CNN_LAYER_CONV2D &&
            s->kind != CNN_LAYER_DENSE)
            return cnn_set_error(CNN_ERR_VALUE, "layer %d: only conv2d and dense layers take "
                                 "regularizers", i);
    }
    const cnn_loss_desc *l = &spec->loss;
    if (l->kind < CNN_LOSS_SPARSE_CE || l->kind >= CNN_LOSS_KINDS)
        return cnn_set_error(CNN_ERR_VALUE, "unknown loss kind %d", l->kind);
    if (l->weighted && (l->kind == CNN_LOSS_SPARSE_CE || l->kind == CNN_LOSS_CATEGORICAL_CE))
        return cnn_set_error(CNN_ERR_VALUE, "loss: weighted targets are for the binary "
                             "cross-entropy and the regression losses, got loss kind %d",
                             l->kind);
    if (l->kind == CNN_LOSS_HUBER && !(l->delta > 0.0f && l->delta < INFINITY))
        return cnn_set_error(CNN_ERR_VALUE, "huber loss: delta must be finite and > 0, got %g",
                             (double)l->delta);
    return net_validate_optimizer(&spec->optimizer);
}

cnn_status net_validate_optimizer(const cnn_optimizer_desc *o)
{
    static const char *const names[] = CNN_OPT_NAMES;
    if (o->kind < 0 || o->kind >= CNN_OPT_KINDS)
        return cnn_set_error(CNN_ERR_VALUE, "unknown optimizer kind %d", o->kind);
    const char *name = names[o->kind];
    if (!(o->lr >= 0.0f) || !isfinite(o->lr))
        return cnn_set_error(CNN_ERR_VALUE, "learning_rate must be a finite number >= 0, got %g",
                             (double)o->lr);
    const int betas = o->kind == CNN_OPT_ADAM || o->kind == CNN_OPT_ADAMAX ||
                      o->kind == CNN_OPT_NADAM || o->kind == CNN_OPT_ADAMW;
    if (betas &&
        !(o->beta_1 >= 0.0f && o->beta_1 < 1.0f && o->beta_2 >= 0.0f && o->beta_2 < 1.0f &&
          o->epsilon >= 0.0f && isfinite(o->epsilon)))
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s needs beta_1 and beta_2 in [0, 1) and epsilon >= 0, got "
                             "beta_1 %g beta_2 %g epsilon %g", name,
                             (double)o->beta_1, (double)o->beta_2, (double)o->epsilon);
    if ((o->kind == CNN_OPT_SGD || o->kind == CNN_OPT_RMSPROP) &&
        !(o->momentum >= 0.0f && o->momentum <= 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s momentum must be in [0, 1], got %g", name,
                             (double)o->momentum);
    if ((o->kind == CNN_OPT_RMSPROP || o->kind == CNN_OPT_ADADELTA) &&
        !(o->rho >= 0.0f && o->rho <= 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s rho must be in [0, 1], got %g", name,
                             (double)o->rho);
    if ((o->kind == CNN_OPT_RMSPROP || o->kind == CNN_OPT_ADAGRAD ||
         o->kind == CNN_OPT_ADADELTA) && !(o->epsilon >= 0.0f && isfinite(o->epsilon)))
        return cnn_set_error(CNN_ERR_VALUE, "%s epsilon must be a finite number >= 0, got %g",
                             name, (double)o->epsilon);
    if (o->kind == CNN_OPT_ADAGRAD &&
        !(o->initial_accumulator_value >= 0.0f && isfinite(o->initial_accumulator_value)))
        return cnn_set_error(CNN_ERR_VALUE,
                             "adagrad initial_accumulator_value must be a finite number >= 0, "
                             "got %g", (double)o->initial_accumulator_value);
    if (o->kind == CNN_OPT_ADAMW && !(o->weight_decay >= 0.0f && isfinite(o->weight_decay)))
        return cnn_set_error(CNN_ERR_VALUE,
                             "adamw weight_decay must be a finite number >= 0, got %g",
                             (double)o->weight_decay);
    return CNN_OK;
}

/* Every buffer of the net, once; while net->counting, only adds up their
 * bytes in net->planned. */
static cnn_status alloc_buffers(cnn_net *net, size_t largest)
{
    cnn_status st;
    size_t mb = (size_t)net->max_batch;
    const size_t F = sizeof(float);
#define ALLOC(ptr, bytes) \
    if ((st = net_alloc(net, &(ptr), (bytes))) != CNN_OK) return st
    ALLOC(net->params, net->n_params * F);
    ALLOC(net->grads, net->n_params * F);
    switch (net->opt.kind) {
    case CNN_OPT_SGD:
        if (net->opt.momentum > 0.0f) ALLOC(net->opt_m, net->n_params * F);
        break;
    case CNN_OPT_ADAGRAD:
        ALLOC(net->opt_m, net->n_params * F);
        break;
    case CNN_OPT_RMSPROP:
        ALLOC(net->opt_m, net->n_params * F);
        if (net->opt.momentum > 0.0f) ALLOC(net->opt_v, net->n_params * F);
        if (net->opt.centered) ALLOC(net->opt_a, net->n_params * F);
        break;
    default: /* adam, adamw, adamax, nadam, adadelta */
        ALLOC(net->opt_m, net->n_params * F);
        ALLOC(net->opt_v, net->n_params * F);
    }
    ALLOC(net->state, net->n_state * F);
    ALLOC(net->x_stage, mb * net->in_count * F);
    if (net->transpose_in) {
        ALLOC(net->x, mb * net->in_count * F);
    } else {
        net->x = net->x_stage; /* the same bytes in either layout */
    }
    ALLOC(net->y_stage, mb * largest * F);
    ALLOC(net->grad_a, mb * largest * F);
    ALLOC(net->grad_b, mb * largest * F);
    ALLOC(net->labels, mb * (size_t)(net->loss.positions > 1 ? net->loss.positions : 1) *
                           sizeof(int32_t));
    ALLOC(net->targets, mb * net_target_elems(net) * F);
    ALLOC(net->sums, (size_t)net->n_sums * F);
    ALLOC(net->run_sums, (size_t)net->n_sums * F);
    if (net->n_parts) { /* one output's targets, labels, gradient at a time */
        size_t width = 0, rows = 0, count = 0, scales = 0;
        for (int j = 0; j < net->n_parts; j++) {
            const cnn_loss_part *p = &net->parts[j];
            const size_t pos = p->loss.positions > 1 ? (size_t)p->loss.positions : 1;
            if (net_part_target_width(p) > width) width = net_part_target_width(p);
            if (pos > rows) rows = pos;
            if (net->layers[net->part_src[j]].out_count > count)
                count = net->layers[net->part_src[j]].out_count;
            scales += (size_t)p->loss.k;
        }
        ALLOC(net->part_t, mb * width * F);
        ALLOC(net->part_labels, mb * rows * sizeof(int32_t));
        ALLOC(net->part_dy, mb * count * F);
        ALLOC(net->part_scale, scales * F);
    }
    ALLOC(net->counters, CNN_COUNTERS * sizeof(int64_t));
    ALLOC(net->hyper, CNN_HYPERS * F);
    if (net->head >= 0) ALLOC(net->head_ws, CNN_HEAD_WS_BYTES(mb, net->loss.k));
    if (net->graph) ALLOC(net->grad_x, mb * net->in_count * F);
    for (int i = 0; i < net->n_layers; i++) {
        layer *L = &net->layers[i];
        if (L->alias_in) {
            L->y = i ? net->layers[i - 1].y : net->x; /* NULL while counting */
        } else {
            ALLOC(L->y, mb * L->out_count * F);
        }
        if (L->spec.kind == CNN_LAYER_CONV2D) {
            cnn_conv_desc d = L->conv;
            d.n = net->max_batch;
            ALLOC(L->ws, net->be->conv2d_workspace(&d));
        }
        if (L->spec.kind == CNN_LAYER_MAXPOOL) ALLOC(L->argmax, mb * L->out_count * sizeof(int32_t));
        if (L->spec.kind == CNN_LAYER_RESCALING) ALLOC(L->rescale, 2 * (size_t)L->in_c * F);
        if (net->graph) {
            if (i == net->n_layers - 1)
                L->dy = net->grad_a; /* where the loss writes its gradient */
            else
                ALLOC(L->dy, mb * L->out_count * F);
        }
        if (L->spec.kind == CNN_LAYER_BATCHNORM) {
            ALLOC(L->save_mean, (size_t)L->in_c * F);
            ALLOC(L->save_invstd, (size_t)L->in_c * F);
        }
    }
#undef ALLOC
    return CNN_OK;
}

/* The machine's physical memory in bytes when `be` keeps its buffers in
 * host memory (cpu, omp), else 0 (a GPU engine's cudaMalloc fails cleanly). */
static size_t host_memory_bytes(const cnn_backend *be)
{
    if (strcmp(be->name, "cpu") != 0 && strcmp(be->name, "omp") != 0) return 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

cnn_status cnn_net_create(const cnn_backend *backend, int num_threads, const cnn_net_spec *spec,
                          cnn_net **out)
{
    *out = NULL;
    CNN_TRY(validate_spec(spec));
    cnn_net *net = calloc(1, sizeof *net);
    if (!net) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
    net->be = backend;
    cnn_status st = net_plan_switches(&net->sw);
    if (st != CNN_OK) {
        free(net);
        return st;
    }
    net->n_layers = spec->n_layers;
    net->max_batch = spec->max_batch;
    net->loss = spec->loss;
    net->n_sums = 2;
    if (spec->n_parts < 0 || spec->n_parts > CNN_MAX_OUTPUTS || spec->n_parts == 1) {
        free(net);
        return cnn_set_error(CNN_ERR_VALUE, "loss: expected 2 to %d outputs' losses, got %d",
                             CNN_MAX_OUTPUTS, spec->n_parts);
    }
    net->n_parts = spec->n_parts;
    for (int j = 0; j < spec->n_parts; j++) net->parts[j] = spec->parts[j];
    net->opt = spec->optimizer;
    net->seed = spec->seed;
    net->in_rank = spec->in_h ? 4 : 2;
    net->in_h = spec->in_h ? spec->in_h : 1;
    net->in_w = spec->in_w ? spec->in_w : 1;
    net->in_c = spec->in_c;
    if ((double)spec->max_batch * net->in_h * net->in_w * net->in_c > CNN_MAX_COUNT) {
        st = cnn_set_error(CNN_ERR_VALUE,
                           "input: max_batch %d times %.0f values per sample is too large",
                           spec->max_batch, (double)net->in_h * net->in_w * net->in_c);
        goto fail;
    }
    net->in_count = (size_t)net->in_h * net->in_w * net->in_c;
    net->transpose_in = net->in_rank == 4 && net->in_c > 1 && (size_t)net->in_h * net->in_w > 1;
    net->layers = calloc((size_t)spec->n_layers, sizeof *net->layers);
    net->weights = calloc(4 * (size_t)spec->n_layers, sizeof *net->weights);
    if (!net->layers || !net->weights) {
        st = cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
        goto fail;
    }

    /* shapes, parameter offsets, the largest activation and workspace */
    size_t n_params = 0, n_state = 0, largest = net->in_count;
    for (int i = 0; i < net->n_layers; i++) {
        layer *L = &net->layers[i];
        L->spec = spec->layers[i];
        if ((st = net_graph_inputs(net, i)) != CNN_OK) goto fail;
        const layer *prev = L->in[0] >= 0 ? &net->layers[L->in[0]] : NULL;
        L->in_rank = prev ? prev->out_rank : net->in_rank;
        L->in_c = prev ? prev->out_c : net->in_c;
        L->in_h = prev ? prev->out_h : net->in_h;
        L->in_w = prev ? prev->out_w : net->in_w;
        if ((st = net_plan_layer(net, i, &n_params, &n_state)) != CNN_OK) goto fail;
        if (L->out_count > largest) largest = L->out_count;
        if ((size_t)spec->max_batch * L->out_count > (size_t)INT32_MAX) {
            st = cnn_set_error(CNN_ERR_VALUE,
                               "layer %d (%s): max_batch %d times %zu outputs per sample is too "
                               "large",
                               i, net_kind_name(L->spec.kind), spec->max_batch, L->out_count);
            goto fail;
        }
    }
    if ((st = net_graph_plan(net)) != CNN_OK) goto fail; /* a graph: no fusion */
    net_plan_flatten(net); /* before the buffers: an aliased Flatten has none */
    const layer *last = &net->layers[net->n_layers - 1];
    net->out_count = last->out_count;
    /* the loss along the output's last axis (Keras's channels): an image
     * output is h w rows of c per sample */
    net->loss.k = last->out_c;
    net->loss.positions = last->out_rank == 4 ? last->out_h * last->out_w : 1;
    if (net->loss.weighted && last->out_rank == 4) {
        st = cnn_set_error(CNN_ERR_VALUE, "loss: weighted targets need an output of one "
                           "position per sample, the last layer gives (batch, %d, %d, %d)",
                           last->out_h, last->out_w, last->out_c);
        goto fail;
    }
    if (net->n_parts && (st = net_parts_setup(net)) != CNN_OK) goto fail;
    net->n_params = n_params;
    net->n_state = n_state;

    if ((st = backend->ctx_create(&net->ctx, num_threads, spec->device)) != CNN_OK) goto fail;
    net->ctx->precision = spec->precision;
    net->loss_scaling = spec->loss_scale > 0.0f;

    if ((st = net_plan(net)) != CNN_OK) goto fail;

    /* every buffer, once. A first pass adds up the bytes: on a host engine
     * a network larger than the machine's memory is refused before anything
     * is allocated (Linux would hand the memory out, then kill the process
     * when the buffers are zeroed). */
    net->counting = 1;
    st = alloc_buffers(net, largest);
    net->counting = 0;
    if (st != CNN_OK) goto fail;
    size_t memory = host_memory_bytes(backend);
    if (memory && net->planned > memory) {
        st = cnn_set_error(CNN_ERR_MEMORY,
                           "out of memory: this network needs %zu bytes of buffers for "
                           "max_batch %d on the %s engine, more than this machine's %zu bytes",
                           net->planned, net->max_batch, backend->name, memory);
        goto fail;
    }
    if ((st = alloc_buffers(net, largest)) != CNN_OK) goto fail;

    net_list_weights(net);
    if ((st = net_upload_hyper(net)) != CNN_OK) goto fail;
    /* the loss scaling's state; without it S = 1 and the skip flag 0, which
     * every optimizer reads */
    if ((st = cnn_net_set_loss_scale(net, net->loss_scaling ? spec->loss_scale : 1.0f, 0,
                                     net->loss_scaling ? spec->loss_scale_growth_steps : 1)) !=
        CNN_OK)
        goto fail;
    if ((st = net_initialize_weights(net)) != CNN_OK) goto fail;
    if ((st = net_shape_upload(net)) != CNN_OK) goto fail;
    if ((st = net_parts_upload(net)) != CNN_OK) goto fail;
    *out = net;
    return CNN_OK;
fail:
    cnn_net_destroy(net);
    return st;
}

void cnn_net_output_shape(const cnn_net *net, int *rank, int dims[3])
{
    const layer *last = &net->layers[net->n_layers - 1];
    *rank = last->out_rank;
    dims[0] = last->out_rank == 4 ? last->out_h : last->out_c;
    dims[1] = last->out_w;
    dims[2] = last->out_c;
}

int cnn_net_max_batch(const cnn_net *net) { return net->max_batch; }
long cnn_net_step_count(const cnn_net *net)
{
    if (!net->loss_scaling) return net->steps;
    /* skipped steps are known in the engine alone */
    int64_t steps = net->steps;
    if (net->be->download(net->ctx, &steps, net->counters + CNN_COUNT_STEPS, sizeof steps) != CNN_OK)
        return net->steps;
    return (long)steps;
}
