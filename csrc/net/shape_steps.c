/* shape_steps.c: the forward and backward steps of the shape and image
 * layers (cnn.h CNN_LAYER_SHAPE_FIRST ... LAST: Rescaling, Reshape,
 * ZeroPadding2D, Cropping2D, UpSampling2D, SpatialDropout2D), each one call
 * of the engine's table. None has weights; every backward is an entry of the
 * table again (backend_table.h). */
#include "net_private.h"

/* Each rescaling layer's scales and offsets per channel into its engine
 * buffer (the scalars repeated where the spec gives no channel_values),
 * once, when the Net is made; the spec's channel_values are not kept. */
cnn_status net_shape_upload(cnn_net *net)
{
    for (int i = 0; i < net->n_layers; i++) {
        layer *L = &net->layers[i];
        if (L->spec.kind != CNN_LAYER_RESCALING) continue;
        const int c = L->in_c;
        float *host = malloc(2 * (size_t)c * sizeof(float));
        if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
        for (int k = 0; k < c; k++) {
            host[k] = L->spec.channel_values ? L->spec.channel_values[k] : L->spec.scale;
            host[c + k] = L->spec.channel_values ? L->spec.channel_values[c + k] : L->spec.offset;
        }
        cnn_status st = net->be->upload(net->ctx, L->rescale, host, 2 * (size_t)c * sizeof(float));
        free(host);
        L->spec.channel_values = NULL;
        CNN_TRY(st);
    }
    return CNN_OK;
}

/* Layer L's forward of n samples, x (its input) -> y, in the NCHW layout
 * inside (features (n, f) as (n, f, 1, 1)). */
cnn_status net_shape_forward(cnn_net *net, const layer *L, int n, int training, const float *x,
                             float *y)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const cnn_layer_spec *s = &L->spec;
    switch (s->kind) {
    case CNN_LAYER_RESCALING:
        return be->rescale(ctx, n, L->in_c, (size_t)L->in_h * L->in_w, L->rescale,
                           L->rescale + L->in_c, x, y);
    case CNN_LAYER_RESHAPE:
        return be->reshape(ctx, n, L->in_c, L->in_h, L->in_w, L->out_c, L->out_h, L->out_w, x,
                           y);
    case CNN_LAYER_ZERO_PADDING:
        return be->pad2d(ctx, n, L->in_c, L->in_h, L->in_w, L->out_h, L->out_w, s->pad[0],
                         s->pad[2], x, y);
    case CNN_LAYER_CROPPING:
        return be->pad2d(ctx, n, L->in_c, L->in_h, L->in_w, L->out_h, L->out_w, -s->pad[0],
                         -s->pad[2], x, y);
    case CNN_LAYER_UPSAMPLING:
        return (s->upsample_bilinear ? be->upsample_bilinear_forward : be->upsample_forward)(
            ctx, n, L->in_c, L->in_h, L->in_w, s->kh, s->kw, x, y);
    case CNN_LAYER_SPATIAL_DROPOUT:
        return be->spatial_dropout_forward(ctx, n, L->in_c, L->in_h, L->in_w,
                                           training ? s->rate : 0.0f, L->dropout_key,
                                           net->counters + CNN_COUNT_MASK, net->row0, x, y);
    }
    return cnn_set_error(CNN_ERR_INTERNAL, "layer kind %d is not a shape layer", s->kind);
}

/* Layer L's backward after a training forward of n samples: dy (its
 * output's gradient) -> dx (its input's). */
cnn_status net_shape_backward(cnn_net *net, const layer *L, int n, const float *dy, float *dx)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const cnn_layer_spec *s = &L->spec;
    switch (s->kind) {
    case CNN_LAYER_RESCALING: /* dx = dy scale */
        return be->rescale(ctx, n, L->in_c, (size_t)L->in_h * L->in_w, L->rescale, NULL, dy,
                           dx);
    case CNN_LAYER_RESHAPE: /* the reshape back */
        return be->reshape(ctx, n, L->out_c, L->out_h, L->out_w, L->in_c, L->in_h, L->in_w, dy,
                           dx);
    case CNN_LAYER_ZERO_PADDING: /* dy cropped */
        return be->pad2d(ctx, n, L->in_c, L->out_h, L->out_w, L->in_h, L->in_w, -s->pad[0],
                         -s->pad[2], dy, dx);
    case CNN_LAYER_CROPPING: /* dy padded with zeros */
        return be->pad2d(ctx, n, L->in_c, L->out_h, L->out_w, L->in_h, L->in_w, s->pad[0],
                         s->pad[2], dy, dx);
    case CNN_LAYER_UPSAMPLING:
        return (s->upsample_bilinear ? be->upsample_bilinear_backward : be->upsample_backward)(
            ctx, n, L->in_c, L->in_h, L->in_w, s->kh, s->kw, dy, dx);
    case CNN_LAYER_SPATIAL_DROPOUT:
        return be->spatial_dropout_backward(ctx, n, L->in_c, L->in_h, L->in_w, s->rate,
                                            L->dropout_key, net->counters + CNN_COUNT_MASK,
                                            net->row0, dy, dx);
    }
    return cnn_set_error(CNN_ERR_INTERNAL, "layer kind %d is not a shape layer", s->kind);
}
