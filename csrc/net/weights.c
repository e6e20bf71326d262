/* weights.c: a Net's weights: their list (cnn_net_weight: trainable unless
 * the layer is frozen, their regularizers), their places in the parameter
 * block and their Keras layouts at the edges (get, set), the regularizers'
 * penalties (net_regularize), the optimizer's slots and hyperparameters,
 * and their initial values: Keras's defaults (RNG stream 2i for layer i);
 * other initializers are drawn by the caller and set (Python: cnncuda/
 * initializers.py, one draw for every engine). */
#include <math.h>

#include "net_private.h"

/* Appends weight `info` (its count worked out from its dims). */
static void add_weight(cnn_net *net, cnn_weight_info info)
{
    info.count = 1;
    for (int k = 0; k < info.rank; k++) info.count *= (size_t)info.dims[k];
    net->weights[net->n_weights++] = info;
}

void net_list_weights(cnn_net *net)
{
    for (int i = 0; i < net->n_layers; i++) {
        const layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        if (s->kind == CNN_LAYER_CONV2D || s->kind == CNN_LAYER_DENSE) {
            const int conv = s->kind == CNN_LAYER_CONV2D;
            add_weight(net, (cnn_weight_info){
                                .layer = i, .role = CNN_WEIGHT_KERNEL, .trainable = !s->frozen,
                                .rank = conv ? 4 : 2,
                                .dims = {conv ? s->kh : L->in_c, conv ? s->kw : s->units,
                                         conv ? L->in_c : 0, conv ? s->units : 0},
                                .l1 = s->kernel_l1, .l2 = s->kernel_l2});
            if (s->use_bias)
                add_weight(net, (cnn_weight_info){.layer = i, .role = CNN_WEIGHT_BIAS,
                                                  .trainable = !s->frozen, .rank = 1,
                                                  .dims = {s->units}, .l1 = s->bias_l1,
                                                  .l2 = s->bias_l2});
        } else if (s->kind == CNN_LAYER_BATCHNORM) {
            const cnn_weight_role roles[] = {CNN_WEIGHT_GAMMA, CNN_WEIGHT_BETA,
                                             CNN_WEIGHT_MOVING_MEAN, CNN_WEIGHT_MOVING_VAR};
            for (int k = 0; k < 4; k++)
                add_weight(net, (cnn_weight_info){
                                    .layer = i, .role = roles[k],
                                    .trainable = !s->frozen && (roles[k] == CNN_WEIGHT_GAMMA ||
                                                                roles[k] == CNN_WEIGHT_BETA),
                                    .rank = 1, .dims = {L->in_c}});
        } else if (s->kind == CNN_LAYER_PRELU) {
            const cnn_prelu_desc *p = &L->prelu;
            if (L->in_rank == 4)
                add_weight(net, (cnn_weight_info){.layer = i, .role = CNN_WEIGHT_ALPHA,
                                                  .trainable = 1, .rank = 3,
                                                  .dims = {p->ah, p->aw, p->ac}});
            else
                add_weight(net, (cnn_weight_info){.layer = i, .role = CNN_WEIGHT_ALPHA,
                                                  .trainable = 1, .rank = 1, .dims = {p->ac}});
        }
    }
}

/* How a weight is stored against Keras's layout. */
enum { LAYOUT_KERAS = 0, LAYOUT_CONV = 1 /* (F, C, KH, KW) for (KH, KW, C, F) */,
       LAYOUT_NCHW_ROWS = 2 /* a dense kernel's rows in NCHW feature order (layer.rows_c) */,
       LAYOUT_CHW = 3 /* a PReLU alpha (C, H, W) for Keras's (H, W, C) */ };

/* Where weight i lives: the block, its offset, and its layout. */
static float *weight_place(cnn_net *net, float *trainable_block, int i, int *layout)
{
    const cnn_weight_info *w = &net->weights[i];
    const layer *L = &net->layers[w->layer];
    *layout = w->role == CNN_WEIGHT_ALPHA
                  ? (w->rank == 3 && w->dims[2] > 1 && (size_t)w->dims[0] * w->dims[1] > 1
                         ? LAYOUT_CHW
                         : LAYOUT_KERAS)
              : w->role != CNN_WEIGHT_KERNEL ? LAYOUT_KERAS
              : L->spec.kind == CNN_LAYER_CONV2D ? LAYOUT_CONV
              : L->rows_c ? LAYOUT_NCHW_ROWS : LAYOUT_KERAS;
    switch (w->role) {
    case CNN_WEIGHT_ALPHA: return trainable_block + L->alpha_off;
    case CNN_WEIGHT_KERNEL: return trainable_block + L->w_off;
    case CNN_WEIGHT_BIAS: return trainable_block + L->b_off;
    case CNN_WEIGHT_GAMMA: return trainable_block + L->gamma_off;
    case CNN_WEIGHT_BETA: return trainable_block + L->beta_off;
    case CNN_WEIGHT_MOVING_MEAN: return net->state + L->mean_off;
    default: return net->state + L->var_off; /* CNN_WEIGHT_MOVING_VAR */
    }
}

