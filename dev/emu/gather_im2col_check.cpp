// gather_im2col_check.cpp: a host emulation check of cuda/gather_im2col.cu
// (gather_batch_im2col: the start of a training step on resident data that
// writes the first convolution's column matrix instead of the batch's
// images; run_gather_im2col.sh builds and runs it). Per shape, bit for bit:
//  (1) the baseline: the working tree's cuda/gather.cu (its host entry
//      cuda_gather_batch) into an x buffer, then conv2d_kernels.cuh's
//      im2col_kernel over that x on conv2d.cu's grid, each against a plain
//      loop here (rows order[position + i], a negative index a zero row;
//      the counters: MASK = FORWARDS++, STEPS += 1, POSITION += rows; the
//      column matrix of conv2d.cu's comment), run twice in a row (the
//      second batch starts at the moved position);
//  (2) the fused kernel == the baseline: its column matrix (the workspace
//      NaN-filled before, with guard zones of more than a row of col before
//      and after), the targets' buffer (byte sentinels, guard zones), the
//      four counters, the gather ticket back to 0 (the other tickets, set
//      to sentinels, untouched), the x buffer not written; through its host
//      entry (cuda_gather_batch_im2col, 32-bit index loop), then the same
//      entry again (the next batch: position moved), and launched directly
//      (gather_im2col_shim.inc): the size_t loop on the full grid, the
//      unsigned loop on a grid of 1..3 blocks (the grid-stride loop, the
//      ticket over a small grid), the size_t loop with single-byte targets
//      on a small grid; and col in 16 bits (bfloat16 and float16, as
//      conv2d.cu stores it where its products take B in 16 bits), through
//      the host entry and im2col_kernel: the baseline's values rounded;
//  (3) the host entry's refusals (negative count, d->n != count, a bad
//      descriptor, rows that are not the convolution's c*h*w floats, a
//      batch past one GEMM): CNN_ERR_VALUE, a message starting
//      "gather_batch_im2col: " (csrc/status.c's cnn_set_error, linked),
//      nothing written (workspace, x, targets, counters, ticket).
// Resident images and targets have guard rows before and after them (a read
// through a negative index or past the last row shows); targets come as
// sparse labels (one int32), categorical rows (k floats), odd-sized rows
// and 4-byte rows at odd addresses (the single-byte unit), or none (src_t
// NULL, with and without a nonzero t_row_bytes, dst_t NULL or a sentinel
// buffer). Usage: gather_im2col_check [random shapes] [seed] [most column
// matrix elements of one shape] [seed networks' shapes 1/0]; exit status 1
// on any failure.
#include <cmath>
#include <csignal>
#include <unistd.h>
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "conv2d_kernels.cuh"
#include "check_common.h"

extern "C" void emu_gather_im2col_kernel(const cnn_conv_desc *d, long long rows,
                                         const int32_t *order, int64_t *counters,
                                         unsigned int *ticket, const float *data, float *col,
                                         size_t t_row_bytes, const void *src_t, void *dst_t,
                                         int wide, int unit, unsigned blocks);
namespace emu { extern int order_mode; extern long long switches; }

// conv2d.cu's choice of col's precision (cnn_cuda_conv2d_col16), made here:
// float32, or 16 bits where a check asks for them
static int col_out = CNN_PRECISION_FLOAT32;
int cnn_cuda_conv2d_col16(cnn_ctx *, const cnn_conv_desc *) { return col_out; }
static long long n_col16 = 0;
static long long n_fixed_size[2] = {0, 0}; // shapes through im2col_kernel compiled for 3x3, 5x5

static long long grid_stride_runs = 0;
// shapes of each kind run (the summary's coverage lines)
static long long n_more_rows = 0, n_negative = 0, n_all_negative = 0, n_repeats = 0,
                 n_start = 0, n_padded = 0, n_same = 0, n_pad2 = 0, n_empty_windows = 0,
                 n_nonsquare = 0, n_strided = 0, n_odd = 0, n_x16 = 0, n_x4 = 0,
                 n_t[5] = {0, 0, 0, 0, 0}, n_t_byte = 0, n_t_null_dst = 0,
                 n_t_ignored_bytes = 0;

static void on_crash(int sig)
{
    static const char msg[] = "FAIL crash: a fatal signal (a read or write far outside)\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0) {}
    _exit(3);
}

// the workspace's and x's fill: SENTINEL (check_common.h)
static const uint32_t DATA_GUARD = 0x7fc0deadu; // around the resident images
static const uint8_t T_SENTINEL = 0xa5, T_GUARD = 0x5c;
static const unsigned TICKET_SENTINEL = 0x5a5a0000u; // the other tickets

