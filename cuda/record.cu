// record.cu: a training step recorded once and replayed (a CUDA graph), and
// the engine's clock (CUDA events), for the cuda and cudnn engines.
//
// The Net queues one step on the context's stream in capture mode: nothing
// runs, every kernel, copy and library call is recorded with its arguments.
// What changes from step to step (the batch's position in the epoch's
// order, dropout's key, Adam's step) is read by the kernels from the Net's
// counters in device memory, and so are the optimizer's hyperparameters
// (cnn.h CNN_HYPER_*, which cnn_net_set_optimizer may change between
// replays), so the same recording serves every step.
// Capture is thread-local: a call on this thread that is not allowed while
// capturing (a synchronisation, an allocation) fails instead of running.
#include <stdlib.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

struct cnn_cuda_recording {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

// Turns every edge from one kernel to the next into a programmatic one: the
// second kernel is launched while the first runs, its blocks placed as the
// first one's exit, and waits in its cnn_kernel_begin until the first has
// finished and its writes are visible. The launch then overlaps the kernel
// before instead of following it: at batch 32 a step is some 40 short
// kernels in a chain.
// Edges to or from copies and memsets stay as they were.
static cudaError_t launch_early(cudaGraph_t graph)
{
    size_t count = 0;
    cudaError_t err = cudaGraphGetEdges(graph, NULL, NULL, NULL, &count);
    if (err != cudaSuccess || count == 0) return err;
    cudaGraphNode_t *from = (cudaGraphNode_t *)malloc(count * sizeof *from);
    cudaGraphNode_t *to = (cudaGraphNode_t *)malloc(count * sizeof *to);
    cudaGraphEdgeData *data = (cudaGraphEdgeData *)malloc(count * sizeof *data);
    if (!from || !to || !data) err = cudaErrorMemoryAllocation;
    if (err == cudaSuccess) err = cudaGraphGetEdges(graph, from, to, data, &count);
    for (size_t i = 0; err == cudaSuccess && i < count; i++) {
        cudaGraphNodeType a, b;
        err = cudaGraphNodeGetType(from[i], &a);
        if (err == cudaSuccess) err = cudaGraphNodeGetType(to[i], &b);
        if (err != cudaSuccess || a != cudaGraphNodeTypeKernel || b != cudaGraphNodeTypeKernel ||
            data[i].type != cudaGraphDependencyTypeDefault)
            continue;
        cudaGraphEdgeData early = {};
        early.from_port = cudaGraphKernelNodePortProgrammatic;
        early.type = cudaGraphDependencyTypeProgrammatic;
        err = cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1);
        if (err == cudaSuccess) err = cudaGraphAddDependencies(graph, &from[i], &to[i], &early, 1);
    }
    free(from);
    free(to);
    free(data);
    return err;
}

cnn_status cuda_capture_begin(cnn_ctx *ctx)
{
    CNN_CUDA_TRY(cudaStreamBeginCapture(cnn_stream(ctx), cudaStreamCaptureModeThreadLocal),
                 "starting to record a training step");
    return CNN_OK;
}

// Ends the capture whatever happened while it ran (a failed capture leaves
// the stream usable), then makes the recording runnable.
cnn_status cuda_capture_end(cnn_ctx *ctx, void **recording)
{
    *recording = NULL;
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(cnn_stream(ctx), &graph);
    if (err != cudaSuccess) {
        if (graph) cudaGraphDestroy(graph);
        return cnn_cuda_status(err, "recording a training step");
    }
    cnn_cuda_recording *rec = (cnn_cuda_recording *)calloc(1, sizeof *rec);
    if (!rec) {
        cudaGraphDestroy(graph);
        return cnn_set_error(CNN_ERR_MEMORY, "out of host memory recording a training step");
    }
    rec->graph = graph;
    if (((cnn_cuda_impl *)ctx->impl)->early_launch) err = launch_early(graph);
    if (err == cudaSuccess) err = cudaGraphInstantiate(&rec->exec, graph, 0);
    if (err != cudaSuccess) {
        cudaGraphDestroy(graph);
        free(rec);
        return cnn_cuda_status(err, "preparing a recorded training step");
    }
    *recording = rec;
    return CNN_OK;
}

cnn_status cuda_replay(cnn_ctx *ctx, void *recording, long times)
{
    cnn_cuda_recording *rec = (cnn_cuda_recording *)recording;
    for (long i = 0; i < times; i++)
        CNN_CUDA_TRY(cudaGraphLaunch(rec->exec, cnn_stream(ctx)), "replaying a training step");
    return CNN_OK;
}

void cuda_recording_free(cnn_ctx *ctx, void *recording)
{
    cnn_cuda_recording *rec = (cnn_cuda_recording *)recording;
    if (!rec) return;
    cudaStreamSynchronize(cnn_stream(ctx)); // a replay may still be running
    cudaGraphExecDestroy(rec->exec);
    cudaGraphDestroy(rec->graph);
    free(rec);
}

cnn_status cuda_timer_mark(cnn_ctx *ctx, int which)
{
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    if (which < 0 || which >= CNN_TIMER_MARKS)
        return cnn_set_error(CNN_ERR_INTERNAL, "timer_mark: mark %d is not in [0, %d)", which,
                             CNN_TIMER_MARKS);
    if (!impl->marks[which])
        CNN_CUDA_TRY(cudaEventCreate(&impl->marks[which]), "creating a CUDA event");
    CNN_CUDA_TRY(cudaEventRecord(impl->marks[which], impl->stream), "recording a CUDA event");
    return CNN_OK;
}

cnn_status cuda_timer_elapsed(cnn_ctx *ctx, int from, int to, double *seconds)
{
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    if (from < 0 || to < 0 || from >= CNN_TIMER_MARKS || to >= CNN_TIMER_MARKS ||
        !impl->marks[from] || !impl->marks[to])
        return cnn_set_error(CNN_ERR_INTERNAL, "timer_elapsed: mark %d or %d was never made",
                             from, to);
    CNN_CUDA_TRY(cudaEventSynchronize(impl->marks[to]), "waiting for a CUDA event");
    float ms = 0.0f;
    CNN_CUDA_TRY(cudaEventElapsedTime(&ms, impl->marks[from], impl->marks[to]),
                 "reading CUDA events");
    *seconds = ms / 1000.0;
    return CNN_OK;
}
