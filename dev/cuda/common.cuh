// common.cuh: what the kernel-development programs of dev/cuda share: error
// checks, device buffers, seeded random inputs, the comparison with a CPU
// reference, CUDA-event timing, the engine's context, and the report (a line
// per measurement on stdout, a JSON row per measurement with --jsonl).
//
// These are stand-alone test programs: on a CUDA error they print it and
// exit, which the engine itself never does.
#ifndef DEV_CUDA_COMMON_CUH
#define DEV_CUDA_COMMON_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_common.cuh" // the engine's context (cnn_cuda_impl), cnn_stream
#include "cuda_ops.h"      // the engine's entries and its table, cnn_backend_cuda

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorString(e_), cudaGetErrorName(e_));                          \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)

namespace dev {

// ---------------------------------------------------------------- inputs

// splitmix64: a small seeded generator, the same inputs on every machine.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return (float)((next() >> 40) * (2.0 / 16777216.0) - 1.0); } // [-1, 1)
    int integer(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); }
};

// Two kinds of random input. INTEGER: small integers, so that every sum the
// kernels form is an integer below 2^24 and float32 computes it exactly in
// any order: the result must equal the reference bit for bit, and a single
// missing or repeated term shows. UNIFORM: floats in [-1, 1), checked to a
// tolerance relative to the sum of the absolute values of the terms.
enum class Fill { INTEGER, UNIFORM };

inline std::vector<float> random_vector(size_t n, Fill fill, uint64_t seed, int int_range = 3)
{
    Rng rng(seed);
    std::vector<float> v(n);
    for (auto &x : v)
        x = fill == Fill::INTEGER ? (float)rng.integer(-int_range, int_range) : rng.uniform();
    return v;
}

// ---------------------------------------------------------------- device memory

template <class T>
struct DeviceBuffer {
    T *p = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count)
    {
        CUDA_CHECK(cudaMalloc((void **)&p, (count ? count : 1) * sizeof(T)));
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    ~DeviceBuffer() { cudaFree(p); }
    // upload and fill_nan end with a device-wide synchronize: the engine's
    // stream is non-blocking, so a copy or memset on the legacy default
    // stream (a pageable copy may return before its DMA ends; a memset is
    // asynchronous) would not be ordered before the kernels run there next
    void upload(const std::vector<T> &v)
    {
        CUDA_CHECK(cudaMemcpy(p, v.data(), std::min(n, v.size()) * sizeof(T), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    std::vector<T> download() const
    {
        std::vector<T> v(n);
        CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return v;
    }
    void fill_nan() // all-ones bits: a NaN
    {
        CUDA_CHECK(cudaMemset(p, 0xff, n * sizeof(T)));
        CUDA_CHECK(cudaDeviceSynchronize());
    }
};

// ---------------------------------------------------------------- the engine

// The cuda engine's own context (its table's ctx_create: a stream of its own,
// the SM count and the split-K scratch) on the current device (the one
// CUDA_VISIBLE_DEVICES leaves first unless the program chose another),
// used by the versions that call the engine, and its stream by every version.
struct Engine {
    cnn_ctx *ctx = nullptr;
    Engine()
    {
        int device = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        if (cnn_backend_cuda.ctx_create(&ctx, 1, device) != CNN_OK) {
            fprintf(stderr, "creating the cuda engine's context: %s\n", cnn_last_error());
            exit(2);
        }
    }
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;
    ~Engine() { cnn_backend_cuda.ctx_destroy(ctx); }
    cudaStream_t stream() const { return cnn_stream(ctx); }
};

// A version's run: false (with a message printed) when it could not run.
inline bool engine_ok(cnn_status s, const char *what)
{
    if (s == CNN_OK) return true;
    fprintf(stderr, "%s: %s\n", what, cnn_last_error());
    return false;
}

inline bool launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return true;
    fprintf(stderr, "%s: launch failed: %s\n", what, cudaGetErrorString(e));
    return false;
}

inline std::string device_name()
{
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    char buf[320];
    snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount);
    return buf;
}

// ---------------------------------------------------------------- checks

// The largest errors of out against ref: abs = |out - ref|, rel = abs over
// scale (the sum of the absolute values of the terms that make each output,
// which bounds float32's rounding error by (terms) * 6e-8; seen: below
// 3e-7).
struct Errors {
    double abs = 0.0, rel = 0.0;
    size_t bad_at = SIZE_MAX; // first element that is not finite (or the run failed), or SIZE_MAX
    size_t mismatches = 0;    // integer outputs (max pooling's argmax) that differ
};

inline Errors compare(const std::vector<float> &out, const std::vector<double> &ref,
                      const std::vector<double> &scale)
{
    Errors e;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double o = out[i];
        if (!std::isfinite(o)) {
            if (e.bad_at == SIZE_MAX) e.bad_at = i;
            continue;
        }
        const double d = std::fabs(o - ref[i]);
        e.abs = std::max(e.abs, d);
        e.rel = std::max(e.rel, d / std::max(scale[i], 1e-30));
    }
    return e;
}

