// gather.cu: batch gathering from resident training data for the cuda
// engine: dst row i = src row idx[i], idx = order + *position (read on the
// device, so that a recorded step gathers the next batch at each replay),
// rows of row_bytes bytes. The copy
// moves 16-byte, 4-byte or single-byte units, the widest that row_bytes and
// the alignment of src and dst allow; one thread per unit (grid-stride).
// idx is device memory and is not checked against the number of rows of src
// (the engine does not know it: the Net checks the order on upload); a
// negative index gives a zero row.
#include "cuda_common.cuh"
#include "cuda_ops.h"

// idx (count), src (rows, units) -> dst (count, units), U the unit type
template <typename U>
__global__ void gather_kernel(size_t total, size_t units, const int32_t *__restrict__ order,
                              const int64_t *__restrict__ position, const U *__restrict__ src,
                              U *__restrict__ dst)
{
    cnn_kernel_begin();
    const int32_t *idx = order + *position;
    CNN_GRID_LOOP(e, total) {
        const size_t i = e / units;
        const size_t u = e - i * units;
        const int32_t r = idx[i];
        U val{}; // zero for a negative index
        if (r >= 0) val = src[(size_t)r * units + u];
        dst[e] = val;
    }
}

template <typename U>
static cnn_status launch(cnn_ctx *ctx, const int32_t *order, const int64_t *position, int count,
                         size_t row_bytes, const void *src, void *dst)
{
    const size_t units = row_bytes / sizeof(U);
    const size_t total = (size_t)count * units;
    gather_kernel<U><<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        total, units, order, position, (const U *)src, (U *)dst);
    CNN_CUDA_LAUNCHED("gather_rows");
    return CNN_OK;
}

// rows order[*position + i] of src, each row_bytes long -> dst (count rows)
cnn_status cuda_gather_rows(cnn_ctx *ctx, const int32_t *order, const int64_t *position,
                            int count, size_t row_bytes, const void *src, void *dst)
{
    if (count < 0) return cnn_set_error(CNN_ERR_VALUE, "gather_rows: negative count %d", count);
    if (count == 0 || row_bytes == 0) return CNN_OK;
    const uintptr_t align = (uintptr_t)src | (uintptr_t)dst;
    if (row_bytes % 16 == 0 && align % 16 == 0)
        return launch<uint4>(ctx, order, position, count, row_bytes, src, dst);
    if (row_bytes % 4 == 0 && align % 4 == 0)
        return launch<uint32_t>(ctx, order, position, count, row_bytes, src, dst);
    return launch<uint8_t>(ctx, order, position, count, row_bytes, src, dst);
}

// The Net's counters (cnn.h), in device memory: one thread.
__global__ void advance_kernel(int64_t *counters, int forward, int steps, long rows)
{
    cnn_kernel_begin();
    if (forward) counters[CNN_COUNT_MASK] = counters[CNN_COUNT_FORWARDS]++;
    counters[CNN_COUNT_STEPS] += steps;
    counters[CNN_COUNT_POSITION] += rows;
}

cnn_status cuda_advance_counters(cnn_ctx *ctx, int64_t *counters, int forward, int steps,
                                 long rows)
{
    advance_kernel<<<1, 1, 0, cnn_stream(ctx)>>>(counters, forward, steps, rows);
    CNN_CUDA_LAUNCHED("advance_counters");
    return CNN_OK;
}
