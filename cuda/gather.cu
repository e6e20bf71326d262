// gather.cu: the start of a training step on resident data, for the cuda
// engine, in one kernel: the batch's rows of the images and of the labels
// (or targets), dst row i = src row idx[i] with idx = order + position
// (position read on the device, so that a recorded step gathers the next
// batch at each replay), and the Net's counters moved on for the step.
// The images move in 16-byte, 4-byte or single-byte units, the widest that
// their row size and the alignment of src and dst allow, the targets in
// 4-byte or single-byte units; one thread per unit (grid-stride over both).
// idx is device memory and is not checked against the number of rows of src
// (the engine does not know it: the Net checks the order on upload); a
// negative index gives a zero row.
//
// Counters: cnn_step_position (cuda_common.cuh): every block reads the
// position once; the block that takes the last ticket moves them on.
#include "cuda_common.cuh"
#include "cuda_ops.h"

struct gather_part {
    size_t units; // per row
    const void *src;
    void *dst;
};

template <typename U>
static __device__ __forceinline__ void copy_unit(const gather_part &p, const int32_t *idx,
                                                 size_t e)
{
    const size_t i = e / p.units;
    const size_t u = e - i * p.units;
    const int32_t r = idx[i];
    U val{}; // zero for a negative index
    if (r >= 0) val = ((const U *)p.src)[(size_t)r * p.units + u];
    ((U *)p.dst)[e] = val;
}

// X: the images' unit, T: the targets' unit. count rows; x units, then t
// units (t.units 0: none), over one grid-stride loop.
template <typename X, typename T>
__global__ void gather_batch_kernel(int count, long long rows, const int32_t *__restrict__ order,
                                    int64_t *counters, unsigned int *ticket, gather_part x,
                                    gather_part t)
{
    cnn_kernel_begin();
    const int32_t *idx = order + cnn_step_position(counters, ticket, rows);
    const size_t x_total = (size_t)count * x.units;
    const size_t total = x_total + (size_t)count * t.units;
    CNN_GRID_LOOP(e, total) {
        if (e < x_total)
            copy_unit<X>(x, idx, e);
        else
            copy_unit<T>(t, idx, e - x_total);
    }
}

template <typename X, typename T>
static cnn_status launch(cnn_ctx *ctx, const int32_t *order, int64_t *counters, int count,
                         long rows, gather_part x, gather_part t)
{
    x.units /= sizeof(X); // bytes -> units
    t.units /= sizeof(T);
    const size_t total = (size_t)count * (x.units + t.units);
    gather_batch_kernel<X, T><<<cnn_blocks(total, CNN_THREADS), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        count, (long long)rows, order, counters, &cnn_meet(ctx)->tickets[CNN_TICKET_GATHER], x, t);
    CNN_CUDA_LAUNCHED("gather_batch");
    return CNN_OK;
}

// The widest unit of a row of `bytes` bytes between src and dst: 16 (when
// allowed), 4 or 1.
static int unit_of(size_t bytes, const void *src, const void *dst, bool wide)
{
    const uintptr_t align = (uintptr_t)src | (uintptr_t)dst;
    if (wide && bytes % 16 == 0 && align % 16 == 0) return 16;
    if (bytes % 4 == 0 && align % 4 == 0) return 4;
    return 1;
}

// rows order[counters[POSITION] + i] of src_x and src_t -> dst_x and dst_t
// (count rows each; src_t NULL: none), then the counters moved on (cnn.h)
cnn_status cuda_gather_batch(cnn_ctx *ctx, const int32_t *order, int64_t *counters, int count,
                             long rows, size_t x_row_bytes, const void *src_x, void *dst_x,
                             size_t t_row_bytes, const void *src_t, void *dst_t)
{
    if (count < 0) return cnn_set_error(CNN_ERR_VALUE, "gather_batch: negative count %d", count);
    if (!src_t) t_row_bytes = 0;
    gather_part x = {x_row_bytes, src_x, dst_x}, t = {t_row_bytes, src_t, dst_t};
    // the unit of a part with nothing to move is irrelevant: take the widest
    const int xu = x_row_bytes ? unit_of(x_row_bytes, src_x, dst_x, true) : 16;
    const int tu = t_row_bytes ? unit_of(t_row_bytes, src_t, dst_t, false) : 4;
    if (tu == 4) {
        if (xu == 16) return launch<uint4, uint32_t>(ctx, order, counters, count, rows, x, t);
        if (xu == 4) return launch<uint32_t, uint32_t>(ctx, order, counters, count, rows, x, t);
        return launch<uint8_t, uint32_t>(ctx, order, counters, count, rows, x, t);
    }
    if (xu == 16) return launch<uint4, uint8_t>(ctx, order, counters, count, rows, x, t);
    if (xu == 4) return launch<uint32_t, uint8_t>(ctx, order, counters, count, rows, x, t);
    return launch<uint8_t, uint8_t>(ctx, order, counters, count, rows, x, t);
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
