/* evaluate.c: evaluate and predict over arrays larger than a batch (a part
 * at a time), and the validation data of a fit call. */
#include <string.h>

#include "net_private.h"

/* Samples whose float32 rows an evaluate or predict call holds on the
 * engine at a time (at least one batch): an array larger than this is
 * converted, uploaded and run a part after another. */
#define CNN_EVAL_PART_BYTES ((size_t)256 << 20)


/* x from its sample `at` on: the same array, its errors' indices kept. */
static cnn_host_array rows_from(const cnn_net *net, const cnn_host_array *x, long at)
{
    cnn_host_array rows = *x;
    const size_t values = (size_t)at * net->in_count;
    rows.data = (const char *)x->data + values * cnn_dtype_bytes(x->dtype);
    rows.index0 = x->index0 + values;
    return rows;
}

static long eval_part_rows(const cnn_net *net, long n)
{
    long part = (long)(CNN_EVAL_PART_BYTES / (net->in_count * sizeof(float)));
    part -= part % net->max_batch;
    if (part < net->max_batch) part = net->max_batch;
    return part < n ? part : n;
}

long net_batch_count(const cnn_net *net, long n)
{
    return (n + net->max_batch - 1) / net->max_batch;
}

/* Queues the inference of the n rows of x (engine memory, NCHW) against
 * their targets (engine memory: labels, or targets (n, k)), max_batch at a
 * time, each batch copied into net->x: batch b's float32 loss and correct
 * sums, as the engine adds them, into sums[n_sums b], sums[n_sums b + 1]
 * (with several outputs, their sums after them: loss_parts.c; zeroed here).
 * Nothing is read back: a GPU engine may record it all. */
static cnn_status queue_evaluation(cnn_net *net, long n, const float *x, const int32_t *labels,
                                   const float *targets, float *sums)
{
    const cnn_backend *be = net->be;
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    const long batches = net_batch_count(net, n);
    const int per = net->n_sums; /* 2, or 2 + 2 per output of several */
    CNN_TRY(be->zero(net->ctx, sums, (size_t)batches * per * sizeof(float)));
    for (long b = 0; b < batches; b++) {
        const long start = b * net->max_batch;
        const int m = (int)(n - start < net->max_batch ? n - start : net->max_batch);
        CNN_TRY(be->copy(net->ctx, net->x, x + (size_t)start * net->in_count,
                         (size_t)m * net->in_count * sizeof(float)));
        if (sparse)
            CNN_TRY(be->copy(net->ctx, net->labels, labels + (size_t)start * net_target_elems(net),
                             (size_t)m * net_target_elems(net) * sizeof(int32_t)));
        else
            CNN_TRY(be->copy(net->ctx, net->targets,
                             targets + (size_t)start * net_target_elems(net),
                             (size_t)m * net_target_elems(net) * sizeof(float)));
        CNN_TRY(net_run_forward(net, PLAN_FORWARD, &(run_args){.n = m}));
        CNN_TRY(net_loss_device(net, m, sums + (size_t)per * b));
        CNN_TRY(net_regularize(net, (float)m, NULL, sums + (size_t)per * b)); /* Keras's loss */
    }
    return CNN_OK;
}

/* The batch sums of queue_evaluation added into total in double, in batch
 * order (the bits of batches staged from the host one by one): one
 * download. */
static cnn_status add_batch_sums(cnn_net *net, long batches, const float *sums, double total[2])
{
    const size_t per = (size_t)net->n_sums;
    float *host = malloc((size_t)batches * per * sizeof(float));
    if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory for %ld batch sums", batches);
    cnn_status st = net->be->download(net->ctx, host, sums, (size_t)batches * per * sizeof(float));
    for (long b = 0; b < batches && st == CNN_OK; b++)
        net_take_sums(net, host + per * b, total, net->part_sums);
    free(host);
    return st;
}

/* The inference of n resident rows (queue_evaluation), their sums added
 * into total (add_batch_sums). */
static cnn_status evaluate_rows(cnn_net *net, long n, const float *x, const int32_t *labels,
                                const float *targets, double total[2])
{
    const long batches = net_batch_count(net, n);
    float *sums = NULL;
    cnn_status st = net->be->alloc(net->ctx, (void **)&sums,
                                   (size_t)batches * (size_t)net->n_sums * sizeof(float));
    if (st == CNN_OK) st = queue_evaluation(net, n, x, labels, targets, sums);
    if (st == CNN_OK) st = add_batch_sums(net, batches, sums, total);
    if (sums) net->be->free(net->ctx, sums);
    return st;
}

