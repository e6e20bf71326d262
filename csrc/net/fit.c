/* fit.c: resident training data (set_data), an epoch's order (set_order)
 * and train_range: steps gathered from the resident data, recorded once and
 * replayed on GPU engines. */
#include <string.h>

#include "net_private.h"

void net_free_recording(cnn_net *net)
{
    if (net->recording) net->be->recording_free(net->ctx, net->recording);
    net->recording = NULL;
    net->recorded_batch = 0;
}

static void free_data(cnn_net *net)
{
    net_free_recording(net); /* it reads the data blocks */
    void **blocks[] = {(void **)&net->data_x, (void **)&net->data_labels,
                       (void **)&net->data_targets, (void **)&net->order};
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
        if (*blocks[k]) net->be->free(net->ctx, *blocks[k]);
        *blocks[k] = NULL;
    }
    net->data_n = net->order_n = 0;
}

/* n samples of a (the user's layout and type) into dst as float32, NCHW
 * (the layout inside), converted and checked by the engine. */
cnn_status net_upload_samples(cnn_net *net, float *dst, long n, const cnn_host_array *a)
{
    return net->be->upload_samples(net->ctx, dst, a, n, net->in_h, net->in_w, net->in_c,
                                   net->transpose_in);
}

/* As many samples as the data held: the same blocks are filled again (a
 * recorded step stays valid: it holds addresses, not values), else new ones
 * are made. The order is dropped either way; a failure drops the data. */
cnn_status cnn_net_set_data(cnn_net *net, long n, const cnn_host_array *x_host,
                            const int32_t *labels_host, const float *targets_host)
{
    if (n < 1) return cnn_set_error(CNN_ERR_VALUE, "set_data needs at least one sample, got %ld", n);
    CNN_TRY(net_check_loss_ready(net));
    CNN_TRY(net_check_targets_given(net, "set_data", labels_host, targets_host));
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    cnn_status st = CNN_OK;
    if (net->data_x && net->data_n == n) {
        net->order_n = 0;
    } else {
        free_data(net);
        float *x = NULL;
        void *t = NULL;
        st = net_alloc_rows(net, n, &x, &t);
        net->data_x = x;
        if (sparse)
            net->data_labels = t;
        else
            net->data_targets = t;
        if (st == CNN_OK) st = net->be->alloc(net->ctx, (void **)&net->order, (size_t)n * sizeof(int32_t));
    }
    net->data_n = n;
    if (st == CNN_OK)
        st = net_fill_rows(net, n, x_host, labels_host, targets_host, net->data_x,
                           sparse ? (void *)net->data_labels : (void *)net->data_targets);
    if (st != CNN_OK) free_data(net);
    return st;
}

cnn_status cnn_net_set_order(cnn_net *net, const int32_t *order_host)
{
    if (!net->data_x) return cnn_set_error(CNN_ERR_VALUE, "set_order needs set_data first");
    for (long i = 0; i < net->data_n; i++)
        if (order_host[i] < 0 || order_host[i] >= net->data_n)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "order: expected indices in [0, %ld), got %d at position %ld",
                                 net->data_n, (int)order_host[i], i);
    CNN_TRY(net->be->upload(net->ctx, net->order, order_host, (size_t)net->data_n * sizeof(int32_t)));
    net->order_n = net->data_n;
    return CNN_OK;
}

/* This net's share of a batch of m rows: `rows` rows from row `row0` of
 * the batch. Alone, all of it; as replica r of w, the batch cut into w
 * consecutive parts whose sizes differ by at most one, the larger first. */
static void batch_share(const cnn_net *net, int m, int *rows, int64_t *row0)
{
    const int w = net->comm ? net->comm->world : 1, r = net->comm ? net->comm->rank : 0;
    const int part = m / w, extra = m % w;
    *rows = part + (r < extra);
    *row0 = (int64_t)r * part + (r < extra ? r : extra);
}

/* The gradient block summed over the replicas (each holds its share's sum
 * over the whole batch's mean), and the batchnorm moving statistics, which
 * each replica updated from its own share, averaged. Alone: nothing. */
static cnn_status reduce_gradients(cnn_net *net)
{
    cnn_comm *c = net->comm;
    if (!c || c->world == 1) return CNN_OK;
    CNN_TRY(c->allreduce(c, net->ctx, net->grads, net->n_params, CNN_REDUCE_SUM));
    if (net->n_state) CNN_TRY(c->allreduce(c, net->ctx, net->state, net->n_state, CNN_REDUCE_MEAN));
    return CNN_OK;
}

