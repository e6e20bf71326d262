// loss_sums.cuh: the end of the loss kernels (loss.cu, loss_regression.cu):
// their warps' loss sums and correct counts to the context's sums, in one
// fixed order. (Not in loss_rows.cuh, which dev/emu compiles on the host
// without the grid-wide pieces this uses.)
#ifndef CNN_CUDA_LOSS_SUMS_CUH
#define CNN_CUDA_LOSS_SUMS_CUH

#include "cuda_common.cuh"

namespace { // internal linkage: every .cu that includes this has its own copy

// The end of a loss kernel of WARPS warps a block, each warp holding its
// rows' loss and correct count in every lane: the warps' sums (part, the
// block's shared memory), then, with several blocks, the blocks' sums added
// in block order by the last block (meet); a sample of `positions` rows
// counts their means; sums[0] and sums[1] get one float addition each, as
// the cpu engine's. Every thread of the block calls it.
template <int WARPS>
static __device__ void loss_block_sums(double (*part)[WARPS], double loss, double correct,
                                       cnn_cuda_meet *meet, int positions, float *sums)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        part[0][warp] = loss;
        part[1][warp] = correct;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    double l = 0.0, c = 0.0;
    for (int w = 0; w < WARPS; ++w) {
        l += part[0][w];
        c += part[1][w];
    }
    if (gridDim.x > 1) {
        meet->loss_parts[0][blockIdx.x] = l;
        meet->loss_parts[1][blockIdx.x] = c;
        if (!cnn_last_block(&meet->tickets[CNN_TICKET_LOSS])) return;
        l = c = 0.0;
        for (unsigned b = 0; b < gridDim.x; ++b) {
            l += __ldcg(&meet->loss_parts[0][b]);
            c += __ldcg(&meet->loss_parts[1][b]);
        }
    }
    if (positions > 1) {
        l /= (double)positions;
        c /= (double)positions;
    }
    sums[0] += (float)l;
    sums[1] += (float)c;
}

} // namespace

#endif