static size_t target_bytes(const cnn_net *net, long n)
{
    return (size_t)n * net_target_elems(net) * 4; /* int32 labels or float targets */
}

/* Engine memory for n resident rows: *x_dev (n, in_count), *t_dev their
 * targets. Either may be set when it fails: the caller frees them. */
cnn_status net_alloc_rows(cnn_net *net, long n, float **x_dev, void **t_dev)
{
    CNN_TRY(net->be->alloc(net->ctx, (void **)x_dev, (size_t)n * net->in_count * sizeof(float)));
    return net->be->alloc(net->ctx, t_dev, target_bytes(net, n));
}

/* n samples of x converted and uploaded into x_dev, their targets into
 * t_dev (both from alloc_rows). */
cnn_status net_fill_rows(cnn_net *net, long n, const cnn_host_array *x,
                         const int32_t *labels_host, const float *targets_host, float *x_dev,
                         void *t_dev)
{
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    CNN_TRY(net_upload_samples(net, x_dev, n, x));
    return net->be->upload(net->ctx, t_dev,
                           sparse ? (const void *)labels_host : (const void *)targets_host,
                           target_bytes(net, n));
}

cnn_status net_check_targets_given(const cnn_net *net, const char *what,
                                   const int32_t *labels_host, const float *targets_host)
{
    int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    if (sparse ? !labels_host : !targets_host)
        return cnn_set_error(CNN_ERR_VALUE, "%s needs %s", what, sparse ? "labels" : "targets");
    return CNN_OK;
}

cnn_status cnn_net_evaluate(cnn_net *net, long n, const cnn_host_array *x,
                            const int32_t *labels_host, const float *targets_host,
                            double *loss_sum, double *correct)
{
    if (n < 1) return cnn_set_error(CNN_ERR_VALUE, "evaluate needs at least one sample, got %ld", n);
    CNN_TRY(net_check_loss_ready(net));
    CNN_TRY(net_check_targets_given(net, "evaluate", labels_host, targets_host));
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    const long part = eval_part_rows(net, n);
    double total[2] = {0.0, 0.0};
    memset(net->part_sums, 0, sizeof net->part_sums);
    cnn_status st = CNN_OK;
    for (long at = 0; at < n && st == CNN_OK; at += part) {
        const long m = n - at < part ? n - at : part;
        const cnn_host_array rows = rows_from(net, x, at);
        float *x_dev = NULL;
        void *t_dev = NULL;
        st = net_alloc_rows(net, m, &x_dev, &t_dev);
        if (st == CNN_OK)
            st = net_fill_rows(net, m, &rows,
                               sparse ? labels_host + (size_t)at * net_target_elems(net) : NULL,
                               sparse ? NULL : targets_host + (size_t)at * net_target_elems(net),
                               x_dev, t_dev);
        if (st == CNN_OK)
            st = evaluate_rows(net, m, x_dev, sparse ? t_dev : NULL, sparse ? NULL : t_dev, total);
        if (x_dev) net->be->free(net->ctx, x_dev);
        if (t_dev) net->be->free(net->ctx, t_dev);
    }
    CNN_TRY(st);
    *loss_sum = total[0];
    *correct = total[1];
    return CNN_OK;
}

static void drop_validation(cnn_net *net)
{
    void *blocks[] = {net->val_x, net->val_labels, net->val_targets, net->val_sums};
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++)
        if (blocks[k]) net->be->free(net->ctx, blocks[k]);
    net->val_x = NULL;
    net->val_labels = NULL;
    net->val_targets = NULL;
    net->val_sums = NULL;
    net->val_n = 0;
}

/* As many samples as the validation data held: the same blocks are filled
 * again, else new ones are made. A failure drops the validation data. */