/* One training step of train_range on m rows from the order's current
 * position (the engine's CNN_COUNT_POSITION counter), which it moves on. A
 * replica of a data-parallel group takes its share of the m rows, scales
 * its loss's gradient by the whole batch (so the summed gradients are those
 * of the whole batch's mean) and adds up the gradients with the others. */
static cnn_status range_step(cnn_net *net, int m)
{
    const cnn_backend *be = net->be;
    int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    int mine;
    batch_share(net, m, &mine, &net->row0);
    const int32_t *order = net->order + net->row0;
    if (mine == 0) {
        /* fewer rows than replicas: this one adds nothing, but takes the
         * step with the others (its forward count moves on as theirs do) */
        CNN_TRY(be->zero(net->ctx, net->grads, net->n_params * sizeof(float)));
        CNN_TRY(be->advance_counters(net->ctx, net->counters, 1, 0, 0));
        net->train_forwards++;
        net->last_n = 0;
    } else {
        /* the rows (already NCHW) and their targets, and the counters moved
         * on for the whole step: one launch on a GPU (with gather_im2col,
         * the rows as the first convolution's column matrix) */
        const size_t t_bytes = net_target_elems(net) * 4; /* int32 or float */
        const void *src_t = sparse ? (const void *)net->data_labels
                                   : (const void *)net->data_targets;
        void *dst_t = sparse ? (void *)net->labels : (void *)net->targets;
        if (net->gather_im2col) {
            cnn_conv_desc d = net->layers[0].conv;
            d.n = mine;
            CNN_TRY(be->fused->gather_batch_im2col(net->ctx, order, net->counters, mine, m,
                                            net->in_count * sizeof(float), net->data_x, net->x,
                                            t_bytes, src_t, dst_t, &d, net->layers[0].ws));
        } else {
            CNN_TRY(be->gather_batch(net->ctx, order, net->counters, mine, m,
                                     net->in_count * sizeof(float), net->data_x, net->x,
                                     t_bytes, src_t, dst_t));
        }
        CNN_TRY(net_train_pass(net, &(run_args){.n = mine, .scale_n = m,
                                                .counted = COUNTERS_MOVED,
                                                .sums = net->run_sums}));
    }
    net->row0 = 0;
    CNN_TRY(reduce_gradients(net));
    CNN_TRY(net_loss_unscale(net));
    /* the regularizers' gradients once the group's are summed (each replica
     * adds them to the same sum), their penalty for this replica's rows */
    CNN_TRY(net_regularize(net, (float)mine, net->grads, net->run_sums));
    return net_optimizer_step(net, m, mine > 0 ? COUNTERS_MOVED : COUNTERS_TO_MOVE);
}

/* CNNCUDA_GRAPHS=0 (read when the Net was made) turns recording off (every
 * step is then queued one kernel at a time, as before it existed). */
static int recording_wanted(const cnn_net *net)
{
    return net->be->capture_begin && net->sw.graphs;
}

/* Records one step of `batch` rows: the step is queued on the engine's
 * stream in capture mode, so nothing runs; the host's counters are put back
 * as they were. */
static cnn_status record_step(cnn_net *net, int batch)
{
    net_free_recording(net);
    long steps = net->steps, forwards = net->train_forwards;
    CNN_TRY(net->be->capture_begin(net->ctx));
    cnn_status st = range_step(net, batch);
    void *rec = NULL;
    cnn_status end = net->be->capture_end(net->ctx, &rec);
    net->steps = steps;
    net->train_forwards = forwards;
    net->last_n = 0;
    if (st != CNN_OK) {
        if (rec) net->be->recording_free(net->ctx, rec);
        return st;
    }
    CNN_TRY(end);
    net->recording = rec;
    net->recorded_batch = batch;
    return CNN_OK;
}


/* A replica whose range fails tells the others (they would wait for its
 * gradients forever), keeping its own error as the one reported. */
cnn_status cnn_net_train_range(cnn_net *net, long start, long count, int batch)
{
    cnn_status st = net_train_range(net, start, count, batch);
    if (st != CNN_OK && net->comm) {
        char why[400];
        snprintf(why, sizeof why, "rank %d failed: %s", net->comm->rank, cnn_last_error());
        char mine[1024];
        snprintf(mine, sizeof mine, "%s", cnn_last_error());
        net->comm->abort(net->comm, why);
        cnn_set_error(st, "%s", mine);
    }
    return st;
}

