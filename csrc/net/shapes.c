/* shapes.c: each layer's output shape, parameter and state counts, worked
 * out from its input when a Net is made (plan_layer), and the layer kinds'
 * names. */
#include "net_private.h"

/* In 64 bits: a kernel or stride near INT_MAX must not overflow. */
static int out_size(int in, int k, int s, int same, int *pad_before)
{
    if (same) {
        int64_t out = ((int64_t)in + s - 1) / s;
        int64_t total = (out - 1) * s + k - in;
        if (total < 0) total = 0;
        *pad_before = (int)(total / 2);
        return (int)out;
    }
    *pad_before = 0;
    return in < k ? 0 : (in - k) / s + 1;
}


const char *net_kind_name(int kind)
{
    if (kind == CNN_LAYER_ADD) return "add";
    if (kind == CNN_LAYER_CONCAT) return "concatenate";
    if (kind == CNN_LAYER_INPUT_SLICE) return "input_slice";
    static const char *names[] = {"conv2d", "maxpool",    "avgpool", "flatten",  "dense",
                                  "activation", "dropout", "batchnorm", "prelu"};
    static const char *shape_names[] = {"rescaling",  "reshape",      "zero_padding2d",
                                        "cropping2d", "upsampling2d", "spatial_dropout2d"};
    static const char *augment[] = {"random_flip",        "random_rotation", "random_zoom",
                                    "random_translation", "random_contrast", "random_crop"};
    if (kind >= 0 && kind <= CNN_LAYER_PRELU) return names[kind];
    if (kind >= CNN_LAYER_SHAPE_FIRST && kind <= CNN_LAYER_SHAPE_LAST)
        return shape_names[kind - CNN_LAYER_SHAPE_FIRST];
    if (cnn_layer_is_augment(kind)) return augment[kind - CNN_LAYER_RANDOM_FLIP];
    return "unknown";
}

/* An activation layer's parameters (cnn.h cnn_act_desc), where its kind
 * reads them: finite (relu_general's cap may be infinity: none), and
 * relu_general's cap and threshold >= 0, as Keras's ReLU layer requires. */
static cnn_status check_act_parameters(int i, const cnn_layer_spec *s)
{
    const int a = s->activation;
    if ((a == CNN_ACT_ELU || a == CNN_ACT_LEAKY_RELU || a == CNN_ACT_RELU_GENERAL) &&
        !isfinite(s->alpha))
        return cnn_set_error(CNN_ERR_VALUE, "layer %d (activation): alpha must be finite, got %g",
                             i, (double)s->alpha);
    if (a == CNN_ACT_RELU_GENERAL &&
        (!(s->max_value >= 0.0f) || !(s->threshold >= 0.0f) || !isfinite(s->threshold)))
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (activation): relu_general needs max_value >= 0 and a "
                             "finite threshold >= 0, got max_value %g threshold %g",
                             i, (double)s->max_value, (double)s->threshold);
    return CNN_OK;
}

/* The shape and image layers (cnn.h CNN_LAYER_SHAPE_FIRST ... LAST): layer
 * i's output shape from its input, none of them with weights. */
