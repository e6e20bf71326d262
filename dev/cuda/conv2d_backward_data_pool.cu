// conv2d_backward_data_pool.cu: a convolution's data gradient carried
// through the max pooling before it and the ReLU before that, checked
// against a CPU reference and timed at the seed CIFAR-10 CNN's two such
// pairs at batch 32 (conv2 after pool1, conv3 after pool2):
//   dcol (K, NP) = W^T dy                      (the data-gradient GEMM)
//   dpool = col2im(dcol)                       (the conv's input gradient)
//   dx = the pool's backward of dpool (argmax) (the pool's input gradient)
//        masked where the ReLU's output y (the pool's input) is not > 0.
//
//   ./conv2d_backward_data_pool [VERSION] [--jsonl FILE]
//
// Versions (every one runs the engine's data-gradient GEMM first,
// cnn_cuda_conv2d_dcol, inside its time: version 7's entry runs it itself,
// so the others run the same one; the program prints the GEMM's own time
// before the versions, to subtract):
//   1  the engine's kernels apart: col2im (cnn_conv2d::col2im32_kernel,
//      cuda/conv2d_kernels.cuh) into dpool, then the engine's pool backward
//      with the ReLU's mask (cuda_pool_backward_relu: for disjoint max
//      windows one kernel, max_pool_backward_disjoint)
//   2  the first fused kernel (the engine's from commit 38e5aed, kept in
//      pool_col_stages.cuh): one thread per element of the pool's INPUT,
//      which forms the col2im sum of its window's dpool element itself when
//      it is the window's argmax and its y > 0
//   3  the engine's kernel from 2026-11-25 to 2026-11-27, still its kernel
//      for planes too large for shared memory
//      (cnn_pool_col::col2im_pool_backward_kernel,
//      cuda/conv2d_pool_backward_kernels.cuh): one thread per element of the
//      pool's OUTPUT, which forms its col2im sum once and writes the part of
//      the pool's input it owns
//   4  whole planes a block (cnn_pool_col::col2im_pool_backward_planes,
//      launched here at every batch with the plane group the engine picks,
//      plane_group_of): the block's rows of dcol read into shared memory,
//      the col2im sums from there, each pool output's part of dx written
//      by its thread (until 2026-11-28 the planes of dx written in a
//      third phase, an element a thread: git show
//      c56406a:cuda/conv2d_pool_backward_kernels.cuh)
//   5  3 with a max pool's ReLU test on the pool's output (its pool_y: the
//      value at the argmax, so the same bits) instead of the ReLU's output at
//      the argmax: a quarter of those reads
//   6  4 likewise
//   7  the engine: cuda_conv2d_backward_data_pool (cuda/conv2d_pool_backward.cu),
//      which runs 6 wherever a plane fits shared memory, these shapes
//      included (since 2026-11-28; before, 6 at large batches and 5 at
//      these; until 2026-11-27, eighth session, 4 and 3)
// The argmax comes from the engine's max pool forward (cuda_pool_forward) on
// a random ReLU output y, checked against the host's. Odd shapes also check
// average pooling (cuda_pool_backward(_relu) in version 1, the fused
// kernels' MAX = false instantiations) and a pool with no ReLU before it.
#include "common.cuh"
#include "conv2d_kernels.cuh"
#include "conv2d_pool_backward_kernels.cuh"
#include "conv_cases.cuh"
#include "pool_col_cases.cuh"
#include "pool_col_stages.cuh"

using namespace dev;