/* The offset of weight i in the parameter block, or NO_OFFSET for the
 * state's (batchnorm's moving statistics). */
size_t net_weight_offset(const cnn_net *net, int i)
{
    const cnn_weight_info *w = &net->weights[i];
    const layer *L = &net->layers[w->layer];
    switch (w->role) {
    case CNN_WEIGHT_KERNEL: return L->w_off;
    case CNN_WEIGHT_BIAS: return L->b_off;
    case CNN_WEIGHT_GAMMA: return L->gamma_off;
    case CNN_WEIGHT_BETA: return L->beta_off;
    case CNN_WEIGHT_ALPHA: return L->alpha_off;
    default: return NO_OFFSET;
    }
}

/* The regularizers' penalties: each regularized weight's gradient in grads
 * (NULL: none) gets the penalty's gradient, and sums[0] (NULL: none) scale
 * times the penalty (Keras adds it to the batch's mean loss; the sums hold
 * the batch's sum). Only trainable weights count, as in Keras 3 (a layer's
 * losses are its trainable weights' penalties). */
cnn_status net_regularize(cnn_net *net, float scale, float *grads, float *sums)
{
    for (int i = 0; i < net->n_weights; i++) {
        const cnn_weight_info *w = &net->weights[i];
        const size_t off = net_weight_offset(net, i);
        if ((w->l1 == 0.0f && w->l2 == 0.0f) || off == NO_OFFSET || !w->trainable) continue;
        CNN_TRY(net->be->regularize(net->ctx, w->count, w->l1, w->l2, scale, net->params + off,
                                    grads ? grads + off : NULL, sums));
    }
    return CNN_OK;
}

/* (KH, KW, C, F) <-> (F, C, KH, KW) on the host. */
static void keras_to_fckk(const float *k, float *o, int kh, int kw, int c, int f)
{
    for (int a = 0; a < kh; a++)
        for (int b = 0; b < kw; b++)
            for (int ch = 0; ch < c; ch++)
                for (int fi = 0; fi < f; fi++)
                    o[(((size_t)fi * c + ch) * kh + a) * kw + b] =
                        k[(((size_t)a * kw + b) * c + ch) * f + fi];
}

static void fckk_to_keras(const float *o, float *k, int kh, int kw, int c, int f)
{
    for (int a = 0; a < kh; a++)
        for (int b = 0; b < kw; b++)
            for (int ch = 0; ch < c; ch++)
                for (int fi = 0; fi < f; fi++)
                    k[(((size_t)a * kw + b) * c + ch) * f + fi] =
                        o[(((size_t)fi * c + ch) * kh + a) * kw + b];
}

/* (H, W, C) <-> (C, H, W) on the host: a PReLU's alpha. */
static void hwc_to_chw(const float *k, float *o, int h, int w, int c)
{
    for (int r = 0; r < h; r++)
        for (int s = 0; s < w; s++)
            for (int ch = 0; ch < c; ch++)
                o[((size_t)ch * h + r) * w + s] = k[((size_t)r * w + s) * c + ch];
}

static void chw_to_hwc(const float *o, float *k, int h, int w, int c)
{
    for (int r = 0; r < h; r++)
        for (int s = 0; s < w; s++)
            for (int ch = 0; ch < c; ch++)
                k[((size_t)r * w + s) * c + ch] = o[((size_t)ch * h + r) * w + s];
}

/* Which way permute_rows copies. */
typedef enum row_order { TO_OURS = 0, TO_KERAS = 1 } row_order;

/* A dense kernel (c*hw, out) after a Flatten of (c, hw) images: Keras's
 * row s*c + ch <-> our row ch*hw + s. */
static void permute_rows(const float *from, float *to, int c, int hw, int out, row_order order)
{
    const size_t row = (size_t)out * sizeof(float);
    const int to_keras = order == TO_KERAS;
    for (int s = 0; s < hw; s++)
        for (int ch = 0; ch < c; ch++) {
            const size_t keras = ((size_t)s * c + ch) * out, ours = ((size_t)ch * hw + s) * out;
            memcpy(to + (to_keras ? keras : ours), from + (to_keras ? ours : keras), row);
        }
}