static cnn_status plan_shape_layer(cnn_net *net, int i)
{
    layer *L = &net->layers[i];
    const cnn_layer_spec *s = &L->spec;
    const char *name = net_kind_name(s->kind);
    const int image = s->kind == CNN_LAYER_ZERO_PADDING || s->kind == CNN_LAYER_CROPPING ||
                      s->kind == CNN_LAYER_UPSAMPLING || s->kind == CNN_LAYER_SPATIAL_DROPOUT;
    if (image && L->in_rank != 4)
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (%s) expects an image input (batch, height, width, "
                             "channels), got a (batch, %d) input",
                             i, name, L->in_c);
    switch (s->kind) {
    case CNN_LAYER_RESCALING:
        if (!isfinite(s->scale) || !isfinite(s->offset))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (rescaling): scale and offset must be finite, got "
                                 "%g and %g",
                                 i, (double)s->scale, (double)s->offset);
        if (s->channel_values) {
            if (s->channels != L->in_c)
                return cnn_set_error(CNN_ERR_VALUE,
                                     "layer %d (rescaling): %d scales and offsets per channel "
                                     "for an input of %d channels (its last axis)",
                                     i, s->channels, L->in_c);
            for (int k = 0; k < 2 * s->channels; k++)
                if (!isfinite(s->channel_values[k]))
                    return cnn_set_error(CNN_ERR_VALUE,
                                         "layer %d (rescaling): the %s of channel %d must be "
                                         "finite, got %g",
                                         i, k < s->channels ? "scale" : "offset",
                                         k % s->channels, (double)s->channel_values[k]);
        }
        break;
    case CNN_LAYER_RESHAPE: {
        const int features = s->target_h == 0 && s->target_w == 0;
        if (s->target_c < 1 || (!features && (s->target_h < 1 || s->target_w < 1)) ||
            (double)s->target_h * (features ? 1 : s->target_w) * s->target_c > CNN_MAX_COUNT)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (reshape): target shape (%d, %d, %d) is not "
                                 "(height, width, channels) or (0, 0, features) of positive "
                                 "sizes",
                                 i, s->target_h, s->target_w, s->target_c);
        const size_t count = features ? (size_t)s->target_c
                                      : (size_t)s->target_h * s->target_w * s->target_c;
        if (count != (size_t)L->in_c * L->in_h * L->in_w)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (reshape): the input's %zu values cannot become "
                                 "%zu values (target %d, %d, %d)",
                                 i, (size_t)L->in_c * L->in_h * L->in_w, count, s->target_h,
                                 s->target_w, s->target_c);
        L->out_rank = features ? 2 : 4;
        L->out_h = features ? 1 : s->target_h;
        L->out_w = features ? 1 : s->target_w;
        L->out_c = s->target_c;
        break;
    }
    case CNN_LAYER_ZERO_PADDING:
    case CNN_LAYER_CROPPING: {
        const int sign = s->kind == CNN_LAYER_ZERO_PADDING ? 1 : -1;
        for (int k = 0; k < 4; k++)
            if (s->pad[k] < 0)
                return cnn_set_error(CNN_ERR_VALUE,
                                     "layer %d (%s): expected rows and columns >= 0, got "
                                     "((%d, %d), (%d, %d))",
                                     i, name, s->pad[0], s->pad[1], s->pad[2], s->pad[3]);
        const int64_t oh = (int64_t)L->in_h + sign * ((int64_t)s->pad[0] + s->pad[1]);
        const int64_t ow = (int64_t)L->in_w + sign * ((int64_t)s->pad[2] + s->pad[3]);
        if (oh < 1 || ow < 1 || (double)oh * ow * L->in_c > CNN_MAX_COUNT)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): ((%d, %d), (%d, %d)) of the %dx%d input gives "
                                 "%lldx%lld",
                                 i, name, s->pad[0], s->pad[1], s->pad[2], s->pad[3], L->in_h,
                                 L->in_w, (long long)oh, (long long)ow);
        L->out_h = (int)oh;
        L->out_w = (int)ow;
        break;
    }
    case CNN_LAYER_UPSAMPLING:
        if (s->upsample_bilinear != 0 && s->upsample_bilinear != 1)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (upsampling2d): upsample_bilinear must be 0 (nearest) or "
                                 "1 (bilinear), got %d",
                                 i, s->upsample_bilinear);
        if (s->kh < 1 || s->kw < 1 ||
            (double)L->in_h * s->kh * L->in_w * s->kw * L->in_c > CNN_MAX_COUNT)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (upsampling2d): size must be >= 1 and the output "
                                 "fit, got %dx%d of a %dx%d input",
                                 i, s->kh, s->kw, L->in_h, L->in_w);
        L->out_h = L->in_h * s->kh;
        L->out_w = L->in_w * s->kw;
        break;
    case CNN_LAYER_SPATIAL_DROPOUT:
        if (!(s->rate >= 0.0f && s->rate < 1.0f))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (spatial_dropout2d): rate must be in [0, 1), got %g",
                                 i, (double)s->rate);
        L->dropout_key = cnn_rng_key(net->seed, 2 * (uint64_t)i + 1);
        break;
    }
    return CNN_OK;
}

/* An input of a network of several inputs (cnn.h CNN_LAYER_INPUT_SLICE):
 * its place in the packed (N, features) input checked, its shape set. The
 * slices come first, so nothing below them wants a gradient (aug_floor). */