namespace {

struct Buffers {
    DeviceBuffer<float> dy, w, ws, y, dpool, dx, pool_y;
    DeviceBuffer<int32_t> argmax;
    explicit Buffers(const PoolColCase &c)
        : dy(y_count(c.d)), w(w_count(c.d)), ws(cuda_conv2d_workspace(&c.d) / sizeof(float)),
          y(pool_in_count(c.p)), dpool(x_count(c.d)), dx(pool_in_count(c.p)),
          pool_y(pool_out_count(c.p)), argmax(pool_out_count(c.p))
    {
    }
};

// The argmax the kernels read (max pooling), and the ReLU's output (NULL:
// no ReLU before the pool).
const int32_t *argmax_of(const PoolColCase &c, const Buffers &m)
{
    return c.p.mode == CNN_POOL_MAX ? m.argmax.p : nullptr;
}
const float *relu_of(const PoolColCase &c, const Buffers &m) { return c.relu ? m.y.p : nullptr; }
// The pool's output where the kernels may test the ReLU on it (a max pool
// after a ReLU; the engine's pool forward wrote it), else NULL.
const float *pool_y_of(const PoolColCase &c, const Buffers &m)
{
    return c.relu && c.p.mode == CNN_POOL_MAX ? m.pool_y.p : nullptr;
}

// A buffer filled with NaN (all-ones bits; -1 for an int32 argmax) on the
// engine's stream: its stream does not wait for the legacy default stream
// (cudaStreamNonBlocking), so a cudaMemset there could land after the
// version's kernels have written.
template <class T>
void fill_nan_on(DeviceBuffer<T> &b, cudaStream_t st)
{
    CUDA_CHECK(cudaMemsetAsync(b.p, 0xff, b.n * sizeof(T), st));
}

// The engine's data-gradient GEMM: dcol (K, NP) into the start of ws.
bool dcol(const PoolColCase &c, Buffers &m, Engine &e)
{
    return engine_ok(cnn_cuda_conv2d_dcol(e.ctx, "dcol", &c.d, m.dy.p, m.w.p, m.ws.p),
                     "cnn_cuda_conv2d_dcol");
}

// ---- version 1: col2im into dpool, then the pool's backward with the ReLU's mask.
bool v1(const PoolColCase &c, Buffers &m, Engine &e)
{
    if (!dcol(c, m, e)) return false;
    const cnn_conv_desc &d = c.d;
    const size_t total = x_count(d); // dpool: the conv's input, the pool's output
    const unsigned blocks = cnn_blocks(total, CNN_THREADS);
    if (d.sh == 1 && d.sw == 1)
        cnn_conv2d::col2im32_kernel<true><<<blocks, CNN_THREADS, 0, e.stream()>>>(d, m.ws.p, m.dpool.p);
    else
        cnn_conv2d::col2im32_kernel<false><<<blocks, CNN_THREADS, 0, e.stream()>>>(d, m.ws.p, m.dpool.p);
    if (!launched("col2im32")) return false;
    if (c.relu)
        return engine_ok(cuda_pool_backward_relu(e.ctx, &c.p, m.dpool.p, argmax_of(c, m), m.y.p, m.dx.p),
                         "cuda_pool_backward_relu");
    return engine_ok(cuda_pool_backward(e.ctx, &c.p, m.dpool.p, argmax_of(c, m), m.dx.p),
                     "cuda_pool_backward");
}

// ---- version 2: the first fused kernel, one thread per element of the pool's input.
bool v2(const PoolColCase &c, Buffers &m, Engine &e)
{
    if (!dcol(c, m, e)) return false;
    pool_col_stages::launch(e.stream(), c.d, c.p, m.ws.p, argmax_of(c, m), relu_of(c, m), m.dx.p);
    return launched("col2im_pool_backward (one thread per pool input)");
}

// ---- version 3: one thread per pool output (the engine's kernel for planes
// too large for shared memory); 5: with the ReLU tested on the pool's output.
bool per_output(const PoolColCase &c, Buffers &m, Engine &e, const float *pool_y)
{
    if (!dcol(c, m, e)) return false;
    const pool_geom g = geom_of(&c.p);
    const unsigned outputs = (unsigned)pool_out_count(c.p);
    const unsigned blocks = cnn_blocks(outputs, CNN_THREADS);
    const bool max = c.p.mode == CNN_POOL_MAX, unit = c.d.sh == 1 && c.d.sw == 1;
#define CNN_V3(M, U)                                                                       \
    cnn_pool_col::col2im_pool_backward_kernel<M, U><<<blocks, CNN_THREADS, 0, e.stream()>>>( \
        outputs, c.d, g, m.ws.p, argmax_of(c, m), relu_of(c, m), pool_y, m.dx.p)
    if (max && unit) CNN_V3(true, true);
    else if (max) CNN_V3(true, false);
    else if (unit) CNN_V3(false, true);
    else CNN_V3(false, false);
#undef CNN_V3
    return launched("col2im_pool_backward_kernel (one thread per pool output)");
}
bool v3(const PoolColCase &c, Buffers &m, Engine &e) { return per_output(c, m, e, nullptr); }
bool v5(const PoolColCase &c, Buffers &m, Engine &e) { return per_output(c, m, e, pool_y_of(c, m)); }

// ---- version 4: whole planes a block, as many as the engine takes
// (plane_group_of), here also where the engine would not take the kernel;
// 6: with the ReLU tested on the pool's output.
bool planes(const PoolColCase &c, Buffers &m, Engine &e, const float *pool_y)
{
    if (!dcol(c, m, e)) return false;
    const pool_geom g = geom_of(&c.p);
    int dev = 0, sm_count = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
    const int pb = cnn_pool_col::plane_group_of(c.d, g, sm_count);
    if (pb == 0) {
        fprintf(stderr, "planes: one plane needs more than %zu floats of shared memory\n",
                cnn_pool_col::PLANES_SMEM_MAX_FLOATS);
        return false;
    }
    const size_t smem = cnn_pool_col::plane_group_floats(c.d, g, pb) * sizeof(float);
    const unsigned blocks = (unsigned)(c.d.n * c.d.c / pb);
    const bool max = c.p.mode == CNN_POOL_MAX, unit = c.d.sh == 1 && c.d.sw == 1;
    const bool k33 = unit && c.d.kh == 3 && c.d.kw == 3;
#define CNN_V4(M, U, KH, KW)                                                                 \
    cnn_pool_col::col2im_pool_backward_planes<M, U, KH, KW><<<blocks, CNN_THREADS, smem,     \
                                                              e.stream()>>>(                 \
        c.d, g, pb, cnn_pool_col::plane_copies_aligned(c.d, m.ws.p), m.ws.p, argmax_of(c, m),   \
        relu_of(c, m), pool_y, m.dx.p)
    if (max && k33) CNN_V4(true, true, 3, 3);
    else if (max && unit) CNN_V4(true, true, 0, 0);
    else if (max) CNN_V4(true, false, 0, 0);
    else if (k33) CNN_V4(false, true, 3, 3);
    else if (unit) CNN_V4(false, true, 0, 0);
    else CNN_V4(false, false, 0, 0);
#undef CNN_V4
    return launched("col2im_pool_backward_planes (whole planes a block)");
}
bool v4(const PoolColCase &c, Buffers &m, Engine &e) { return planes(c, m, e, nullptr); }
bool v6(const PoolColCase &c, Buffers &m, Engine &e) { return planes(c, m, e, pool_y_of(c, m)); }

// ---- version 7: the engine.
bool v7(const PoolColCase &c, Buffers &m, Engine &e)
{
    return engine_ok(cuda_conv2d_backward_data_pool(e.ctx, &c.d, &c.p, m.dy.p, m.w.p, argmax_of(c, m),
                                                    relu_of(c, m), m.pool_y.p, m.dx.p, m.ws.p),
                     "cuda_conv2d_backward_data_pool");
}

struct Version {
    const char *name;
    bool (*run)(const PoolColCase &, Buffers &, Engine &);
};

const Version VERSIONS[] = {
    {"GEMM + engine kernels apart: col2im32, pool backward with ReLU mask", v1},
    {"GEMM + first fused kernel: one thread per pool input element", v2},
    {"GEMM + one thread per pool output (the engine's kernel for large planes)", v3},
    {"GEMM + whole planes a block (the engine's kernel where a plane fits)", v4},
    {"GEMM + one thread per pool output, the ReLU tested on the pool's output", v5},
    {"GEMM + whole planes a block, the ReLU tested on the pool's output", v6},
    {"engine cuda_conv2d_backward_data_pool", v7},
};
constexpr int N_VERSIONS = sizeof VERSIONS / sizeof VERSIONS[0];

// One pair with one kind of input: dy, W, the ReLU's output y, the max
// pool's argmax (from the engine's forward, checked against the host's) and
// the float64 reference of the pool's input gradient.
struct Case {
    PoolColCase pc;
    Fill fill;
    std::vector<float> dy, w, y;
    std::vector<int32_t> argmax;
    std::vector<double> ref, scale;
    Buffers gpu; // the inputs and outputs on the device