// The stated tolerances: integer inputs exactly, uniform inputs to REL_TOL.
constexpr double REL_TOL = 1e-5;

inline bool passes(Fill fill, const Errors &e)
{
    if (e.bad_at != SIZE_MAX || e.mismatches) return false;
    return fill == Fill::INTEGER ? e.abs == 0.0 : e.rel <= REL_TOL;
}

// ---------------------------------------------------------------- timing

// Keeps the GPU busy for about `ns` nanoseconds, so that the host can queue
// all the timed launches behind it and they run back to back, however short.
__global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

constexpr int WARMUP = 3, REPEATS = 20;

// The median over REPEATS launches of run() (each bracketed by its own pair
// of events on the stream), after WARMUP launches; a negative value when a
// launch failed. Inputs stay in L2 between repeats, as in a training step,
// where the kernel before has just written them.
template <class Run>
double time_median_ms(cudaStream_t st, Run &&run)
{
    for (int i = 0; i < WARMUP; ++i)
        if (!run()) return -1.0;
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<cudaEvent_t> ev(REPEATS + 1);
    for (auto &e : ev) CUDA_CHECK(cudaEventCreate(&e));
    spin_kernel<<<1, 1, 0, st>>>(2000000ull); // 2 ms
    bool ok = launched("spin");
    CUDA_CHECK(cudaEventRecord(ev[0], st));
    for (int i = 0; i < REPEATS && ok; ++i) {
        ok = run();
        CUDA_CHECK(cudaEventRecord(ev[i + 1], st));
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<float> ms;
    for (int i = 0; i < REPEATS && ok; ++i) {
        float t = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
        ms.push_back(t);
    }
    for (auto &e : ev) CUDA_CHECK(cudaEventDestroy(e));
    if (!ok) return -1.0;
    std::nth_element(ms.begin(), ms.begin() + REPEATS / 2, ms.end());
    return ms[REPEATS / 2];
}

// ---------------------------------------------------------------- command line and report

struct Options {
    int version = 0;           // 0: all
    const char *jsonl = nullptr; // append one JSON object per line here
};

inline Options parse_args(int argc, char **argv, int versions)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--jsonl") && i + 1 < argc) {
            o.jsonl = argv[++i];
            continue;
        }
        char *end = nullptr;
        long v = strtol(argv[i], &end, 10);
        if (*argv[i] && !*end && v >= 0 && v <= versions) {
            o.version = (int)v;
            continue;
        }
        fprintf(stderr,
                "usage: %s [VERSION] [--jsonl FILE]\n"
                "  VERSION 1..%d (default: all); --jsonl appends a JSON row per measurement\n",
                argv[0], versions);
        exit(2);
    }
    return o;
}

inline std::string json_number(double x, const char *fmt)
{
    if (!std::isfinite(x)) return "null";
    char buf[64];
    snprintf(buf, sizeof buf, fmt, x);
    return buf;
}

// One measurement: a version of an op at one shape ("total": the sum of the
// seed network's shapes, with ok and max_err over every check of the version).
struct Row {
    const char *op;
    int version;
    std::string name, shape;
    double ms; // negative: not measured
    double max_err;
    bool ok;
};

struct Report {
    const char *op;
    FILE *jsonl = nullptr;
    std::string device;
    std::vector<Row> totals;
    bool all_ok = true;

    Report(const char *op_name, const Options &opt) : op(op_name), device(device_name())
    {
        if (opt.jsonl && !(jsonl = fopen(opt.jsonl, "a"))) {
            perror(opt.jsonl);
            exit(2);
        }
        printf("%s on %s\n", op, device.c_str());
    }
    Report(const Report &) = delete;
    Report &operator=(const Report &) = delete;
    ~Report()
    {
        if (jsonl) fclose(jsonl);
    }

    void version_header(int v, const std::string &name) { printf("\n%s v%d: %s\n", op, v, name.c_str()); }

    void row(const Row &r)
    {
        const bool total = r.shape == "total";
        if (total) totals.push_back(r);
        printf("  %10s ms  max_err %.2e  %-4s  %s\n", json_number(r.ms >= 0 ? r.ms : NAN, "%.4f").c_str(),
               r.max_err, r.ok ? "ok" : "FAIL", total ? "total over the seed shapes" : r.shape.c_str());
        all_ok = all_ok && r.ok;
        if (jsonl) {
            fprintf(jsonl,
                    "{\"op\": \"%s\", \"version\": %d, \"name\": \"%s\", \"shape\": \"%s\", "
                    "\"ms\": %s, \"max_err\": %s, \"ok\": %s, \"device\": \"%s\"}\n",
                    r.op, r.version, r.name.c_str(), r.shape.c_str(),
                    json_number(r.ms >= 0 ? r.ms : NAN, "%.6f").c_str(),
                    json_number(r.max_err, "%.3e").c_str(), r.ok ? "true" : "false",
                    device.c_str());
            fflush(jsonl);
        }
    }