static cnn_status copy_weight_out(cnn_net *net, float *block, int i, float *host)
{
    int layout;
    const cnn_weight_info *w = &net->weights[i];
    float *src = weight_place(net, block, i, &layout);
    if (layout == LAYOUT_KERAS)
        return net->be->download(net->ctx, host, src, w->count * sizeof(float));
    float *tmp = malloc(w->count * sizeof(float));
    if (!tmp) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory reading a weight");
    cnn_status st = net->be->download(net->ctx, tmp, src, w->count * sizeof(float));
    if (st == CNN_OK && layout == LAYOUT_CONV)
        fckk_to_keras(tmp, host, w->dims[0], w->dims[1], w->dims[2], w->dims[3]);
    if (st == CNN_OK && layout == LAYOUT_CHW) chw_to_hwc(tmp, host, w->dims[0], w->dims[1], w->dims[2]);
    if (st == CNN_OK && layout == LAYOUT_NCHW_ROWS) {
        const layer *L = &net->layers[w->layer];
        permute_rows(tmp, host, L->rows_c, L->rows_hw, w->dims[1], TO_KERAS);
    }
    free(tmp);
    return st;
}

int cnn_net_weight_count(const cnn_net *net) { return net->n_weights; }

const cnn_weight_info *cnn_net_weight(const cnn_net *net, int i)
{
    return (i >= 0 && i < net->n_weights) ? &net->weights[i] : NULL;
}

static cnn_status check_weight_index(const cnn_net *net, int i)
{
    if (i < 0 || i >= net->n_weights)
        return cnn_set_error(CNN_ERR_VALUE, "weight index must be in [0, %d), got %d",
                             net->n_weights, i);
    return CNN_OK;
}

cnn_status cnn_net_get_weight(cnn_net *net, int i, float *host)
{
    CNN_TRY(check_weight_index(net, i));
    return copy_weight_out(net, net->params, i, host);
}

cnn_status cnn_net_get_gradient(cnn_net *net, int i, float *host)
{
    CNN_TRY(check_weight_index(net, i));
    if (!net->weights[i].trainable)
        return cnn_set_error(CNN_ERR_VALUE, "weight %d is not trainable and has no gradient", i);
    return copy_weight_out(net, net->grads, i, host);
}

static cnn_status copy_weight_in(cnn_net *net, float *block, int i, const float *host)
{
    int layout;
    const cnn_weight_info *w = &net->weights[i];
    float *dst = weight_place(net, block, i, &layout);
    if (layout == LAYOUT_KERAS)
        return net->be->upload(net->ctx, dst, host, w->count * sizeof(float));
    float *tmp = malloc(w->count * sizeof(float));
    if (!tmp) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory writing a weight");
    if (layout == LAYOUT_CONV) {
        keras_to_fckk(host, tmp, w->dims[0], w->dims[1], w->dims[2], w->dims[3]);
    } else if (layout == LAYOUT_CHW) {
        hwc_to_chw(host, tmp, w->dims[0], w->dims[1], w->dims[2]);
    } else {
        const layer *L = &net->layers[w->layer];
        permute_rows(host, tmp, L->rows_c, L->rows_hw, w->dims[1], TO_OURS);
    }
    cnn_status st = net->be->upload(net->ctx, dst, tmp, w->count * sizeof(float));
    free(tmp);
    return st;
}

cnn_status cnn_net_set_weight(cnn_net *net, int i, const float *host)
{
    CNN_TRY(check_weight_index(net, i));
    return copy_weight_in(net, net->params, i, host);
}

/* The slot blocks in the order of Keras's variables (cnn.h); their count. */
static int slot_blocks(const cnn_net *net, float *blocks[3])
{
    int n = 0;
    float *all[] = {net->opt_m, net->opt_v, net->opt_a};
    for (int k = 0; k < 3; k++)
        if (all[k]) blocks[n++] = all[k];
    return n;
}

int cnn_net_optimizer_slots(const cnn_net *net)
{
    float *blocks[3];
    return slot_blocks(net, blocks);
}

/* The optimizer block of slot `slot` for trainable weight i, or NULL with
 * the error recorded. */
