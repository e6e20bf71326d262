/* replica.c: data parallel: a Net as one replica of a group (set_comm),
 * its gradients and sums reduced across the group. */
#include "net_private.h"

cnn_status net_refuse_replica(const cnn_net *net, const char *what)
{
    return cnn_set_error(CNN_ERR_VALUE,
                         "%s: this network is replica %d of %d of a data-parallel group; it "
                         "trains with train_range (fit), on every replica at once",
                         what, net->comm->rank, net->comm->world);
}

cnn_status cnn_net_set_comm(cnn_net *net, cnn_comm *comm)
{
    net_free_recording(net); /* a recorded step holds the old group's calls, or none */
    if (!comm) {
        net->comm = NULL;
        return CNN_OK;
    }
    if (net->n_parts)
        return cnn_set_error(CNN_ERR_VALUE,
                             "data parallel training of a network of several outputs (%d "
                             "losses) is not supported: train it on one engine",
                             net->n_parts);
    const int host_engine = net->be->activate == NULL;
    const int host_comm = strcmp(comm->kind, "host") == 0;
    if (host_engine != host_comm)
        return cnn_set_error(CNN_ERR_VALUE,
                             "comm: the %s engine's replicas need %s communicator, got a '%s' "
                             "one",
                             net->be->name, host_engine ? "a 'host'" : "an 'nccl'", comm->kind);
    if (!host_comm && comm->device != net->ctx->device)
        return cnn_set_error(CNN_ERR_VALUE,
                             "comm: expected a communicator on this network's CUDA device %d, "
                             "got one on device %d",
                             net->ctx->device, comm->device);
    /* First a barrier that checks every rank built a network of the same
     * sizes (the broadcasts below, and NCCL's all-reduces, need that): the
     * sizes mod 65521 summed over at most 256 ranks stay exact in float. */
    if (comm->world > 256)
        return cnn_set_error(CNN_ERR_VALUE, "comm: at most 256 replicas, got %d", comm->world);
    const float check[2] = {(float)(net->n_params % 65521), (float)(net->n_state % 65521)};
    float sum[2];
    CNN_TRY(net->be->upload(net->ctx, net->sums, check, sizeof check));
    CNN_TRY(comm->allreduce(comm, net->ctx, net->sums, 2, CNN_REDUCE_SUM));
    CNN_TRY(comm->wait(comm, net->ctx));
    CNN_TRY(net->be->download(net->ctx, sum, net->sums, sizeof sum));
    if (sum[0] != check[0] * (float)comm->world || sum[1] != check[1] * (float)comm->world) {
        comm->abort(comm, "the ranks built networks of different sizes");
        return cnn_set_error(CNN_ERR_VALUE,
                             "comm: the ranks built networks of different sizes (this one: %zu "
                             "parameters, %zu state values): are all ranks training the same "
                             "model?",
                             net->n_params, net->n_state);
    }
    /* every replica starts from rank 0's weights, state and optimizer moments */
    float *blocks[] = {net->params, net->state, net->opt_m, net->opt_v, net->opt_a};
    size_t counts[] = {net->n_params, net->n_state, net->n_params, net->n_params, net->n_params};
    for (int k = 0; k < 5; k++)
        if (blocks[k] && counts[k])
            CNN_TRY(comm->broadcast(comm, net->ctx, blocks[k], counts[k]));
    CNN_TRY(comm->wait(comm, net->ctx));
    net->comm = comm;
    return CNN_OK;
}

cnn_status cnn_net_reduce_sums(cnn_net *net)
{
    if (!net->comm) return CNN_OK;
    return net->comm->allreduce(net->comm, net->ctx, net->run_sums, 2, CNN_REDUCE_SUM);
}

cnn_status cnn_net_activate(cnn_net *net)
{
    return net->be->activate ? net->be->activate(net->ctx) : CNN_OK;
}