enum { T_NONE, T_LABELS, T_CATEGORICAL, T_ODD, T_MISALIGNED };
static const char *t_names[] = {"none", "labels", "categorical", "odd bytes", "misaligned"};

struct shape {
    cnn_conv_desc d;
    int count;
    long rows;
    int resident;   // rows of the resident images
    int start;      // counters[POSITION] before
    int neg_pct;    // negative indices, percent
    int kind;       // T_*
    size_t t_bytes; // t_row_bytes passed (T_NONE: ignored, may be nonzero)
    int t_src_off, t_dst_off; // bytes off 16-byte alignment
    int x_off;                // floats off 16-byte alignment (gather.cu's unit 16 or 4)
    bool null_dst;            // T_NONE: dst_t NULL
    int pb, pr;               // the bottom and right pads oh, ow follow from
    std::string name;
};

static std::string describe(const shape &S)
{
    const cnn_conv_desc &d = S.d;
    char b[500];
    snprintf(b, sizeof b,
             "%s%scount %d rows %ld resident %d start %d neg %d%%; x %dx%dx%d (off %d); conv "
             "%dx%d stride %dx%d pad %d,%d (+%d,%d) -> %dx%d f %d; targets %s %zu bytes (off "
             "%d,%d%s)",
             S.name.c_str(), S.name.empty() ? "" : ": ", S.count, S.rows, S.resident, S.start,
             S.neg_pct, d.c, d.h, d.w, S.x_off, d.kh, d.kw, d.sh, d.sw, d.pad_top, d.pad_left,
             S.pb, S.pr, d.oh, d.ow, d.f, t_names[S.kind], S.t_bytes, S.t_src_off, S.t_dst_off,
             S.null_dst ? ", dst NULL" : "");
    return b;
}

static void compare_counters(const char *what, const int64_t *got, const int64_t *want,
                             const shape &S)
{
    checks++;
    if (memcmp(got, want, CNN_COUNTERS * sizeof(int64_t)) != 0) {
        char b[300];
        snprintf(b, sizeof b,
                 "%s: counters position %lld forwards %lld mask %lld steps %lld, want %lld "
                 "%lld %lld %lld | ",
                 what, (long long)got[0], (long long)got[1], (long long)got[2],
                 (long long)got[3], (long long)want[0], (long long)want[1], (long long)want[2],
                 (long long)want[3]);
        fail(b + describe(S));
    }
}

// The context of one run: the gather ticket 0, the others sentinels.
struct context {
    cnn_cuda_impl impl{};
    cnn_cuda_meet meet{};
    cnn_ctx ctx{};
    context()
    {
        for (int i = 0; i < CNN_TICKETS; ++i) meet.tickets[i] = i ? TICKET_SENTINEL + i : 0u;
        impl.meet = &meet;
        ctx.impl = &impl;
    }
    unsigned *ticket() { return &meet.tickets[CNN_TICKET_GATHER]; }
};

static void check_tickets(const char *what, context &C, const shape &S)
{
    checks++;
    bool bad = C.meet.tickets[CNN_TICKET_GATHER] != 0;
    for (int i = 1; i < CNN_TICKETS; ++i) bad |= C.meet.tickets[i] != TICKET_SENTINEL + i;
    if (bad)
        fail(std::string(what) + ": ticket " + std::to_string(C.meet.tickets[0]) +
             " after the launch (want 0; others untouched) | " + describe(S));
}

template <typename T> static T *aligned16(T *p)
{
    return (T *)(((uintptr_t)p + 15) & ~(uintptr_t)15);
}

static void fill_data(float *x, size_t n)
{
    std::normal_distribution<float> N(0.0f, 1.0f);
    static const uint32_t special[] = {0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc12345u,
                                       0x00000001u, 0x3f800000u};
    for (size_t i = 0; i < n; ++i) {
        if (rng() % 64 == 0) x[i] = f_of(special[rng() % 6]); // -0, +-inf, a NaN, a denormal, 1
        else x[i] = N(rng);
    }
}