    Case(const PoolColCase &c, Fill f, uint64_t seed, Engine &eng)
        : pc(c), fill(f), dy(random_vector(y_count(c.d), f, seed)),
          w(random_vector(w_count(c.d), f, seed + 1)), y(random_vector(pool_in_count(c.p), f, seed + 2)),
          gpu(c)
    {
        if (!consistent(pc)) {
            fprintf(stderr, "case '%s': the pool's output is not the convolution's input, or the "
                            "windows overlap\n", describe(pc).c_str());
            exit(2);
        }
        if (pc.relu)
            for (float &v : y) v = v > 0.0f ? v : 0.0f; // a ReLU's output: about half of it 0
        gpu.dy.upload(dy);
        gpu.w.upload(w);
        gpu.y.upload(y);
        CUDA_CHECK(cudaDeviceSynchronize()); // the uploads done before the engine's stream reads them
        if (pc.p.mode == CNN_POOL_MAX) {
            argmax = pool_argmax(pc.p, y);
            CUDA_CHECK(cudaMemsetAsync(gpu.argmax.p, 0x7f, gpu.argmax.n * sizeof(int32_t), eng.stream()));
            if (!engine_ok(cuda_pool_forward(eng.ctx, &pc.p, gpu.y.p, gpu.pool_y.p, gpu.argmax.p),
                           "cuda_pool_forward"))
                exit(2);
            CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
            if (gpu.argmax.download() != argmax) {
                fprintf(stderr, "case '%s': the engine's max pool forward gives another argmax than "
                                "the host's\n", describe(pc).c_str());
                exit(2);
            }
        } else {
            argmax.assign(pool_out_count(pc.p), -1);
            gpu.argmax.upload(argmax); // not read
            CUDA_CHECK(cudaDeviceSynchronize());
        }
        pool_col_reference(pc, dy, w, y, argmax, ref, scale);
    }