cnn_status net_train_range(cnn_net *net, long start, long count, int batch)
{
    if (!net->order_n) return cnn_set_error(CNN_ERR_VALUE, "train_range needs set_data and set_order first");
    if (net->comm && batch >= 1) {
        const int w = net->comm->world;
        if ((batch + w - 1) / w > net->max_batch)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "batch size %d over %d replicas needs %d samples per replica, "
                                 "more than the max_batch %d this replica was built for",
                                 batch, w, (batch + w - 1) / w, net->max_batch);
    } else {
        CNN_TRY(net_check_batch(net, batch));
    }
    /* count > order_n - start, not start + count > order_n: that may overflow */
    if (start < 0 || count < 1 || count > net->order_n - start)
        return cnn_set_error(CNN_ERR_VALUE,
                             "train_range: expected 0 <= start and 1 <= count with start + count "
                             "<= %ld, got start %ld count %ld",
                             net->order_n, start, count);
    const cnn_backend *be = net->be;
    if (net->position < 0) {
        int64_t zero = 0;
        CNN_TRY(be->upload(net->ctx, net->counters + CNN_COUNT_POSITION, &zero, sizeof zero));
        net->position = 0;
    }
    CNN_TRY(be->advance_counters(net->ctx, net->counters, 0, 0, start - net->position));
    net->position = -1; /* until the range is queued whole */
    int timed = be->timer_mark != NULL;
    net->timed = 0;
    if (timed) CNN_TRY(be->timer_mark(net->ctx, 0));
    long full = count / batch;
    if (full >= 2 && recording_wanted(net)) {
        /* the first step runs as usual (an engine may choose algorithms or
         * set things up on first use, which a recording must not contain),
         * the rest are replays of one recorded step */
        if (net->recorded_batch != batch) {
            CNN_TRY(range_step(net, batch));
            full--;
            CNN_TRY(record_step(net, batch));
        }
        CNN_TRY(be->replay(net->ctx, net->recording, full));
        net->steps += full;
        net->train_forwards += full;
        full = 0;
    }
    for (long i = 0; i < full; i++) CNN_TRY(range_step(net, batch));
    if (count % batch) CNN_TRY(range_step(net, (int)(count % batch)));
    net->position = start + count;
    if (timed) {
        CNN_TRY(be->timer_mark(net->ctx, 1));
        net->timed = 1;
    }
    return CNN_OK;
}

/* Seconds the engine spent on the last train_range, on its own clock; -1
 * where the engine has no clock or no range was timed. */
cnn_status cnn_net_range_seconds(cnn_net *net, double *seconds)
{
    *seconds = -1.0;
    if (!net->timed || !net->be->timer_elapsed) return CNN_OK;
    return net->be->timer_elapsed(net->ctx, 0, 1, seconds);
}

/* Bytes of engine memory this network holds: its buffers (workspaces
 * included) and the resident training and validation data. */
size_t cnn_net_memory_bytes(const cnn_net *net)
{
    const size_t row = net->in_count * sizeof(float) +
                       net_target_elems(net) * 4; /* int32 labels or float targets */
    size_t data = (size_t)net->data_n * (row + sizeof(int32_t));
    if (net->val_n)
        data += (size_t)net->val_n * row +
                (size_t)net_batch_count(net, net->val_n) * (size_t)net->n_sums * sizeof(float);
    return net->planned + data;
}

cnn_status cnn_net_read_sums(cnn_net *net, int reset, double *loss_sum, double *correct)
{
    float sums[2 + 2 * CNN_MAX_OUTPUTS];
    /* a replica's engine may be waiting for a peer: wait in a way that an
     * abort or the timeout ends */
    if (net->comm) CNN_TRY(net->comm->wait(net->comm, net->ctx));
    CNN_TRY(net->be->download(net->ctx, sums, net->run_sums, (size_t)net->n_sums * sizeof(float)));
    double total[2] = {0.0, 0.0};
    memset(net->part_sums, 0, sizeof net->part_sums);
    net_take_sums(net, sums, total, net->part_sums);
    *loss_sum = total[0];
    *correct = total[1];
    if (reset)
        CNN_TRY(net->be->zero(net->ctx, net->run_sums, (size_t)net->n_sums * sizeof(float)));
    return CNN_OK;
}