static void run_case(const shape &S)
{
    const cnn_conv_desc &d = S.d;
    const int count = S.count, R = S.resident;
    const size_t image = (size_t)d.c * d.h * d.w, x_bytes = image * sizeof(float);
    const size_t np = (size_t)d.n * d.oh * d.ow, K = (size_t)d.c * d.kh * d.kw;
    const std::string tag = describe(S);
    emu::order_mode = (int)(rng() % 3);
    const unsigned few = 1 + (unsigned)(rng() % 3); // blocks of a small grid

    // resident images: 3 guard rows before (indices down to -3), 1 after
    std::vector<float> dbuf((R + 4) * image + 8, f_of(DATA_GUARD));
    float *data = aligned16(dbuf.data() + 3 * image) + S.x_off;
    fill_data(data, (size_t)R * image);
    // the order: start + 2 batches (+ a spare few), repeats and negatives
    const size_t L = (size_t)S.start + 2 * S.rows + rng() % 3;
    std::vector<int32_t> order(L);
    for (auto &o : order)
        o = (int)(rng() % 100) < S.neg_pct ? -1 - (int)(rng() % 3) : (int)(rng() % R);
    {
        bool neg = false, all_neg = true, rep = false;
        for (int b = 0; b < 2; ++b)
            for (int i = 0; i < count; ++i) {
                const int32_t r = order[S.start + b * S.rows + i];
                neg |= r < 0, all_neg &= r < 0;
                for (int j = 0; j < i; ++j) rep |= r >= 0 && order[S.start + b * S.rows + j] == r;
            }
        n_negative += neg, n_all_negative += all_neg && count > 0, n_repeats += rep;
    }
    // targets: the same guard rows
    const bool has_t = S.kind != T_NONE;
    const size_t tb = has_t ? S.t_bytes : 0; // what is gathered
    std::vector<uint8_t> tbuf(has_t ? (R + 4) * tb + 64 : 1, T_GUARD);
    uint8_t *src_t = nullptr;
    if (has_t) {
        src_t = aligned16(tbuf.data() + 3 * tb) + S.t_src_off;
        for (size_t i = 0; i < (size_t)R * tb; ++i) src_t[i] = (uint8_t)rng();
        if (S.kind == T_LABELS)
            for (int r = 0; r < R; ++r) {
                const int32_t label = (int32_t)(rng() % 10);
                memcpy(src_t + (size_t)r * tb, &label, 4);
            }
        if (S.kind == T_CATEGORICAL)
            for (int r = 0; r < R; ++r)
                for (size_t k = 0; k < tb / 4; ++k) {
                    const float v = k == (size_t)(rng() % (tb / 4)) ? 1.0f : 0.0f;
                    memcpy(src_t + (size_t)r * tb + 4 * k, &v, 4);
                }
    }
    const size_t dst_t_n = (size_t)count * tb;
    auto new_dst_t = [&]() { return guarded<uint8_t>(dst_t_n, 64 + S.t_dst_off, T_SENTINEL); };
    auto dst_t_of = [&](guarded<uint8_t> &b) -> void * {
        return S.null_dst ? nullptr : (void *)b.data();
    };
    // the initial counters
    int64_t c0[CNN_COUNTERS];
    c0[CNN_COUNT_POSITION] = S.start;
    c0[CNN_COUNT_FORWARDS] = (int64_t)(rng() % 100000);
    c0[CNN_COUNT_MASK] = (int64_t)(rng() % 100000) - 50000;
    c0[CNN_COUNT_STEPS] = (int64_t)(rng() % 100000);
    const bool x16 = image % 4 == 0 && S.x_off == 0;
    n_x16 += x16, n_x4 += !x16;
    n_t[S.kind]++;
    n_t_byte += has_t && (tb % 4 || S.t_src_off % 4 || S.t_dst_off % 4);
    n_t_null_dst += S.null_dst;
    n_t_ignored_bytes += !has_t && S.t_bytes != 0;

    // the plain loops: batch b's x, targets and counters after it
    std::vector<float> xr[2], colr[2];
    std::vector<uint8_t> tr[2];
    int64_t cr[2][CNN_COUNTERS];
    {
        int64_t c[CNN_COUNTERS];
        memcpy(c, c0, sizeof c);
        for (int b = 0; b < 2; ++b) {
            xr[b].assign((size_t)count * image, 0.0f);
            tr[b].assign(dst_t_n, 0);
            for (int i = 0; i < count; ++i) {
                const int32_t r = order[c[CNN_COUNT_POSITION] + i];
                if (r < 0) continue;
                memcpy(&xr[b][(size_t)i * image], data + (size_t)r * image, x_bytes);
                if (tb) memcpy(&tr[b][(size_t)i * tb], src_t + (size_t)r * tb, tb);
            }
            col_ref(d, xr[b].data(), colr[b]);
            c[CNN_COUNT_MASK] = c[CNN_COUNT_FORWARDS]++;
            c[CNN_COUNT_STEPS] += 1;
            c[CNN_COUNT_POSITION] += S.rows;
            memcpy(cr[b], c, sizeof c);
        }
    }

    // (1) the baseline: gather.cu, then im2col_kernel on conv2d.cu's grid, twice
    const size_t cg = np + 256; // guards: a row of col and more
    std::vector<guarded<float>> colb;
    std::vector<guarded<uint8_t>> tb_base;
    int64_t cb[2][CNN_COUNTERS];
    {
        context C;
        int64_t c[CNN_COUNTERS];
        memcpy(c, c0, sizeof c);
        for (int b = 0; b < 2; ++b) {
            const char *which = b ? "baseline, second batch" : "baseline";
            guarded<float> x((size_t)count * image, 64, f_of(SENTINEL));
            guarded<uint8_t> t = new_dst_t();
            const cnn_status st =
                cuda_gather_batch(&C.ctx, order.data(), c, count, S.rows, x_bytes, data,
                                  x.data(), S.t_bytes, has_t ? src_t : nullptr, dst_t_of(t));
            if (st != CNN_OK) fail(std::string(which) + " gather status | " + tag);
            compare((std::string(which) + " gather x vs the plain loop").c_str(), x,
                    xr[b].data(), f_of(SENTINEL), tag);
            if (S.null_dst) {
                checks++;
                if (!untouched(t, T_SENTINEL)) fail(std::string(which) + " wrote dst_t");
            } else {
                compare((std::string(which) + " gather targets vs the plain loop").c_str(), t,
                        tr[b].data(), T_SENTINEL, tag);
            }
            compare_counters((std::string(which) + " gather counters").c_str(), c, cr[b], S);
            memcpy(cb[b], c, sizeof c);
            check_tickets(which, C, S);
            guarded<float> col(K * np, cg, f_of(SENTINEL));
            const dim3 grid(cnn_blocks(np, CNN_THREADS), (unsigned)std::min(d.c, 65535));
            EMU_LAUNCH(cnn_conv2d::im2col_kernel, grid, CNN_THREADS, d, x.data(), col.data());
            compare((std::string(which) + " im2col vs conv2d.cu's layout").c_str(), col,
                    colr[b].data(), f_of(SENTINEL), tag);
            if (const int ks = cnn_conv2d::im2col_size(d)) { // the kernel compiled for 3x3, 5x5
                guarded<float> colk(K * np, cg, f_of(SENTINEL));
                if (ks == 3)
                    EMU_LAUNCH((cnn_conv2d::im2col_kernel<CNN_PRECISION_FLOAT32, 3>), grid,
                               CNN_THREADS, d, x.data(), colk.data());
                else
                    EMU_LAUNCH((cnn_conv2d::im2col_kernel<CNN_PRECISION_FLOAT32, 5>), grid,
                               CNN_THREADS, d, x.data(), colk.data());
                compare((std::string(which) + " im2col for " + std::to_string(ks) + "x" +
                         std::to_string(ks) + " vs conv2d.cu's layout").c_str(),
                        colk, colr[b].data(), f_of(SENTINEL), tag);
                n_fixed_size[ks == 5]++;
            }
            colb.push_back(std::move(col));
            tb_base.push_back(std::move(t));
        }
    }

    // (2) the fused kernel
    auto check_fused = [&](const char *how, int b, context &C, const int64_t *c,
                           const guarded<float> &ws, const guarded<float> &x,
                           const guarded<uint8_t> &t) {
        compare((std::string(how) + " col").c_str(), ws, colb[b].data(), f_of(SENTINEL), tag);
        checks++;
        if (t.v != tb_base[b].v) { // the same bytes, guards included
            long long bad = 0;
            for (size_t i = 0; i < t.v.size(); ++i) bad += t.v[i] != tb_base[b].v[i];
            fail(std::string(how) + " targets: " + std::to_string(bad) + " of " +
                 std::to_string(t.v.size()) + " bytes (guards included) differ | " + tag);
        }
        compare_counters((std::string(how) + " counters").c_str(), c, cb[b], S);
        check_tickets(how, C, S);
        checks++;
        if (!untouched(x, f_of(SENTINEL))) fail(std::string(how) + " wrote x | " + tag);
    };
    // through the host entry, twice in a row
    {
        context C;
        int64_t c[CNN_COUNTERS];
        memcpy(c, c0, sizeof c);
        for (int b = 0; b < 2; ++b) {
            const char *how = b ? "host entry, second batch" : "host entry";
            guarded<float> ws(K * np, cg, f_of(SENTINEL));
            guarded<float> x((size_t)count * image, 64, f_of(SENTINEL));
            guarded<uint8_t> t = new_dst_t();
            const cnn_status st = cuda_gather_batch_im2col(
                &C.ctx, order.data(), c, count, S.rows, x_bytes, data, x.data(), S.t_bytes,
                has_t ? src_t : nullptr, dst_t_of(t), &d, ws.data());
            if (st != CNN_OK)
                fail(std::string(how) + " status " + cnn_last_error() + " | " + tag);
            check_fused(how, b, C, c, ws, x, t);
        }
    }
    // col in 16 bits (bfloat16, float16): the host entry and im2col_kernel
    // write each of the baseline's values rounded as the SGEMM rounds them
    // (the emulation's __floats2bfloat162_rn and __floats2half2_rn)
    for (int out : {CNN_PRECISION_BF16, CNN_PRECISION_FP16}) {
        const char *name = out == CNN_PRECISION_BF16 ? "bf16" : "fp16";
        std::vector<uint16_t> want(K * np);
        for (size_t i = 0; i < want.size(); ++i)
            want[i] = out == CNN_PRECISION_BF16 ? emu_bfloat16_rn(colb[0][i]) : emu_float16_rn(colb[0][i]);
        context C;
        int64_t c[CNN_COUNTERS];
        memcpy(c, c0, sizeof c);
        guarded<uint16_t> ws(K * np, cg, 0xa5a5);
        guarded<float> x((size_t)count * image, 64, f_of(SENTINEL));
        guarded<uint8_t> t = new_dst_t();
        col_out = out;
        const cnn_status st = cuda_gather_batch_im2col(
            &C.ctx, order.data(), c, count, S.rows, x_bytes, data, x.data(), S.t_bytes,
            has_t ? src_t : nullptr, dst_t_of(t), &d, ws.data());
        col_out = CNN_PRECISION_FLOAT32;
        if (st != CNN_OK) fail(std::string("host entry, ") + name + " status " + cnn_last_error() + " | " + tag);
        compare((std::string("host entry, col in ") + name).c_str(), ws, want.data(), (uint16_t)0xa5a5, tag);
        compare_counters((std::string("host entry, col in ") + name + ", counters").c_str(), c, cb[0], S);
        guarded<uint16_t> col(K * np, cg, 0xa5a5);
        const dim3 grid(cnn_blocks(np, CNN_THREADS), (unsigned)std::min(d.c, 65535));
        if (out == CNN_PRECISION_BF16)
            EMU_LAUNCH(cnn_conv2d::im2col_kernel<CNN_PRECISION_BF16>, grid, CNN_THREADS, d, xr[0].data(), col.data());
        else
            EMU_LAUNCH(cnn_conv2d::im2col_kernel<CNN_PRECISION_FP16>, grid, CNN_THREADS, d, xr[0].data(), col.data());
        compare((std::string("im2col_kernel, col in ") + name).c_str(), col, want.data(), (uint16_t)0xa5a5, tag);
        if (const int ks = cnn_conv2d::im2col_size(d)) {
            guarded<uint16_t> colk(K * np, cg, 0xa5a5);
            if (out == CNN_PRECISION_BF16 && ks == 3)
                EMU_LAUNCH((cnn_conv2d::im2col_kernel<CNN_PRECISION_BF16, 3>), grid, CNN_THREADS, d, xr[0].data(), colk.data());
            else if (out == CNN_PRECISION_BF16)
                EMU_LAUNCH((cnn_conv2d::im2col_kernel<CNN_PRECISION_BF16, 5>), grid, CNN_THREADS, d, xr[0].data(), colk.data());
            else if (ks == 3)
                EMU_LAUNCH((cnn_conv2d::im2col_kernel<CNN_PRECISION_FP16, 3>), grid, CNN_THREADS, d, xr[0].data(), colk.data());
            else
                EMU_LAUNCH((cnn_conv2d::im2col_kernel<CNN_PRECISION_FP16, 5>), grid, CNN_THREADS, d, xr[0].data(), colk.data());
            compare((std::string("im2col_kernel for ") + std::to_string(ks) + "x" + std::to_string(ks) +
                     ", col in " + name).c_str(), colk, want.data(), (uint16_t)0xa5a5, tag);
        }
        n_col16++;
    }
    // launched directly: the size_t loop, small grids, single-byte targets
    for (int variant = 0; variant < 3; ++variant) {
        guarded<uint8_t> t = new_dst_t();
        // the host entry's unit: 4 where the row size and both addresses allow it
        const uintptr_t t_align = has_t ? (uintptr_t)src_t | (uintptr_t)dst_t_of(t) : 0;
        const int host_unit = tb % 4 == 0 && t_align % 4 == 0 ? 4 : 1;
        const int wide = variant != 1, unit = variant == 2 ? 1 : host_unit;
        const size_t total = K / (d.kh * d.kw) * np + (size_t)count * (tb / unit);
        const unsigned blocks = variant == 0 ? cnn_blocks(total, CNN_THREADS) : few;
        grid_stride_runs += (size_t)blocks * CNN_THREADS < total;
        char how[120];
        snprintf(how, sizeof how, "kernel <%s, %s> on %u blocks", wide ? "size_t" : "unsigned",
                 unit == 4 ? "uint32_t" : "uint8_t", blocks);
        context C;
        int64_t c[CNN_COUNTERS];
        memcpy(c, c0, sizeof c);
        guarded<float> ws(K * np, cg, f_of(SENTINEL));
        guarded<float> x((size_t)count * image, 64, f_of(SENTINEL));
        emu_gather_im2col_kernel(&d, S.rows, order.data(), c, C.ticket(), data, ws.data(), tb,
                                 has_t ? src_t : nullptr, dst_t_of(t), wide, unit, blocks);
        check_fused(how, 0, C, c, ws, x, t);
    }
}