cnn_status cnn_net_set_validation(cnn_net *net, long n, const cnn_host_array *x,
                                  const int32_t *labels_host, const float *targets_host)
{
    if (n < 0) return cnn_set_error(CNN_ERR_VALUE, "set_validation needs n >= 0, got %ld", n);
    if (n != net->val_n) drop_validation(net);
    if (n == 0) return CNN_OK;
    CNN_TRY(net_check_loss_ready(net));
    CNN_TRY(net_check_targets_given(net, "set_validation", labels_host, targets_host));
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    cnn_status st = CNN_OK;
    if (!net->val_x) {
        float *x_dev = NULL;
        void *t_dev = NULL;
        st = net_alloc_rows(net, n, &x_dev, &t_dev);
        net->val_x = x_dev;
        if (sparse)
            net->val_labels = t_dev;
        else
            net->val_targets = t_dev;
        if (st == CNN_OK)
            st = net->be->alloc(net->ctx, (void **)&net->val_sums,
                                (size_t)net_batch_count(net, n) * (size_t)net->n_sums *
                                    sizeof(float));
    }
    net->val_n = n;
    if (st == CNN_OK)
        st = net_fill_rows(net, n, x, labels_host, targets_host, net->val_x,
                           sparse ? (void *)net->val_labels : (void *)net->val_targets);
    if (st == CNN_OK) st = net->be->synchronize(net->ctx);
    if (st != CNN_OK) drop_validation(net);
    return st;
}

cnn_status cnn_net_evaluate_validation(cnn_net *net, double *loss_sum, double *correct)
{
    if (!net->val_n) return cnn_set_error(CNN_ERR_VALUE, "evaluate_validation needs set_validation first");
    double total[2] = {0.0, 0.0};
    memset(net->part_sums, 0, sizeof net->part_sums);
    /* (recording the whole pass, one launch an epoch, was measured and
     * dropped: on an H100 the replay took 0.022 s against 0.028 queued, and
     * the capture 0.06 s more, paid back only after ten epochs) */
    CNN_TRY(queue_evaluation(net, net->val_n, net->val_x, net->val_labels, net->val_targets,
                             net->val_sums));
    CNN_TRY(add_batch_sums(net, net_batch_count(net, net->val_n), net->val_sums, total));
    *loss_sum = total[0];
    *correct = total[1];
    return CNN_OK;
}

/* The outputs of the n rows of x (engine memory, NCHW) in inference mode,
 * max_batch at a time, gathered in out (engine memory, (n, out_count) in
 * Keras order), then one download to y_host. */
static cnn_status predict_rows(cnn_net *net, long n, const float *x, float *out, float *y_host)
{
    const cnn_backend *be = net->be;
    const layer *last = &net->layers[net->n_layers - 1];
    for (long start = 0; start < n; start += net->max_batch) {
        const int m = (int)(n - start < net->max_batch ? n - start : net->max_batch);
        float *dst = out + (size_t)start * last->out_count;
        CNN_TRY(be->copy(net->ctx, net->x, x + (size_t)start * net->in_count,
                         (size_t)m * net->in_count * sizeof(float)));
        CNN_TRY(net_run_forward(net, PLAN_FORWARD, &(run_args){.n = m}));
        if (last->out_rank == 4)
            CNN_TRY(be->nhwc_from_nchw(net->ctx, m, last->out_h, last->out_w, last->out_c,
                                       last->y, dst));
        else
            CNN_TRY(be->copy(net->ctx, dst, last->y, (size_t)m * last->out_count * sizeof(float)));
    }
    return be->download(net->ctx, y_host, out, (size_t)n * last->out_count * sizeof(float));
}

cnn_status cnn_net_predict(cnn_net *net, long n, const cnn_host_array *x, float *y_host)
{
    if (n < 1) return cnn_set_error(CNN_ERR_VALUE, "predict needs at least one sample, got %ld", n);
    const long part = eval_part_rows(net, n);
    const size_t out_count = net->layers[net->n_layers - 1].out_count;
    float *x_dev = NULL, *out = NULL;
    cnn_status st = net->be->alloc(net->ctx, (void **)&x_dev,
                                   (size_t)part * net->in_count * sizeof(float));
    if (st == CNN_OK) st = net->be->alloc(net->ctx, (void **)&out, (size_t)part * out_count * sizeof(float));
    for (long at = 0; at < n && st == CNN_OK; at += part) {
        const long m = n - at < part ? n - at : part;
        const cnn_host_array rows = rows_from(net, x, at);
        st = net_upload_samples(net, x_dev, m, &rows);
        if (st == CNN_OK) st = predict_rows(net, m, x_dev, out, y_host + (size_t)at * out_count);
    }
    if (x_dev) net->be->free(net->ctx, x_dev);
    if (out) net->be->free(net->ctx, out);
    return st;
}
