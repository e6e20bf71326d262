/* augment.c: planning an augmentation layer (RandomFlip, RandomRotation,
 * RandomZoom, RandomTranslation, RandomContrast, RandomCrop): its checks,
 * output shape and descriptor (augment.h). They have no backward: a Net
 * takes them only before its first layer with weights, and records the
 * floor below which no gradient is wanted (net->aug_floor). */
#include "net_private.h"

static cnn_status bad(int i, const char *name, const char *what, double got)
{
    return cnn_set_error(CNN_ERR_VALUE, "layer %d (%s): %s, got %g", i, name, what, got);
}

cnn_status net_plan_augment(cnn_net *net, int i, size_t n_params, size_t n_state)
{
    layer *L = &net->layers[i];
    const cnn_layer_spec *s = &L->spec;
    const char *name = net_kind_name(s->kind);
    if (L->in_rank != 4)
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (%s) expects an image input (batch, height, width, "
                             "channels), got a (batch, %d) input",
                             i, name, L->in_c);
    /* a network of several inputs (its graph backward follows each path,
     * graph.c): no layer with weights upstream of it; else none before it */
    if (net_has_slices(net) ? net_graph_weights_above(net, i) : (n_params || n_state))
        return cnn_set_error(CNN_ERR_VALUE,
                             "layer %d (%s) follows a layer with weights: augmentation layers "
                             "pass no gradient back, so they must come before every layer with "
                             "weights (put them first)",
                             i, name);
    cnn_aug_desc *a = &L->aug;
    *a = (cnn_aug_desc){.c = L->in_c, .h = L->in_h, .w = L->in_w, .oh = L->in_h,
                        .ow = L->in_w, .fill = s->fill_mode, .interp = s->interpolation,
                        .fill_value = s->fill_value, .same_zoom = s->same_zoom};
    for (int d = 0; d < 2; d++) {
        a->lo[d] = s->aug_lo[d];
        a->hi[d] = s->aug_hi[d];
        if (!(isfinite(a->lo[d]) && isfinite(a->hi[d]) && a->lo[d] <= a->hi[d]))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): factor range [%g, %g] must be finite and "
                                 "ordered",
                                 i, name, (double)a->lo[d], (double)a->hi[d]);
    }
    if (s->fill_mode < CNN_FILL_REFLECT || s->fill_mode > CNN_FILL_WRAP)
        return bad(i, name, "fill_mode must be 0 (reflect) .. 3 (wrap)", s->fill_mode);
    if (s->interpolation != CNN_INTERP_BILINEAR && s->interpolation != CNN_INTERP_NEAREST)
        return bad(i, name, "interpolation must be 0 (bilinear) or 1 (nearest)", s->interpolation);
    if (!isfinite(s->fill_value)) return bad(i, name, "fill_value must be finite", s->fill_value);
    switch (s->kind) {
    case CNN_LAYER_RANDOM_FLIP:
        if (s->flip_mode < 1 || s->flip_mode > 3)
            return bad(i, name, "flip mode must be 1 (horizontal), 2 (vertical) or 3 (both)",
                       s->flip_mode);
        a->flip_h = (s->flip_mode & 1) != 0;
        a->flip_v = (s->flip_mode & 2) != 0;
        break;
    case CNN_LAYER_RANDOM_ROTATION: a->affine = CNN_AFFINE_ROTATION; break;
    case CNN_LAYER_RANDOM_ZOOM: a->affine = CNN_AFFINE_ZOOM; break;
    case CNN_LAYER_RANDOM_TRANSLATION: a->affine = CNN_AFFINE_TRANSLATION; break;
    case CNN_LAYER_RANDOM_CONTRAST:
        a->vmin = s->value_range[0];
        a->vmax = s->value_range[1];
        if (!(a->vmin < a->vmax))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): value_range must be (low, high) with low < "
                                 "high, got (%g, %g)",
                                 i, name, (double)a->vmin, (double)a->vmax);
        break;
    case CNN_LAYER_RANDOM_CROP:
        if (s->kh < 1 || s->kw < 1 || s->kh > L->in_h || s->kw > L->in_w)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): the crop %dx%d must fit the %dx%d input",
                                 i, name, s->kh, s->kw, L->in_h, L->in_w);
        a->oh = L->out_h = s->kh;
        a->ow = L->out_w = s->kw;
        break;
    }
    a->key = cnn_rng_key(s->has_seed ? s->aug_seed : net->seed, 2 * (uint64_t)i + 1);
    net->aug_floor = i + 1;
    return CNN_OK;
}