static float *slot_block(cnn_net *net, int i, int slot)
{
    if (check_weight_index(net, i) != CNN_OK) return NULL;
    if (!net->weights[i].trainable) {
        cnn_set_error(CNN_ERR_VALUE, "weight %d is not trainable and has no optimizer state", i);
        return NULL;
    }
    float *blocks[3];
    const int n = slot_blocks(net, blocks);
    if (slot < 0 || slot >= n) {
        cnn_set_error(CNN_ERR_VALUE, "optimizer slot must be in [0, %d), got %d", n, slot);
        return NULL;
    }
    return blocks[slot];
}

cnn_status cnn_net_get_slot(cnn_net *net, int i, int slot, float *host)
{
    float *block = slot_block(net, i, slot);
    return block ? copy_weight_out(net, block, i, host) : CNN_ERR_VALUE;
}

cnn_status cnn_net_set_slot(cnn_net *net, int i, int slot, const float *host)
{
    float *block = slot_block(net, i, slot);
    return block ? copy_weight_in(net, block, i, host) : CNN_ERR_VALUE;
}

long cnn_net_train_forward_count(const cnn_net *net) { return net->train_forwards; }

cnn_status cnn_net_set_counters(cnn_net *net, long steps, long train_forwards)
{
    if (steps < 0 || train_forwards < 0)
        return cnn_set_error(CNN_ERR_VALUE, "counters must be >= 0, got steps %ld, training "
                             "forwards %ld", steps, train_forwards);
    int64_t c[CNN_COUNTERS] = {0};
    c[CNN_COUNT_FORWARDS] = train_forwards;
    c[CNN_COUNT_MASK] = train_forwards > 0 ? train_forwards - 1 : 0;
    c[CNN_COUNT_STEPS] = steps;
    CNN_TRY(net->be->upload(net->ctx, net->counters, c, sizeof c));
    net->position = 0;
    net->steps = steps;
    net->train_forwards = train_forwards;
    net->last_n = 0; /* the mask of a pending backward is no longer known */
    return CNN_OK;
}


cnn_status cnn_net_set_loss_scale(cnn_net *net, float scale, long good_steps, long growth_steps)
{
    if (!(scale > 0.0f) || isinf(scale))
        return cnn_set_error(CNN_ERR_VALUE, "loss scale: expected a finite number > 0, got %g",
                             (double)scale);
    if (growth_steps < 1 || growth_steps > (1L << 24) || good_steps < 0 ||
        good_steps >= growth_steps)
        return cnn_set_error(CNN_ERR_VALUE,
                             "loss scale: expected 1 <= growth steps <= 2^24 and 0 <= good "
                             "steps < growth steps, got %ld and %ld",
                             growth_steps, good_steps);
    float h[CNN_HYPERS - CNN_HYPER_SKIP] = {0};
    h[CNN_HYPER_LOSS_SCALE - CNN_HYPER_SKIP] = scale;
    h[CNN_HYPER_SCALE_GOOD - CNN_HYPER_SKIP] = (float)good_steps;
    h[CNN_HYPER_SCALE_GROWTH - CNN_HYPER_SKIP] = (float)growth_steps;
    return net->be->upload(net->ctx, net->hyper + CNN_HYPER_SKIP, h, sizeof h);
}

cnn_status cnn_net_loss_scale(cnn_net *net, float *scale, long *good_steps, long *growth_steps)
{
    float h[CNN_HYPERS - CNN_HYPER_SKIP];
    CNN_TRY(net->be->download(net->ctx, h, net->hyper + CNN_HYPER_SKIP, sizeof h));
    *scale = h[CNN_HYPER_LOSS_SCALE - CNN_HYPER_SKIP];
    *good_steps = (long)h[CNN_HYPER_SCALE_GOOD - CNN_HYPER_SKIP];
    *growth_steps = (long)h[CNN_HYPER_SCALE_GROWTH - CNN_HYPER_SKIP];
    return CNN_OK;
}

int cnn_net_loss_scaling(const cnn_net *net) { return net->loss_scaling; }

/* net->opt's hyperparameters to the engine's copy that steps read */
cnn_status net_upload_hyper(cnn_net *net)
{
    float h[CNN_HYPERS] = {0};
    h[CNN_HYPER_LR] = net->opt.lr;
    h[CNN_HYPER_BETA_1] = net->opt.beta_1;
    h[CNN_HYPER_BETA_2] = net->opt.beta_2;
    h[CNN_HYPER_EPSILON] = net->opt.epsilon;
    h[CNN_HYPER_MOMENTUM] = net->opt.momentum;
    h[CNN_HYPER_NESTEROV] = net->opt.nesterov ? 1.0f : 0.0f;
    h[CNN_HYPER_RHO] = net->opt.rho;
    h[CNN_HYPER_WEIGHT_DECAY] = net->opt.weight_decay;
    /* the optimizer's entries only: the loss scaling's state stays */
    return net->be->upload(net->ctx, net->hyper, h, CNN_HYPER_OPTIMIZER * sizeof(float));
}

