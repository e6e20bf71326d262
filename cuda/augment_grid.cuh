// augment_grid.cuh: the launch shape of the augmentation kernels
// (random_*.cu): one column of blocks per sample (blockIdx.x, so that the
// sample's draws are made once, by thread 0, into shared memory) and up to
// 1024 blocks (blockIdx.y) striding over the sample's `per_sample` outputs.
#ifndef CNN_AUGMENT_GRID_CUH
#define CNN_AUGMENT_GRID_CUH

#include "cuda_common.cuh"

static inline dim3 cnn_augment_grid(int n, size_t per_sample)
{
    size_t tiles = (per_sample + CNN_THREADS - 1) / CNN_THREADS;
    if (tiles < 1) tiles = 1;
    if (tiles > 1024) tiles = 1024;
    return dim3((unsigned)n, (unsigned)tiles);
}

// The first output of this thread in its sample, and the stride.
#define CNN_AUGMENT_FIRST ((size_t)blockIdx.y * blockDim.x + threadIdx.x)
#define CNN_AUGMENT_STRIDE ((size_t)gridDim.y * blockDim.x)

#endif