// (3) the host entry's refusals: CNN_ERR_VALUE with a message, nothing written.
static void refusals()
{
    const cnn_conv_desc d0 = {2, 3, 5, 4, 7, 3, 2, 1, 1, 1, 0, 5, 3}; // pad 1 top
    const int R = 4;
    const size_t image = 3 * 5 * 4;
    std::vector<float> data(R * image, 1.0f);
    std::vector<int32_t> order = {3, -1, 0, 2, 1, 1};
    std::vector<int32_t> labels = {1, 2, 3, 4};
    struct refusal {
        const char *name, *needle;
        cnn_conv_desc d;
        int count;
        size_t x_bytes;
    };
    std::vector<refusal> Rs;
    auto add = [&](const char *name, const char *needle, auto change) {
        refusal r{name, needle, d0, 2, image * 4};
        change(r);
        Rs.push_back(r);
    };
    using F = refusal &;
    add("count -1 (n -1)", "negative count", [](F r) { r.count = -1, r.d.n = -1; });
    add("count -1 (n 2)", "negative count", [](F r) { r.count = -1; });
    add("n 3 for 2 rows", "bad convolution descriptor", [](F r) { r.d.n = 3; });
    add("n 1 for 2 rows", "bad convolution descriptor", [](F r) { r.d.n = 1; });
    add("n 0 for 2 rows", "bad convolution descriptor", [](F r) { r.d.n = 0; });
    add("n 2 for 0 rows", "bad convolution descriptor", [](F r) { r.count = 0; });
    add("c 0", "bad convolution descriptor", [](F r) { r.d.c = 0, r.x_bytes = 0; });
    add("h 0", "bad convolution descriptor", [](F r) { r.d.h = 0, r.x_bytes = 0; });
    add("w -1", "bad convolution descriptor", [](F r) { r.d.w = -1; });
    add("f 0", "bad convolution descriptor", [](F r) { r.d.f = 0; });
    add("kh 0", "bad convolution descriptor", [](F r) { r.d.kh = 0; });
    add("kw 0", "bad convolution descriptor", [](F r) { r.d.kw = 0; });
    add("sh 0", "bad convolution descriptor", [](F r) { r.d.sh = 0; });
    add("sw 0", "bad convolution descriptor", [](F r) { r.d.sw = 0; });
    add("oh 0", "bad convolution descriptor", [](F r) { r.d.oh = 0; });
    add("ow 0", "bad convolution descriptor", [](F r) { r.d.ow = 0; });
    add("x rows 4 bytes more", "are not the convolution's", [](F r) { r.x_bytes += 4; });
    add("x rows 4 bytes fewer", "are not the convolution's", [](F r) { r.x_bytes -= 4; });
    add("x rows 1 byte more", "are not the convolution's", [](F r) { r.x_bytes += 1; });
    add("x rows of c*h*w bytes", "are not the convolution's", [](F r) { r.x_bytes /= 4; });
    add("x rows 0 bytes", "are not the convolution's", [](F r) { r.x_bytes = 0; });
    add("x rows of c+1 channels", "are not the convolution's",
        [](F r) { r.x_bytes = 4 * 5 * 4 * 4; });
    add("n*oh*ow past int32", "batch too large", [](F r) {
        r.count = r.d.n = 40000, r.d.c = 1, r.d.h = r.d.w = 302, r.d.kh = r.d.kw = 3;
        r.d.pad_top = r.d.pad_left = 0, r.d.oh = r.d.ow = 300, r.x_bytes = 302 * 302 * 4;
    });
    for (const refusal &r : Rs) {
        context C;
        int64_t c[CNN_COUNTERS] = {1, 7, 6, 5}, c_before[CNN_COUNTERS];
        memcpy(c_before, c, sizeof c);
        guarded<float> ws(4096, 64, f_of(SENTINEL)), x(4096, 64, f_of(SENTINEL));
        guarded<int32_t> t(64, 16, 0x5a5a5a5a);
        cnn_set_error(CNN_OK, "%s", "");
        const cnn_status st = cuda_gather_batch_im2col(
            &C.ctx, order.data(), c, r.count, 2, r.x_bytes, data.data(), x.data(), 4,
            labels.data(), t.data(), &r.d, ws.data());
        bool tickets = C.meet.tickets[0] != 0;
        for (int i = 1; i < CNN_TICKETS; ++i) tickets |= C.meet.tickets[i] != TICKET_SENTINEL + i;
        const bool written = !untouched(ws, f_of(SENTINEL)) || !untouched(x, f_of(SENTINEL)) ||
                             !untouched(t, 0x5a5a5a5a) || memcmp(c, c_before, sizeof c) != 0 ||
                             tickets;
        check_refusal("gather_batch_im2col: ", r.name, r.needle, st, written);
    }
}