static cnn_status plan_input_slice(cnn_net *net, int i)
{
    layer *L = &net->layers[i];
    const cnn_layer_spec *s = &L->spec;
    for (int k = 0; k < i; k++)
        if (net->layers[k].spec.kind != CNN_LAYER_INPUT_SLICE)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (input_slice) follows layer %d (%s): the inputs' "
                                 "slices come before every other layer",
                                 i, k, net_kind_name(net->layers[k].spec.kind));
    if (L->n_in != 1 || L->in[0] != -1)
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (input_slice) reads the network's input (-1) alone, got "
                             "%d inputs, the first %d",
                             i, L->n_in, L->in[0]);
    if (net->in_rank != 2)
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (input_slice) needs the inputs packed as a (batch, "
                             "features) input, got a (batch, %d, %d, %d) input",
                             i, net->in_h, net->in_w, net->in_c);
    const int features = s->target_h == 0 && s->target_w == 0;
    const double count = (double)s->target_c * (features ? 1 : (double)s->target_h * s->target_w);
    if (s->target_c < 1 || (!features && (s->target_h < 1 || s->target_w < 1)) ||
        s->input_offset < 0 || s->input_offset + count > (double)net->in_c)
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (input_slice): a (%d, %d, %d) input (height, width, "
                             "channels; 0, 0 for features) at value %d does not fit the %d "
                             "values of a sample",
                             i, s->target_h, s->target_w, s->target_c, s->input_offset,
                             net->in_c);
    L->out_rank = features ? 2 : 4;
    L->out_h = features ? 1 : s->target_h;
    L->out_w = features ? 1 : s->target_w;
    L->out_c = s->target_c;
    net->aug_floor = i + 1;
    return CNN_OK;
}

