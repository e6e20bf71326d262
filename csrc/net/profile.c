/* profile.c: the time of each planned step of a training step
 * (cnn_net_profile).
 *
 * A profiled step is an ordinary training step (train_batch's: the forward
 * plan with its loss, the backward plan, the optimizer update), queued one
 * planned step at a time, never recorded, with a mark before each planned
 * step, one before the optimizer and one at the end. The GPU engines mark
 * their own clock (CUDA events on the stream, timer_mark), so the steps run
 * back to back as in training and only the events are added; the host
 * engines, whose calls return when their work is done, read a monotonic
 * clock at each mark. Interval k is the time from mark k to mark k + 1: the
 * planned step that mark k precedes, with whatever small work the Net queues
 * between two steps (the forward counter's move goes to the first step, the
 * optimizer's counters to the update). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <time.h>

#include "net_private.h"

/* The first of the engine clock's marks a profile uses (0 and 1 time
 * train_range). */
#define FIRST_MARK 2
#define MAX_INTERVALS (CNN_TIMER_MARKS - FIRST_MARK - 1)

struct net_profile {
    int n;                            /* marks made in the current step */
    const char *names[MAX_INTERVALS]; /* interval k: the step after mark k */
    double host_t[MAX_INTERVALS + 1]; /* host engines: seconds at each mark */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

cnn_status net_profile_mark(cnn_net *net, const char *next)
{
    net_profile *p = net->prof;
    if (p->n > MAX_INTERVALS)
        return cnn_set_error(CNN_ERR_VALUE,
                             "profile: a training step of more than %d planned steps cannot be "
                             "profiled", MAX_INTERVALS);
    const int k = p->n++;
    if (k < MAX_INTERVALS) p->names[k] = next;
    if (net->be->timer_mark) return net->be->timer_mark(net->ctx, FIRST_MARK + k);
    p->host_t[k] = now_s();
    return CNN_OK;
}

/* Seconds from mark k to mark k + 1, added to seconds[k], for every
 * interval of the step just marked. */
static cnn_status add_intervals(cnn_net *net, double *seconds)
{
    const net_profile *p = net->prof;
    for (int k = 0; k + 1 < p->n; k++) {
        double s = p->host_t[k + 1] - p->host_t[k];
        if (net->be->timer_elapsed)
            CNN_TRY(net->be->timer_elapsed(net->ctx, FIRST_MARK + k, FIRST_MARK + k + 1, &s));
        seconds[k] += s;
    }
    return CNN_OK;
}

/* One marked training step on the batch staged in net->x and the targets. */
static cnn_status marked_step(cnn_net *net, int n)
{
    net->prof->n = 0;
    CNN_TRY(net->be->zero(net->ctx, net->sums, (size_t)net->n_sums * sizeof(float)));
    CNN_TRY(net_train_pass(net, &(run_args){.n = n, .scale_n = n, .sums = net->sums}));
    CNN_TRY(net_loss_unscale(net)); /* dynamic loss scaling (nothing without it) */
    CNN_TRY(net_profile_mark(net, "optimizer"));
    CNN_TRY(net_optimizer_step(net, 0, COUNTERS_TO_MOVE));
    return net_profile_mark(net, NULL);
}

static cnn_status profile_steps(cnn_net *net, int n, int steps, double *seconds, int cap,
                                int *count, const char **names)
{
    CNN_TRY(marked_step(net, n)); /* untimed: first uses (cuDNN's choices, workspaces) */
    const int intervals = net->prof->n - 1;
    if (intervals > cap)
        return cnn_set_error(CNN_ERR_VALUE, "profile: %d intervals, room for %d", intervals,
                             cap);
    for (int k = 0; k < intervals; k++) seconds[k] = 0.0;
    for (int s = 0; s < steps; s++) {
        CNN_TRY(marked_step(net, n));
        CNN_TRY(add_intervals(net, seconds));
    }
    for (int k = 0; k < intervals; k++) {
        seconds[k] /= steps;
        names[k] = net->prof->names[k];
    }
    *count = intervals;
    return CNN_OK;
}

cnn_status cnn_net_profile(cnn_net *net, int n, const float *x_host, const int32_t *labels_host,
                           const float *targets_host, int steps, double *seconds,
                           const char **names, int cap, int *count)
{
    *count = 0;
    if (net->comm) return net_refuse_replica(net, "profile");
    if (steps < 1)
        return cnn_set_error(CNN_ERR_VALUE, "steps: expected at least 1, got %d", steps);
    CNN_TRY(net_stage_batch(net, n, x_host, labels_host, targets_host));
    net_profile *p = calloc(1, sizeof *p);
    if (!p) return cnn_set_error(CNN_ERR_MEMORY, "profile: out of host memory");
    net->prof = p;
    cnn_status st = profile_steps(net, n, steps, seconds, cap, count, names);
    net->prof = NULL;
    free(p);
    return st;
}