    // A line per failed check, printed where it happens.
    void check_line(const std::string &what, Fill fill, const Errors &e)
    {
        if (passes(fill, e)) return;
        if (e.bad_at != SIZE_MAX)
            printf("  CHECK FAILED %s (%s inputs): no run, or a non-finite output at element %zu\n",
                   what.c_str(), fill == Fill::INTEGER ? "integer" : "uniform", e.bad_at);
        else if (e.mismatches)
            printf("  CHECK FAILED %s (%s inputs): %zu integer outputs (argmax) differ\n",
                   what.c_str(), fill == Fill::INTEGER ? "integer" : "uniform", e.mismatches);
        else
            printf("  CHECK FAILED %s (%s inputs): max abs err %.3e, max rel err %.3e (tolerance: %s)\n",
                   what.c_str(), fill == Fill::INTEGER ? "integer" : "uniform", e.abs, e.rel,
                   fill == Fill::INTEGER ? "exact" : "1e-5 relative to the sum of |terms|");
    }

    // The summary: each version's total and its speedup over the one before
    // and over version 1. Returns the exit status.
    int finish()
    {
        printf("\n== summary %s (%s)\n", op, device.c_str());
        printf("  %-3s %-66s %10s %8s %8s %s\n", "v", "name", "total ms", "vs prev", "vs v1", "check");
        for (size_t i = 0; i < totals.size(); ++i) {
            const Row &r = totals[i];
            std::string prev = "", first = "";
            if (i > 0 && r.ms > 0 && totals[i - 1].ms > 0 && totals[i - 1].version == r.version - 1)
                prev = json_number(totals[i - 1].ms / r.ms, "%.2fx");
            if (r.ms > 0 && totals[0].ms > 0 && totals[0].version == 1 && i > 0)
                first = json_number(totals[0].ms / r.ms, "%.2fx");
            printf("  %-3d %-66.66s %10s %8s %8s %s\n", r.version, r.name.c_str(),
                   json_number(r.ms >= 0 ? r.ms : NAN, "%.4f").c_str(), prev.c_str(), first.c_str(),
                   r.ok ? "ok" : "FAIL");
        }
        printf("%s: %s\n", op, all_ok ? "all checks passed" : "CHECKS FAILED");
        return all_ok ? 0 : 1;
    }
};

// ---------------------------------------------------------------- the driver

// The cases of a program: for each seed shape and each odd shape, a case
// with INTEGER inputs followed by one with UNIFORM inputs (Case has .fill).
template <class Case>
struct Cases {
    std::vector<std::unique_ptr<Case>> seed, odd;
};

// For each selected version: checks it at every seed shape (both inputs),
// times it there (uniform inputs), checks it at every odd shape, and reports
// a row per seed shape and a total row. check(v, case) -> Errors and
// time(v, case) -> ms (negative: failed) take the version's index from 0.
// Returns the exit status.
template <class Case, class Check, class Time, class Describe>
int run_versions(Report &rep, const Options &opt, const std::vector<std::string> &names,
                 Cases<Case> &cases, Check check, Time time, Describe describe)
{
    for (size_t vi = 0; vi < names.size(); ++vi) {
        const int version = (int)vi + 1;
        if (opt.version && opt.version != version) continue;
        const std::string &name = names[vi];
        rep.version_header(version, name);
        double total_ms = 0.0, total_err = 0.0;
        bool total_ok = true;
        for (size_t ci = 0; ci + 1 < cases.seed.size(); ci += 2) {
            bool ok = true;
            double err = 0.0;
            for (size_t f = 0; f < 2; ++f) {
                Case &c = *cases.seed[ci + f];
                const Errors e = check(vi, c);
                rep.check_line(describe(c), c.fill, e);
                ok = ok && passes(c.fill, e);
                if (c.fill == Fill::UNIFORM) err = e.bad_at == SIZE_MAX ? e.rel : NAN;
            }
            Case &timed = *cases.seed[ci + 1]; // uniform inputs
            const double ms = time(vi, timed);
            ok = ok && ms >= 0;
            rep.row({rep.op, version, name, describe(timed), ms, err, ok});
            total_ms += ms;
            total_err = std::isfinite(err) && std::isfinite(total_err) ? std::max(total_err, err) : NAN;
            total_ok = total_ok && ok;
        }
        int odd_failed = 0;
        for (auto &cp : cases.odd) {
            const Errors e = check(vi, *cp);
            rep.check_line("odd size " + describe(*cp), cp->fill, e);
            if (!passes(cp->fill, e)) ++odd_failed;
            if (cp->fill == Fill::UNIFORM && std::isfinite(total_err))
                total_err = e.bad_at == SIZE_MAX ? std::max(total_err, e.rel) : NAN;
        }
        printf("  odd sizes: %zu checks, %d failed\n", cases.odd.size(), odd_failed);
        total_ok = total_ok && odd_failed == 0;
        rep.row({rep.op, version, name, "total", total_ok ? total_ms : -1.0, total_err, total_ok});
    }
    return rep.finish();
}

} // namespace dev

#endif
