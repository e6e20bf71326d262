/* loss_parts.c: the loss of a network of several outputs (a Keras model
 * compiled with a loss per output; cnn.h cnn_loss_part). The last layer
 * concatenates the outputs, each flat per sample; output j is input j of
 * it. Each output's loss runs as a network of one output's would (the
 * engines' loss ops, unchanged) on its own rows: its targets are taken out
 * of the packed target row (input_slice), a sparse output's labels
 * converted to int32 (labels_from_floats), and its gradient, times its
 * loss weight (rescale, where the weight is not 1), put in its place in
 * the packed output's gradient (concat_forward), from which the graph's
 * backward (graph.c) takes each output's gradient back out. The sums of a
 * call are then 2 + 2 n_parts floats: the regularizers' penalty and 0,
 * then each output's loss and correct sums, unweighted; the loss a call
 * reports is the weighted sum of the outputs' plus the penalty
 * (net_take_sums, in double). A network of one output never comes here. */
#include <math.h>
#include <stdlib.h>

#include "net_private.h"

size_t net_part_target_width(const cnn_loss_part *p)
{
    const size_t pos = p->loss.positions > 1 ? (size_t)p->loss.positions : 1;
    if (p->loss.kind == CNN_LOSS_SPARSE_CE) return pos;
    return pos * (size_t)p->loss.k + (p->loss.weighted != 0); /* then the weight */
}

/* The parts checked against the network's shapes, their offsets, and
 * net->loss made the packed targets' float loss (after the shapes, before
 * the buffers). */
cnn_status net_parts_setup(cnn_net *net)
{
    const layer *last = &net->layers[net->n_layers - 1];
    if (last->spec.kind != CNN_LAYER_CONCAT || last->n_in != net->n_parts)
        return cnn_set_error(CNN_ERR_VALUE,
                             "loss: the losses of %d outputs need a last layer that concatenates "
                             "%d outputs, got %s of %d inputs",
                             net->n_parts, net->n_parts, net_kind_name(last->spec.kind),
                             last->n_in);
    size_t y_off = 0, t_off = 0, scale_off = 0;
    for (int j = 0; j < net->n_parts; j++) {
        const cnn_loss_part *p = &net->parts[j];
        const cnn_loss_desc *l = &p->loss;
        const int pos = l->positions > 1 ? l->positions : 1;
        if (l->kind < CNN_LOSS_SPARSE_CE || l->kind >= CNN_LOSS_KINDS)
            return cnn_set_error(CNN_ERR_VALUE, "loss of output %d: unknown loss kind %d", j,
                                 l->kind);
        if (l->weighted && (l->kind == CNN_LOSS_SPARSE_CE || l->kind == CNN_LOSS_CATEGORICAL_CE))
            return cnn_set_error(CNN_ERR_VALUE, "loss of output %d: weighted targets are for "
                                 "the binary cross-entropy and the regression losses", j);
        if (l->weighted && pos > 1)
            return cnn_set_error(CNN_ERR_VALUE, "loss of output %d: weighted targets need an "
                                 "output of one position per sample, got %d", j, pos);
        if (l->kind == CNN_LOSS_HUBER && !(l->delta > 0.0f && l->delta < INFINITY))
            return cnn_set_error(CNN_ERR_VALUE, "loss of output %d: huber's delta must be "
                                 "finite and > 0, got %g", j, (double)l->delta);
        if (!(p->weight >= 0.0f && p->weight < INFINITY))
            return cnn_set_error(CNN_ERR_VALUE, "loss of output %d: its weight must be finite "
                                 "and >= 0, got %g", j, (double)p->weight);
        const int src = last->in[j];
        const layer *S = src >= 0 ? &net->layers[src] : NULL;
        if (!S || S->out_rank != 2 || l->k < 1 || (size_t)l->k * (size_t)pos != S->out_count)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "loss of output %d: %d values at %d positions per sample, the "
                                 "output (input %d of the last layer) gives %zu flat values",
                                 j, l->k, pos, j, S ? S->out_count : net->in_count);
        if ((l->kind == CNN_LOSS_SPARSE_CE || l->kind == CNN_LOSS_CATEGORICAL_CE) && l->k < 2)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "loss of output %d: categorical cross-entropy needs at least 2 "
                                 "outputs, the output has %d: use binary cross-entropy", j, l->k);
        net->part_src[j] = src;
        net->part_y_off[j] = y_off;
        net->part_t_off[j] = t_off;
        net->part_scale_off[j] = scale_off;
        y_off += S->out_count;
        t_off += net_part_target_width(p);
        scale_off += (size_t)l->k;
    }
    if (t_off > (size_t)INT32_MAX / 2)
        return cnn_set_error(CNN_ERR_VALUE, "loss: %zu targets per sample are too many", t_off);
    /* the packed targets, to everything that stages, gathers and checks them */
    net->loss = (cnn_loss_desc){.kind = CNN_LOSS_MSE, .k = (int)t_off, .positions = 1};
    net->n_sums = 2 + 2 * net->n_parts;
    return CNN_OK;
}