// A random batch, order, targets and first convolution (pads 0..2 before,
// an output size that some pad of 0..2 after gives).
static bool random_shape(shape &S, long long budget)
{
    cnn_conv_desc &d = S.d;
    S.count = irange(1, 9);
    const int more = (int)(rng() % 3);
    S.rows = more == 0 ? S.count : more == 1 ? (long)S.count * irange(2, 4) : S.count + irange(1, 5);
    S.resident = rng() % 4 ? irange(1, 40) : irange(1, 4); // few rows: repeats
    S.start = rng() % 4 ? irange(1, 60) : 0;
    static const int negs[] = {0, 0, 10, 10, 30, 100};
    S.neg_pct = negs[rng() % 6];
    d.n = S.count;
    d.c = irange(1, 5);
    d.h = irange(1, 33);
    d.w = rng() % 3 ? irange(1, 33) : d.h;
    d.f = irange(1, 64);
    d.kh = irange(1, 5);
    d.kw = rng() % 3 ? d.kh : irange(1, 5);
    d.sh = irange(1, 3);
    d.sw = rng() % 2 ? d.sh : irange(1, 3);
    const int pad_kind = (int)(rng() % 3);
    int pb = 0, pr = 0;
    if (pad_kind == 0) { // 'valid'
        d.pad_top = d.pad_left = 0;
    } else if (pad_kind == 1) { // 'same'
        same_pads(d.h, d.kh, d.sh, &d.pad_top, &pb);
        same_pads(d.w, d.kw, d.sw, &d.pad_left, &pr);
    } else { // any pads of 0..2: windows of only padding where a pad reaches past a kernel
        d.pad_top = irange(0, 2), d.pad_left = irange(0, 2);
        pb = irange(0, 2), pr = irange(0, 2);
    }
    if (d.h + d.pad_top + pb < d.kh || d.w + d.pad_left + pr < d.kw) return false;
    d.oh = (d.h + d.pad_top + pb - d.kh) / d.sh + 1;
    d.ow = (d.w + d.pad_left + pr - d.kw) / d.sw + 1;
    S.pb = pb, S.pr = pr;
    if ((long long)d.n * d.c * d.kh * d.kw * d.oh * d.ow > budget) return false;
    S.kind = (int)(rng() % 5);
    S.t_src_off = S.t_dst_off = 0;
    S.null_dst = false;
    switch (S.kind) {
    case T_NONE:
        S.t_bytes = rng() % 2 ? 0 : 4 * irange(1, 3); // ignored: src_t is NULL
        S.null_dst = rng() % 2;
        break;
    case T_LABELS: S.t_bytes = 4; break;
    case T_CATEGORICAL: S.t_bytes = 4 * irange(2, 12); break;
    case T_ODD:
        do S.t_bytes = irange(1, 15);
        while (S.t_bytes % 4 == 0);
        S.t_src_off = irange(0, 3), S.t_dst_off = irange(0, 3);
        break;
    default: // 4-byte rows at an odd address
        S.t_bytes = 4 * irange(1, 4);
        S.t_src_off = irange(0, 3), S.t_dst_off = irange(0, 3);
        if (S.t_src_off == 0 && S.t_dst_off == 0) S.t_src_off = 1 + (int)(rng() % 3);
        break;
    }
    S.x_off = (int)(rng() % 2);
    S.name.clear();
    n_more_rows += S.rows > S.count;
    n_start += S.start > 0;
    n_padded += d.pad_top || d.pad_left;
    n_same += pad_kind == 1 && (d.pad_top || d.pad_left);
    n_pad2 += d.pad_top == 2 || d.pad_left == 2;
    n_empty_windows += d.pad_top >= d.kh || d.pad_left >= d.kw ||
                       (d.oh - 1) * d.sh - d.pad_top >= d.h || (d.ow - 1) * d.sw - d.pad_left >= d.w;
    n_nonsquare += d.kh != d.kw;
    n_strided += d.sh > 1 || d.sw > 1;
    n_odd += d.h % 2 || d.w % 2;
    return true;
}

