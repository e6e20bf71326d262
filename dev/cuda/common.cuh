// common.cuh: what the kernel-development programs of dev/cuda share: error
// checks, device buffers, seeded random inputs and the comparison with a CPU
// reference (checks.cuh, host only), CUDA-event timing, the engine's context,
// and the report (a line per measurement on stdout, a JSON row per
// measurement with --jsonl).
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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checks.cuh"      // random inputs, Errors, compare, passes
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
// seed network's shapes, with ok and max_err over every check of the version;
// a program with large shapes also has a row of their sum, `large` set, under
// a shape name of its own, Cases::large_total).
struct Row {
    const char *op;
    int version;
    std::string name, shape;
    double ms; // negative: not measured
    double max_err;
    bool ok;
    bool large = false;
};

struct Report {
    const char *op;
    FILE *jsonl = nullptr;
    std::string device;
    std::vector<Row> totals, large_totals;
    std::vector<std::string> skipped; // "v: why", versions not run on this GPU
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
        if (r.large) large_totals.push_back(r);
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
        const char *inputs = fill == Fill::INTEGER ? "integer" : "uniform";
        if (e.bad_at != SIZE_MAX) {
            printf("  CHECK FAILED %s (%s inputs): no run, or a non-finite output at element %zu\n",
                   what.c_str(), inputs, e.bad_at);
            return;
        }
        if (e.mismatches)
            printf("  CHECK FAILED %s (%s inputs): %zu integer outputs (argmax) differ\n",
                   what.c_str(), inputs, e.mismatches);
        if (!e.failure.empty())
            printf("  CHECK FAILED %s (%s inputs): %s\n", what.c_str(), inputs, e.failure.c_str());
        if (fill == Fill::INTEGER ? e.abs != 0.0 : e.rel > e.tol) {
            char tol[96] = "exact";
            if (fill == Fill::UNIFORM)
                snprintf(tol, sizeof tol, "%.3g relative to the sum of |terms|", e.tol);
            printf("  CHECK FAILED %s (%s inputs): max abs err %.3e, max rel err %.3e (tolerance: %s)\n",
                   what.c_str(), inputs, e.abs, e.rel, tol);
        }
    }

    // A version that this GPU cannot run: said, and not counted as a failure.
    void skip(int v, const std::string &name, const std::string &why)
    {
        printf("\n%s v%d: %s\n  SKIPPED: %s\n", op, v, name.c_str(), why.c_str());
        skipped.push_back(std::to_string(v) + " " + name + ": " + why);
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
        if (!large_totals.empty()) { // a second table: not part of the totals above
            printf("  %s (not in the totals above):\n", large_totals[0].shape.c_str());
            printf("  %-3s %-66s %10s %8s %8s %s\n", "v", "name", "ms", "vs prev", "vs v1", "check");
            for (size_t i = 0; i < large_totals.size(); ++i) {
                const Row &r = large_totals[i];
                const Row &p = large_totals[i > 0 ? i - 1 : 0], &f = large_totals[0];
                std::string prev = "", first = "";
                if (i > 0 && r.ms > 0 && p.ms > 0 && p.version == r.version - 1)
                    prev = json_number(p.ms / r.ms, "%.2fx");
                if (i > 0 && r.ms > 0 && f.ms > 0 && f.version == 1)
                    first = json_number(f.ms / r.ms, "%.2fx");
                printf("  %-3d %-66.66s %10s %8s %8s %s\n", r.version, r.name.c_str(),
                       json_number(r.ms >= 0 ? r.ms : NAN, "%.4f").c_str(), prev.c_str(),
                       first.c_str(), r.ok ? "ok" : "FAIL");
            }
        }
        for (const std::string &s : skipped) printf("  skipped: v%s\n", s.c_str());
        printf("%s: %s\n", op, all_ok ? "all checks passed" : "CHECKS FAILED");
        return all_ok ? 0 : 1;
    }
};

// ---------------------------------------------------------------- the driver

// The cases of a program: for each seed shape, each large shape and each odd
// shape, a case with INTEGER inputs followed by one with UNIFORM inputs (Case
// has .fill). Large shapes (optional) are checked and timed like the seed
// shapes, but summed into a total of their own (large_total, the row's shape
// name), not into "total".
template <class Case>
struct Cases {
    std::vector<std::unique_ptr<Case>> seed, large, odd;
    std::string large_total = "total over the large shapes";
};

// For each selected version: checks it at every seed shape (both inputs),
// times it there (uniform inputs), the same at every large shape, checks it
// at every odd shape, and reports a row per seed and large shape, a total row
// and, with large shapes, a row of their total. check(v, case) -> Errors and
// time(v, case) -> ms (negative: failed) take the version's index from 0.
// skip[v] (optional): why version v cannot run on this GPU ("" : it can); a
// skipped version is said so, has no rows, and does not fail the program.
// after(v) (optional) runs after each version's checks (a program's own
// summary lines). Returns the exit status.
template <class Case, class Check, class Time, class Describe>
int run_versions(Report &rep, const Options &opt, const std::vector<std::string> &names,
                 Cases<Case> &cases, Check check, Time time, Describe describe,
                 const std::vector<std::string> &skip = {},
                 const std::function<void(size_t)> &after = {})
{
    for (size_t vi = 0; vi < names.size(); ++vi) {
        const int version = (int)vi + 1;
        if (opt.version && opt.version != version) continue;
        const std::string &name = names[vi];
        if (vi < skip.size() && !skip[vi].empty()) {
            rep.skip(version, name, skip[vi]);
            continue;
        }
        rep.version_header(version, name);
        double total_ms = 0.0, total_err = 0.0;
        bool total_ok = true;
        // the seed shapes (into the total), then the large ones (a total of their own)
        double large_ms = 0.0, large_err = 0.0;
        bool large_ok = true;
        for (int group = 0; group < 2; ++group) {
            auto &list = group == 0 ? cases.seed : cases.large;
            double &sum_ms = group == 0 ? total_ms : large_ms;
            double &sum_err = group == 0 ? total_err : large_err;
            bool &sum_ok = group == 0 ? total_ok : large_ok;
            for (size_t ci = 0; ci + 1 < list.size(); ci += 2) {
                bool ok = true;
                double err = 0.0;
                for (size_t f = 0; f < 2; ++f) {
                    Case &c = *list[ci + f];
                    const Errors e = check(vi, c);
                    rep.check_line(describe(c), c.fill, e);
                    ok = ok && passes(c.fill, e);
                    if (c.fill == Fill::UNIFORM) err = e.bad_at == SIZE_MAX ? e.rel : NAN;
                }
                Case &timed = *list[ci + 1]; // uniform inputs
                const double ms = time(vi, timed);
                ok = ok && ms >= 0;
                rep.row({rep.op, version, name, describe(timed), ms, err, ok});
                sum_ms += ms;
                sum_err = std::isfinite(err) && std::isfinite(sum_err) ? std::max(sum_err, err) : NAN;
                sum_ok = sum_ok && ok;
            }
        }
        if (!cases.large.empty()) {
            rep.row({rep.op, version, name, cases.large_total, large_ok ? large_ms : -1.0, large_err,
                     large_ok, true});
            total_ok = total_ok && large_ok;
            total_err = std::isfinite(total_err) && std::isfinite(large_err)
                            ? std::max(total_err, large_err) : NAN;
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
        if (after) after(vi);
        total_ok = total_ok && odd_failed == 0;
        rep.row({rep.op, version, name, "total", total_ok ? total_ms : -1.0, total_err, total_ok});
    }
    return rep.finish();
}

} // namespace dev

#endif
