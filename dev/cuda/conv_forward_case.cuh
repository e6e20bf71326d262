// conv_forward_case.cuh: what the convolution-forward programs
// (conv2d_forward, conv2d_winograd) share: a case's device buffers, a
// version's entry, one convolution with its inputs and float64 reference,
// the check of a version against it, and the programs' main
// (run_conv_forward).
#ifndef DEV_CUDA_CONV_FORWARD_CASE_CUH
#define DEV_CUDA_CONV_FORWARD_CASE_CUH

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common.cuh"
#include "conv2d_rearranged.cuh"
#include "conv_cases.cuh"

namespace dev {

// A case's device buffers; ws: the workspace of every version (the
// rearranged path's col and t, or conv2d_winograd's transformed filters,
// 16 c f floats).
struct Buffers {
    DeviceBuffer<float> x, w, b, y, ws;
    explicit Buffers(const cnn_conv_desc &d)
        : x(x_count(d)), w(w_count(d)), b(d.f), y(y_count(d)),
          ws(std::max(rearranged::workspace_floats(d), (size_t)16 * d.c * d.f))
    {
    }
};

struct Version {
    const char *name;
    bool (*run)(const cnn_conv_desc &, Buffers &, bool bias, Engine &);
};

inline const float *bias_of(Buffers &m, bool bias) { return bias ? m.b.p : nullptr; }

// One convolution with one kind of input and its float64 reference.
struct Case {
    ConvCase cc;
    Fill fill;
    std::vector<float> x, w, b;
    std::vector<double> ref, scale;
    Buffers gpu; // the inputs and outputs on the device

    Case(const ConvCase &c, Fill f, uint64_t seed)
        : cc(c), fill(f), x(random_vector(x_count(c.d), f, seed)),
          w(random_vector(w_count(c.d), f, seed + 1)), b(random_vector(c.d.f, f, seed + 2)), gpu(c.d)
    {
        gpu.x.upload(x);
        gpu.w.upload(w);
        gpu.b.upload(b);
        reference();
    }

    void reference()
    {
        const cnn_conv_desc &d = cc.d;
        ref.assign(y_count(d), 0.0);
        scale.assign(y_count(d), 0.0);
        size_t o = 0;
        for (int i = 0; i < d.n; ++i)
            for (int fi = 0; fi < d.f; ++fi)
                for (int r = 0; r < d.oh; ++r)
                    for (int s = 0; s < d.ow; ++s, ++o) {
                        double acc = cc.bias ? b[fi] : 0.0, acc_abs = std::fabs(acc);
                        for (int ch = 0; ch < d.c; ++ch)
                            for (int ki = 0; ki < d.kh; ++ki)
                                for (int kj = 0; kj < d.kw; ++kj) {
                                    const long xi = x_index(d, i, ch, r, s, ki, kj);
                                    if (xi < 0) continue;
                                    const double t = (double)x[xi] *
                                                     w[(((size_t)fi * d.c + ch) * d.kh + ki) * d.kw + kj];
                                    acc += t;
                                    acc_abs += std::fabs(t);
                                }
                        ref[o] = acc;
                        scale[o] = acc_abs;
                    }
    }
};

inline Errors check(const Version &v, Case &c, Engine &eng)
{
    c.gpu.y.fill_nan(); // every output must be written
    Errors e;
    if (!v.run(c.cc.d, c.gpu, c.cc.bias, eng)) {
        e.bad_at = 0;
        return e;
    }
    CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
    return compare(c.gpu.y.download(), c.ref, c.scale);
}

// A convolution-forward program's main: its versions checked and timed at
// the seed shapes (and, with large, at batch 512: a total of their own) and
// at the odd shapes; the inputs' seeds from seed0. Returns the exit status.
template <size_t N>
int run_conv_forward(const char *op, const Version (&versions)[N], int argc, char **argv, bool large,
                     uint64_t seed0)
{
    const Options opt = parse_args(argc, argv, (int)N);
    Engine eng;
    Report rep(op, opt);
    Cases<Case> cases;
    cases.large_total = "total batch 512";
    uint64_t seed = seed0;
    auto add = [&](std::vector<std::unique_ptr<Case>> &list, const std::vector<ConvCase> &convs) {
        for (const ConvCase &cc : convs)
            for (Fill f : {Fill::INTEGER, Fill::UNIFORM}) list.emplace_back(new Case(cc, f, seed += 3));
    };
    add(cases.seed, seed_convs());
    if (large) add(cases.large, large_convs());
    add(cases.odd, odd_convs());
    std::vector<std::string> names;
    for (const Version &v : versions) names.push_back(v.name);
    return run_versions(
        rep, opt, names, cases, [&](size_t vi, Case &c) { return check(versions[vi], c, eng); },
        [&](size_t vi, Case &c) {
            return time_median_ms(eng.stream(), [&] { return versions[vi].run(c.cc.d, c.gpu, c.cc.bias, eng); });
        },
        [](const Case &c) { return describe(c.cc); });
}

} // namespace dev

#endif