/* Each part's loss weight, k times, into part_scale (after the buffers). */
cnn_status net_parts_upload(cnn_net *net)
{
    if (!net->n_parts) return CNN_OK;
    size_t count = 0;
    for (int j = 0; j < net->n_parts; j++) count += (size_t)net->parts[j].loss.k;
    float *host = malloc(count * sizeof(float));
    if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory for the loss weights");
    for (int j = 0; j < net->n_parts; j++)
        for (int c = 0; c < net->parts[j].loss.k; c++)
            host[net->part_scale_off[j] + (size_t)c] = net->parts[j].weight;
    cnn_status st = net->be->upload(net->ctx, net->part_scale, host, count * sizeof(float));
    free(host);
    return st;
}

/* The outputs' losses of n samples against the staged packed targets,
 * each output's sums added to sums[2 + 2 j], [3 + 2 j]; with dy (NULL:
 * none) the packed output's gradient, that of the weighted sum of the
 * outputs' mean losses over scale_n samples. */
cnn_status net_loss_parts(cnn_net *net, int n, int scale_n, float *dy, float *sums)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const int row = net->loss.k;
    const int out_row = (int)net->layers[net->n_layers - 1].out_count;
    for (int j = 0; j < net->n_parts; j++) {
        const cnn_loss_part *p = &net->parts[j];
        const layer *S = &net->layers[net->part_src[j]];
        cnn_loss_desc d = p->loss;
        const int pos = d.positions > 1 ? d.positions : 1;
        d.n = n * pos;
        CNN_TRY(be->input_slice(ctx, n, row, (int)net->part_t_off[j], 1, 1,
                                (int)net_part_target_width(p), net->targets, net->part_t));
        const int32_t *labels = NULL;
        const float *targets = net->part_t;
        if (d.kind == CNN_LOSS_SPARSE_CE) {
            CNN_TRY(be->labels_from_floats(ctx, (long)n * pos, d.k, net->part_t,
                                           net->part_labels));
            labels = net->part_labels;
            targets = NULL;
        }
        cnn_loss_forward_backward_fn *op = CNN_LOSS_IS_REGRESSION(d.kind)
                                               ? be->regression_loss_forward_backward
                                               : be->loss_forward_backward;
        CNN_TRY(op(ctx, &d, S->y, labels, targets, scale_n * pos, dy ? net->part_dy : NULL,
                   sums + 2 + 2 * j));
        if (!dy) continue;
        if (p->weight != 1.0f)
            CNN_TRY(be->rescale(ctx, n * pos, d.k, 1, net->part_scale + net->part_scale_off[j],
                                NULL, net->part_dy, net->part_dy));
        CNN_TRY(be->concat_forward(ctx, n, (int)S->out_count, 1, out_row,
                                   (int)net->part_y_off[j], net->part_dy, dy));
    }
    return CNN_OK;
}

void net_take_sums(const cnn_net *net, const float *s, double total[2], double *parts)
{
    double loss = s[0];
    for (int j = 0; j < net->n_parts; j++) {
        loss += (double)net->parts[j].weight * (double)s[2 + 2 * j];
        if (parts) {
            parts[2 * j] += s[2 + 2 * j];
            parts[2 * j + 1] += s[3 + 2 * j];
        }
    }
    total[0] += loss;
    total[1] += s[1];
}

int cnn_net_part_count(const cnn_net *net) { return net->n_parts; }

long cnn_net_target_width(const cnn_net *net) { return (long)net_target_elems(net); }

void cnn_net_part_sums(const cnn_net *net, double *out)
{
    for (int j = 0; j < 2 * net->n_parts; j++) out[j] = net->part_sums[j];
}