cnn_status cnn_net_set_optimizer(cnn_net *net, const cnn_optimizer_desc *o)
{
    static const char *const kinds[] = CNN_OPT_NAMES;
    if (o->kind != net->opt.kind)
        return cnn_set_error(CNN_ERR_VALUE, "optimizer: this network was built for %s, got %s "
                             "(a new kind of optimizer needs a new network)",
                             kinds[net->opt.kind],
                             o->kind >= 0 && o->kind < CNN_OPT_KINDS ? kinds[o->kind]
                                                                     : "an unknown kind");
    CNN_TRY(net_validate_optimizer(o));
    if (o->kind == CNN_OPT_SGD && o->momentum != 0.0f && !net->opt_m)
        return cnn_set_error(CNN_ERR_VALUE, "sgd momentum: this network was built without "
                             "momentum (it keeps no velocity), got momentum %g",
                             (double)o->momentum);
    if (o->kind == CNN_OPT_RMSPROP && o->momentum != 0.0f && !net->opt_v)
        return cnn_set_error(CNN_ERR_VALUE, "rmsprop momentum: this network was built without "
                             "momentum (it keeps no momentum slot), got momentum %g",
                             (double)o->momentum);
    if (o->kind == CNN_OPT_RMSPROP && (o->centered != 0) != (net->opt.centered != 0))
        return cnn_set_error(CNN_ERR_VALUE, "rmsprop centered: this network was built with "
                             "centered=%s, got centered=%s (a new network is needed)",
                             net->opt.centered ? "True" : "False",
                             o->centered ? "True" : "False");
    cnn_optimizer_desc old = net->opt;
    net->opt = *o;
    cnn_status st = net_upload_hyper(net);
    if (st != CNN_OK) net->opt = old;
    return st;
}

/* Adagrad's accumulator starts at initial_accumulator_value (Keras's
 * Constant initializer in adagrad.py's build); every other slot at 0. */
static cnn_status fill_accumulator(cnn_net *net)
{
    const float value = net->opt.initial_accumulator_value;
    if (net->opt.kind != CNN_OPT_ADAGRAD || value == 0.0f || net->n_params == 0) return CNN_OK;
    float *host = malloc(net->n_params * sizeof(float));
    if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory filling adagrad's "
                                    "accumulator");
    for (size_t j = 0; j < net->n_params; j++) host[j] = value;
    cnn_status st = net->be->upload(net->ctx, net->opt_m, host, net->n_params * sizeof(float));
    free(host);
    return st;
}

/* Keras defaults: glorot_uniform kernels, zero biases, gamma 1, beta 0,
 * moving mean 0, moving variance 1. */
cnn_status net_initialize_weights(cnn_net *net)
{
    size_t largest = 0;
    for (int i = 0; i < net->n_weights; i++)
        if (net->weights[i].count > largest) largest = net->weights[i].count;
    float *host = malloc((largest ? largest : 1) * sizeof(float));
    if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory initializing weights");
    cnn_status st = CNN_OK;
    for (int i = 0; i < net->n_weights && st == CNN_OK; i++) {
        const cnn_weight_info *w = &net->weights[i];
        if (w->role == CNN_WEIGHT_KERNEL) {
            const layer *L = &net->layers[w->layer];
            size_t fan_in, fan_out;
            if (L->spec.kind == CNN_LAYER_CONV2D) {
                fan_in = (size_t)w->dims[0] * w->dims[1] * w->dims[2];
                fan_out = (size_t)w->dims[0] * w->dims[1] * w->dims[3];
            } else {
                fan_in = (size_t)w->dims[0];
                fan_out = (size_t)w->dims[1];
            }
            float limit = sqrtf(6.0f / (float)(fan_in + fan_out));
            uint64_t key = cnn_rng_key(net->seed, 2 * (uint64_t)w->layer);
            for (size_t j = 0; j < w->count; j++)
                host[j] = (2.0f * cnn_uniform(key, j) - 1.0f) * limit;
        } else {
            float value =
                (w->role == CNN_WEIGHT_GAMMA || w->role == CNN_WEIGHT_MOVING_VAR) ? 1.0f : 0.0f;
            for (size_t j = 0; j < w->count; j++) host[j] = value;
        }
        st = cnn_net_set_weight(net, i, host);
    }
    free(host);
    return st == CNN_OK ? fill_accumulator(net) : st;
}