    // The workspace as the engine's backward data finds it: the room for
    // dcol full of NaN (the last version's forgotten).
    void prepare_ws(cudaStream_t st) { fill_nan_on(gpu.ws, st); }
};

Errors check(const Version &v, Case &c, Engine &eng)
{
    fill_nan_on(c.gpu.dx, eng.stream());
    fill_nan_on(c.gpu.dpool, eng.stream());
    c.prepare_ws(eng.stream());
    Errors e;
    if (!v.run(c.pc, c.gpu, eng)) {
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    return compare(c.gpu.dx.download(), c.ref, c.scale);
}

} // namespace

int main(int argc, char **argv)
{
    const Options opt = parse_args(argc, argv, N_VERSIONS);
    Engine eng;
    Report rep("conv2d_backward_data_pool", opt);
    Cases<Case> cases;
    uint64_t seed = 500;
    for (const PoolColCase &c : seed_pool_cols())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.seed.emplace_back(new Case(c, f, seed += 3, eng));
    for (const PoolColCase &c : odd_pool_cols())
        for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) cases.odd.emplace_back(new Case(c, f, seed += 3, eng));
    // The GEMM that every version's time includes, alone (not a version: no row).
    printf("\nthe data-gradient GEMM alone (cnn_cuda_conv2d_dcol, part of every version's time):\n");
    for (size_t ci = 1; ci < cases.seed.size(); ci += 2) {
        Case &c = *cases.seed[ci];
        c.prepare_ws(eng.stream());
        const double ms = time_median_ms(eng.stream(), [&] { return dcol(c.pc, c.gpu, eng); });
        printf("  %10s ms  %s\n", json_number(ms >= 0 ? ms : NAN, "%.4f").c_str(), c.pc.label.c_str());
    }
    std::vector<std::string> names;
    for (const Version &v : VERSIONS) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(VERSIONS[vi], c, eng); },
        [&](size_t vi, Case &c) {
            c.prepare_ws(eng.stream());
            return time_median_ms(eng.stream(), [&] { return VERSIONS[vi].run(c.pc, c.gpu, eng); });
        },
        [](const Case &c) { return describe(c.pc); });
}