static shape fixed_shape(const char *name, int count, int c, int h, int w, int f, int k, int pad,
                         int kind, size_t t_bytes, int resident, int start)
{
    shape S{};
    const int o_h = h + 2 * pad - k + 1, o_w = w + 2 * pad - k + 1;
    S.d = {count, c, h, w, f, k, k, 1, 1, pad, pad, o_h, o_w};
    S.count = count, S.rows = count, S.resident = resident, S.start = start, S.neg_pct = 0;
    S.kind = kind, S.t_bytes = t_bytes, S.pb = S.pr = pad;
    S.name = name;
    return S;
}

int main(int argc, char **argv)
{
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    const run_args A = parse_args(argc, argv, 40000);
    refusals();
    // the seed networks' first convolutions at batch 32 (cnncuda/seeds.py)
    std::vector<shape> fixed = {
        fixed_shape("CIFAR-10 b32 conv1 32 3x3 valid", 32, 3, 32, 32, 32, 3, 0, T_LABELS, 4, 96,
                    32),
        fixed_shape("LeNet-5 b32 conv1 6 5x5 same", 32, 1, 28, 28, 6, 5, 2, T_LABELS, 4, 96, 7),
        fixed_shape("tiny MNIST b32 conv1 8 3x3 valid, 10 categorical", 32, 1, 28, 28, 8, 3, 0,
                    T_CATEGORICAL, 40, 80, 64),
        // edges: a batch of 0 rows (the counters still move), 1x1 everything
        fixed_shape("count 0", 0, 2, 3, 3, 1, 3, 0, T_LABELS, 4, 3, 5),
        fixed_shape("1x1 everything", 1, 1, 1, 1, 1, 1, 0, T_ODD, 1, 1, 0),
    };
    fixed[1].neg_pct = 10;        // LeNet: a few zero rows
    fixed[2].rows = 64;           // MNIST: one replica's batch of two
    fixed[3].rows = 3;
    fixed[4].t_dst_off = 3;
    const int done = run_shapes(A, fixed, 100, run_case, random_shape, describe);
    printf("coverage: %lld rows > count, %lld nonzero start, %lld with negative indices (%lld "
           "all negative), %lld with repeats; %lld padded (%lld 'same', %lld pad 2, %lld with "
           "windows of only padding), %lld non-square, %lld strided, %lld odd; gather.cu x "
           "units: %lld 16-byte, %lld narrower; targets: %lld none (%lld t_row_bytes ignored, "
           "%lld dst NULL), %lld labels, %lld categorical, %lld odd bytes, %lld misaligned "
           "(%lld single-byte unit)\n",
           n_more_rows, n_start, n_negative, n_all_negative, n_repeats, n_padded, n_same,
           n_pad2, n_empty_windows, n_nonsquare, n_strided, n_odd, n_x16, n_x4, n_t[T_NONE],
           n_t_ignored_bytes, n_t_null_dst, n_t[T_LABELS], n_t[T_CATEGORICAL], n_t[T_ODD],
           n_t[T_MISALIGNED], n_t_byte);
    printf("%d shapes (%lld grid-stride launches, %lld with col in 16 bits, %lld and %lld "
           "through im2col compiled for 3x3 and 5x5), %lld checks, %lld failures\n",
           done, grid_stride_runs, n_col16 / 2, n_fixed_size[0] / 2, n_fixed_size[1] / 2, checks,
           failures);
    if (n_col16 == 0) fail("no check of col in 16 bits");
    if (n_fixed_size[0] == 0 || n_fixed_size[1] == 0) fail("no check of im2col for 3x3 or 5x5");
    return failures != 0;
}
