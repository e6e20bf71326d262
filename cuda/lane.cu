// lane.cu: the cuda engine's side lane (cnn.h's lane_fork, lane_back,
// lane_join). A step's kernels are small at small batches and run one after
// another on the context's stream, leaving most of the GPU idle; the Net lets
// a conv or dense layer's filter gradient (dW, db) run on a second stream
// while the same layer's data gradient (dX) runs on the main one:
//
//   main:  ... -> record `forked` ------------ dX ---- wait `joined` -> next layer
//   side:          wait `forked` -> dW, db -> record `joined`
//
// Same kernels, same arguments, so the same bits. The side lane has its own
// split-K scratch (the SGEMM's and the bias sums' partials), swapped in with
// the stream, so the two lanes share nothing but what both only read (dy,
// and for conv the workspace's column matrix; conv2d.cu gives the data
// gradient its own regions). Recorded steps: the side stream joins the main
// stream's capture by waiting on `forked`, and is joined back by the main
// stream's wait on `joined` before the next layer, so before capture end.
// CNNCUDA_LANES=0 (read when the context is made) turns it off, and so does
// CNNCUDA_SGEMM=tile64 (that path's data gradient reads the rearranged dy
// the filter gradient leaves in the workspace: the engine before lanes).
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_ops.h"

namespace {

void release(cnn_cuda_impl *impl)
{
    if (impl->lane.forked) cudaEventDestroy(impl->lane.forked);
    if (impl->lane.joined) cudaEventDestroy(impl->lane.joined);
    if (impl->lane.side_scratch) cudaFree(impl->lane.side_scratch);
    if (impl->lane.side) cudaStreamDestroy(impl->lane.side);
    impl->lane.forked = impl->lane.joined = NULL;
    impl->lane.side_scratch = NULL;
    impl->lane.side = NULL;
    impl->lane.usable = 0;
}

// The main lane current again (the side lane's work still queued).
void back_to_main(cnn_cuda_impl *impl)
{
    impl->stream = impl->lane.main;
    impl->scratch = impl->lane.main_scratch;
}

} // namespace

// Called by cuda_ctx_create after cnn_cuda_impl_init, with the device current.
cnn_status cnn_cuda_lane_init(cnn_cuda_impl *impl)
{
    impl->lane.main = impl->stream;
    impl->lane.main_scratch = impl->scratch;
    const char *env = getenv("CNNCUDA_LANES");
    if ((env && strcmp(env, "0") == 0) || impl->sgemm_kernel == CNN_SGEMM_TILE64) return CNN_OK;
    cudaError_t err = cudaStreamCreateWithFlags(&impl->lane.side, cudaStreamNonBlocking);
    if (err == cudaSuccess)
        err = cudaEventCreateWithFlags(&impl->lane.forked, cudaEventDisableTiming);
    if (err == cudaSuccess)
        err = cudaEventCreateWithFlags(&impl->lane.joined, cudaEventDisableTiming);
    if (err == cudaSuccess)
        err = cudaMalloc((void **)&impl->lane.side_scratch, impl->scratch_floats * sizeof(float));
    if (err != cudaSuccess) {
        release(impl);
        return cnn_cuda_status(err, "creating the cuda context's side lane");
    }
    impl->lane.usable = 1;
    return CNN_OK;
}

// Called from cnn_cuda_impl_fini, before the main stream is released.
void cnn_cuda_lane_fini(cnn_cuda_impl *impl)
{
    if (impl->lane.main) back_to_main(impl); // never left open by the Net; to be sure
    impl->lane.open = 0;
    if (impl->lane.side) cudaStreamSynchronize(impl->lane.side);
    release(impl);
}

// Forks when the context has a side lane and none is open: the side stream
// waits for everything queued on the main one so far, and becomes current
// with its scratch. *forked = 0 (nothing changed) otherwise, and on error.
cnn_status cuda_lane_fork(cnn_ctx *ctx, int *forked)
{
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    *forked = 0;
    if (!impl->lane.usable || impl->lane.open) return CNN_OK;
    CNN_CUDA_TRY(cudaEventRecord(impl->lane.forked, impl->lane.main), "forking the side lane");
    CNN_CUDA_TRY(cudaStreamWaitEvent(impl->lane.side, impl->lane.forked, 0),
                 "forking the side lane");
    impl->stream = impl->lane.side;
    impl->scratch = impl->lane.side_scratch;
    impl->lane.open = 1;
    *forked = 1;
    return CNN_OK;
}

// The main lane current again; the side lane stays open (its work queued).
void cuda_lane_back(cnn_ctx *ctx)
{
    back_to_main((cnn_cuda_impl *)ctx->impl);
}

// The main stream waits for the side lane's work; the lane is closed and the
// main lane current whatever happens.
cnn_status cuda_lane_join(cnn_ctx *ctx)
{
    cnn_cuda_impl *impl = (cnn_cuda_impl *)ctx->impl;
    back_to_main(impl);
    if (!impl->lane.open) return CNN_OK;
    impl->lane.open = 0;
    cudaError_t err = cudaEventRecord(impl->lane.joined, impl->lane.side);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(impl->lane.main, impl->lane.joined, 0);
    if (err != cudaSuccess) {
        const cnn_status st = cnn_cuda_status(err, "joining the side lane");
        // Outside a capture: no side work may outlive the join. (Inside one,
        // the capture has failed already and this fails too.)
        cudaStreamSynchronize(impl->lane.side);
        cudaGetLastError();
        return st;
    }
    return CNN_OK;
}