/* Works out layer i's output shape and parameter counts from its input. */
cnn_status net_plan_layer(cnn_net *net, int i, size_t *n_params, size_t *n_state)
{
    layer *L = &net->layers[i];
    const cnn_layer_spec *s = &L->spec;
    const char *name = net_kind_name(s->kind);
    L->out_rank = L->in_rank;
    L->out_c = L->in_c;
    L->out_h = L->in_h;
    L->out_w = L->in_w;
    L->w_off = L->b_off = L->gamma_off = L->beta_off = L->mean_off = L->var_off = NO_OFFSET;
    L->alpha_off = NO_OFFSET;

    switch (s->kind) {
    case CNN_LAYER_CONV2D:
    case CNN_LAYER_MAXPOOL:
    case CNN_LAYER_AVGPOOL: {
        if (L->in_rank != 4)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s) expects an image input (batch, height, width, "
                                 "channels), got a (batch, %d) input",
                                 i, name, L->in_c);
        if (s->kh < 1 || s->kw < 1 || s->sh < 1 || s->sw < 1)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): kernel size and strides must be >= 1, got "
                                 "kernel %dx%d strides %dx%d",
                                 i, name, s->kh, s->kw, s->sh, s->sw);
        int pt, pl;
        int oh = out_size(L->in_h, s->kh, s->sh, s->same, &pt);
        int ow = out_size(L->in_w, s->kw, s->sw, s->same, &pl);
        if (oh < 1 || ow < 1)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): kernel %dx%d does not fit the %dx%d input "
                                 "with padding '%s'",
                                 i, name, s->kh, s->kw, L->in_h, L->in_w,
                                 s->same ? "same" : "valid");
        L->out_h = oh;
        L->out_w = ow;
        if (s->kind == CNN_LAYER_CONV2D) {
            if (s->units < 1)
                return cnn_set_error(CNN_ERR_VALUE, "layer %d (conv2d): filters must be >= 1, got %d",
                                     i, s->units);
            if ((double)s->units * L->in_c * s->kh * s->kw > CNN_MAX_COUNT)
                return cnn_set_error(CNN_ERR_VALUE,
                                     "layer %d (conv2d): a %dx%d kernel over %d channels with %d "
                                     "filters has %.0f weights, more than %d",
                                     i, s->kh, s->kw, L->in_c, s->units,
                                     (double)s->units * L->in_c * s->kh * s->kw, INT32_MAX);
            L->out_c = s->units;
            L->conv = (cnn_conv_desc){.c = L->in_c, .h = L->in_h, .w = L->in_w, .f = s->units,
                                      .kh = s->kh, .kw = s->kw, .sh = s->sh, .sw = s->sw,
                                      .pad_top = pt, .pad_left = pl, .oh = oh, .ow = ow};
            L->w_off = *n_params;
            *n_params += (size_t)s->units * L->in_c * s->kh * s->kw;
            if (s->use_bias) {
                L->b_off = *n_params;
                *n_params += (size_t)s->units;
            }
        } else {
            L->pool = (cnn_pool_desc){.mode = s->kind == CNN_LAYER_MAXPOOL ? CNN_POOL_MAX
                                                                          : CNN_POOL_AVG,
                                      .c = L->in_c, .h = L->in_h, .w = L->in_w, .ph = s->kh,
                                      .pw = s->kw, .sh = s->sh, .sw = s->sw, .pad_top = pt,
                                      .pad_left = pl, .oh = oh, .ow = ow};
        }
        break;
    }
    case CNN_LAYER_FLATTEN:
        L->out_rank = 2;
        L->out_c = L->in_c * L->in_h * L->in_w;
        L->out_h = L->out_w = 1;
        break;
    case CNN_LAYER_DENSE:
        if (L->in_rank != 2)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (dense) expects a (batch, features) input, got an "
                                 "image (batch, %d, %d, %d): add a Flatten layer before it",
                                 i, L->in_h, L->in_w, L->in_c);
        if (s->units < 1)
            return cnn_set_error(CNN_ERR_VALUE, "layer %d (dense): units must be >= 1, got %d", i,
                                 s->units);
        if ((double)L->in_c * s->units > CNN_MAX_COUNT)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (dense): %d inputs times %d units is %.0f weights, "
                                 "more than %d",
                                 i, L->in_c, s->units, (double)L->in_c * s->units, INT32_MAX);
        L->out_c = s->units;
        L->w_off = *n_params;
        *n_params += (size_t)L->in_c * s->units;
        if (s->use_bias) {
            L->b_off = *n_params;
            *n_params += (size_t)s->units;
        }
        break;
    case CNN_LAYER_ACTIVATION:
        if (s->activation < CNN_ACT_LINEAR || s->activation >= CNN_ACT_KINDS)
            return cnn_set_error(CNN_ERR_VALUE, "layer %d (activation): unknown activation %d", i,
                                 s->activation);
        CNN_TRY(check_act_parameters(i, s));
        L->act = (cnn_act_desc){.act = s->activation, .alpha = s->alpha,
                                .max_value = s->max_value, .threshold = s->threshold};
        if (s->activation == CNN_ACT_SOFTMAX && L->in_rank != 2)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (activation): softmax needs a (batch, features) "
                                 "input, got an image: add a Flatten layer before it",
                                 i);
        break;
    case CNN_LAYER_DROPOUT:
        if (!(s->rate >= 0.0f && s->rate < 1.0f))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (dropout): rate must be in [0, 1), got %g", i,
                                 (double)s->rate);
        L->dropout_key = cnn_rng_key(net->seed, 2 * (uint64_t)i + 1);
        break;
    case CNN_LAYER_RANDOM_FLIP:
    case CNN_LAYER_RANDOM_ROTATION:
    case CNN_LAYER_RANDOM_ZOOM:
    case CNN_LAYER_RANDOM_TRANSLATION:
    case CNN_LAYER_RANDOM_CONTRAST:
    case CNN_LAYER_RANDOM_CROP:
        CNN_TRY(net_plan_augment(net, i, *n_params, *n_state));
        break;
    case CNN_LAYER_BATCHNORM:
        if (!(s->epsilon > 0.0f) || !(s->momentum >= 0.0f && s->momentum <= 1.0f))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (batchnorm): momentum must be in [0, 1] and epsilon "
                                 "> 0, got momentum %g epsilon %g",
                                 i, (double)s->momentum, (double)s->epsilon);
        L->bn = (cnn_bn_desc){.c = L->in_c, .spatial = L->in_h * L->in_w,
                              .momentum = s->momentum, .epsilon = s->epsilon};
        L->gamma_off = *n_params;
        L->beta_off = *n_params + L->in_c;
        *n_params += 2 * (size_t)L->in_c;
        L->mean_off = *n_state;
        L->var_off = *n_state + L->in_c;
        *n_state += 2 * (size_t)L->in_c;
        break;
    case CNN_LAYER_PRELU: {
        if (s->shared_axes < 0 || s->shared_axes >= (L->in_rank == 4 ? 8 : 2))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (prelu): shared_axes must name axes of its %s input, "
                                 "got the bit set %d",
                                 i, L->in_rank == 4 ? "(batch, height, width, channels)"
                                                    : "(batch, features)",
                                 s->shared_axes);
        /* Keras's axes: 1 height, 2 width, 3 channels; of a (N, F) input, 1 the features */
        const int m = s->shared_axes, image = L->in_rank == 4;
        L->prelu = (cnn_prelu_desc){.c = L->in_c, .h = L->in_h, .w = L->in_w,
                                    .ac = (image ? m & 4 : m & 1) ? 1 : L->in_c,
                                    .ah = image && !(m & 1) ? L->in_h : 1,
                                    .aw = image && !(m & 2) ? L->in_w : 1};
        L->alpha_off = *n_params;
        *n_params += (size_t)L->prelu.ac * L->prelu.ah * L->prelu.aw;
        break;
    }
    case CNN_LAYER_RESCALING:
    case CNN_LAYER_RESHAPE:
    case CNN_LAYER_ZERO_PADDING:
    case CNN_LAYER_CROPPING:
    case CNN_LAYER_UPSAMPLING:
    case CNN_LAYER_SPATIAL_DROPOUT:
        CNN_TRY(plan_shape_layer(net, i));
        break;
    case CNN_LAYER_ADD:
    case CNN_LAYER_CONCAT: {
        /* input 0 gave the input shape; the others must match it (Add) or
         * differ only in their channels (Concatenate) */
        if (L->n_in < 2)
            return cnn_set_error(CNN_ERR_VALUE, "layer %d (%s) needs at least 2 inputs, got %d",
                                 i, name, L->n_in);
        int total = 0;
        for (int k = 0; k < L->n_in; k++) {
            const int j = L->in[k];
            const layer *P = j >= 0 ? &net->layers[j] : NULL;
            const int rank = P ? P->out_rank : net->in_rank, c = P ? P->out_c : net->in_c;
            const int h = P ? P->out_h : net->in_h, w = P ? P->out_w : net->in_w;
            if (rank != L->in_rank || h != L->in_h || w != L->in_w ||
                (s->kind == CNN_LAYER_ADD && c != L->in_c))
                return cnn_set_error(CNN_ERR_VALUE,
                                     "layer %d (%s): input %d has shape (%d, %d, %d) (height, "
                                     "width, channels), input 0 (%d, %d, %d): %s",
                                     i, name, k, h, w, c, L->in_h, L->in_w, L->in_c,
                                     s->kind == CNN_LAYER_ADD
                                         ? "added tensors must have one shape"
                                         : "concatenated tensors may differ in their channels only");
            total += c;
        }
        if (s->kind == CNN_LAYER_CONCAT) L->out_c = total;
        break;
    }
    case CNN_LAYER_INPUT_SLICE:
        CNN_TRY(plan_input_slice(net, i));
        break;
    default:
        return cnn_set_error(CNN_ERR_VALUE, "layer %d: unknown layer kind %d", i, s->kind);
    }
    L->in_count = (size_t)L->in_c * L->in_h * L->in_w;
    L->out_count = (size_t)L->out_c * L->out_h * L->out_w;
    return CNN_OK;
}

int cnn_net_layer_count(const cnn_net *net)
{
    return net->n_layers;
}

int cnn_net_layer_bytes(const cnn_net *net, int i, size_t *activation, size_t *workspace)
{
    *activation = *workspace = 0;
    if (i < 0 || i >= net->n_layers) return -1;
    const layer *L = &net->layers[i];
    const size_t mb = (size_t)net->max_batch;
    if (!L->alias_in) *activation += mb * L->out_count * sizeof(float);
    if (net->graph && i < net->n_layers - 1) *activation += mb * L->out_count * sizeof(float);
    if (L->spec.kind == CNN_LAYER_MAXPOOL) *activation += mb * L->out_count * sizeof(int32_t);
    if (L->spec.kind == CNN_LAYER_BATCHNORM) *activation += 2 * (size_t)L->in_c * sizeof(float);
    if (L->spec.kind == CNN_LAYER_RESCALING) *activation += 2 * (size_t)L->in_c * sizeof(float);
    if (L->spec.kind == CNN_LAYER_CONV2D) {
        cnn_conv_desc d = L->conv;
        d.n = net->max_batch;
        *workspace = net->be->conv2d_workspace(&d);
    }
    return 0;
}
