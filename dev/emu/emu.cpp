// emu.cpp: the scheduler behind cuda_runtime.h's host emulation. A launch
// runs its blocks one after another; a block's threads are fibers on their
// own stacks (entered by a stack switch, then setjmp/longjmp), each run until
// it waits: at __syncthreads (every live thread must wait at the same line;
// a barrier after some threads returned fails, though the GPU allows it) or
// at a warp sync (the whole warp at one line). Within each phase the fibers
// run in a random order (or forward, or reverse), so a read of shared memory
// that another thread writes in the same phase shows as a wrong result.
// x86-64 only.
#include <setjmp.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include <cmath>
#include <cstring>
#include "cuda_runtime.h"

namespace emu {
enum { READY, AT_BLOCK, AT_WARP, DONE };
struct fiber_state {
    jmp_buf jb;
    bool started;
    uint3 tid;
    int state, line;
    alignas(8) char slot[32]; // a warp exchange's: a shuffle's value, an mma's operands
    std::vector<char> stack;
};
fiber_state *cur = nullptr;
uint3 bid;
dim3 bdim, gdim;
static jmp_buf sched_jb;
static std::vector<fiber_state> fibers;
static std::function<void()> *body_p;
static std::mt19937 rng(12345);
static std::vector<float> smem_buf;
int order_mode = 2; // 0 forward, 1 reverse, 2 random
long long switches = 0;

const uint3 &tid_of(fiber_state *f) { return f->tid; }
int lane() { return (int)(cur->tid.x & 31); }
void *slot() { return cur->slot; }
void *partner_slot(int l)
{
    return fibers[(cur->tid.x & ~31u) + (unsigned)l].slot;
}
static void yield_with(int state, int line);

// mma.sync on the host: the warp's lanes exchange their operand registers
// (four of A, two of B) through their slots, then each lane sums its four
// outputs of D: each product is exact in double, the k sum and the add to
// C in double, rounded once to float (the tensor cores' order and
// rounding within one mma are the hardware's own). Fragments as the PTX ISA
// lays them out; lane = 4 g + t.
static void exchange_operands(const unsigned (&a)[4], const unsigned (&b)[2], int line)
{
    unsigned *mine = reinterpret_cast<unsigned *>(cur->slot);
    for (int r = 0; r < 4; ++r) mine[r] = a[r];
    mine[4] = b[0];
    mine[5] = b[1];
    sync_warp(line); // every lane's operands in its slot
}
static const unsigned *operands_of(int lane) { return reinterpret_cast<const unsigned *>(partner_slot(lane)); }
static float float_of(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// the 16-bit value of `half` (0: low) of a register, as a float: bfloat16
// is float32's top half; float16 widened (subnormals, inf, NaN included)
static double half_value(unsigned reg, int half, bool bf16)
{
    const unsigned h = half ? reg >> 16 : reg & 0xffffu;
    if (bf16) return float_of(h << 16);
    const int e = (int)(h >> 10 & 31u), f = (int)(h & 1023u);
    const double sign = h & 0x8000u ? -1.0 : 1.0;
    if (e == 31) return f ? NAN : sign * INFINITY;
    return sign * (e ? ldexp(1024.0 + f, e - 25) : ldexp((double)f, -24));
}
// each lane's D (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) from
// A(row, kk) and B(kk, col) read through the callbacks
template <typename FA, typename FB>
static void sum_outputs(float (&d)[4], int kdepth, FA a_at, FB b_at, int line)
{
    const int g = lane() >> 2, t = lane() & 3;
    float out[4];
    for (int e = 0; e < 4; ++e) {
        const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
        double s = d[e];
        for (int kk = 0; kk < kdepth; ++kk) s += a_at(row, kk) * b_at(kk, col);
        out[e] = (float)s;
    }
    sync_warp(line); // every lane done reading the slots
    for (int e = 0; e < 4; ++e) d[e] = out[e];
}
// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 on the host: lane L
// gives the address of row L % 8 of matrix L / 8 (8 16-bit values, 16
// bytes); each lane gets, in register i, two neighbours of matrix i: row
// g, columns 2t and 2t + 1 (low half first), or with trans rows 2t and
// 2t + 1 of column g.
void ldmatrix_x4(unsigned (&r)[4], const void *row, bool trans)
{
    memcpy(cur->slot, &row, sizeof row);
    sync_warp(__LINE__); // every lane's row address in its slot
    const int g = lane() >> 2, t = lane() & 3;
    unsigned out[4];
    for (int i = 0; i < 4; ++i) {
        unsigned short lo, hi;
        const unsigned short *at;
        if (!trans) {
            memcpy(&at, partner_slot(8 * i + g), sizeof at);
            lo = at[2 * t];
            hi = at[2 * t + 1];
        } else {
            memcpy(&at, partner_slot(8 * i + 2 * t), sizeof at);
            lo = at[g];
            memcpy(&at, partner_slot(8 * i + 2 * t + 1), sizeof at);
            hi = at[g];
        }
        out[i] = (unsigned)lo | (unsigned)hi << 16;
    }
    sync_warp(__LINE__); // every lane done reading the slots
    for (int i = 0; i < 4; ++i) r[i] = out[i];
}
void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    exchange_operands(a, b, __LINE__);
    // TF32: the register's top 19 bits (the low 13 ignored, as the tensor
    // cores ignore them). A (row, kk): lane 4 (row % 8) + kk % 4, register
    // (row >= 8) + 2 (kk >= 4); B (kk, col): lane 4 col + kk % 4, register kk >= 4
    auto tf32 = [](unsigned u) { return (double)float_of(u & 0xffffe000u); };
    sum_outputs(
        d, 8,
        [&](int row, int kk) { return tf32(operands_of(4 * (row % 8) + kk % 4)[(row >= 8) + 2 * (kk >= 4)]); },
        [&](int kk, int col) { return tf32(operands_of(4 * col + kk % 4)[4 + (kk >= 4)]); }, __LINE__);
}
void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], bool bf16)
{
    exchange_operands(a, b, __LINE__);
    // A (row, kk): lane 4 (row % 8) + (kk % 8) / 2, register (row >= 8) +
    // 2 (kk >= 8), half kk % 2; B (kk, col): lane 4 col + (kk % 8) / 2,
    // register kk >= 8, half kk % 2
    sum_outputs(
        d, 16,
        [&](int row, int kk) {
            return half_value(operands_of(4 * (row % 8) + (kk % 8) / 2)[(row >= 8) + 2 * (kk >= 8)], kk % 2, bf16);
        },
        [&](int kk, int col) { return half_value(operands_of(4 * col + (kk % 8) / 2)[4 + (kk >= 8)], kk % 2, bf16); },
        __LINE__);
}

static void yield_with(int state, int line)
{
    cur->state = state;
    cur->line = line;
    switches++;
    if (!_setjmp(cur->jb)) _longjmp(sched_jb, 1);
}
void sync_block(int line) { yield_with(AT_BLOCK, line); }
void sync_warp(int line) { yield_with(AT_WARP, line); }
float *block_smem(size_t floats)
{
    if (smem_buf.size() < floats) {
        fprintf(stderr, "emu: block_smem asked %zu floats, have %zu\n", floats, smem_buf.size());
        abort();
    }
    return smem_buf.data();
}
static void entry()
{
    (*body_p)();
    cur->state = DONE;
    _longjmp(sched_jb, 1);
}
// x86-64: switch to a fresh stack and call entry (which never returns)
static void __attribute__((noinline)) start_on(void *top)
{
    asm volatile("mov %0, %%rsp\n\tcall *%1\n\tud2" ::"r"(top), "r"(entry) : "memory");
}
static void resume(fiber_state &f)
{
    cur = &f;
    if (!_setjmp(sched_jb)) {
        if (!f.started) {
            f.started = true;
            start_on((void *)(((uintptr_t)(f.stack.data() + f.stack.size())) & ~(uintptr_t)15));
        }
        _longjmp(f.jb, 1);
    }
    cur = nullptr;
}
static void fail(const char *what)
{
    fprintf(stderr, "emu: %s (block %u, %u)\n", what, bid.x, bid.y);
    abort();
}
void run_grid(dim3 g, dim3 b, std::function<void()> body)
{
    gdim = g;
    bdim = b;
    body_p = &body;
    const unsigned nt = b.x * b.y * b.z;
    if (b.y != 1 || b.z != 1) fail("1-d blocks only");
    if (fibers.size() < nt) {
        fibers.resize(nt);
        for (auto &f : fibers) f.stack.resize(1 << 16);
    }
    smem_buf.assign(1 << 14, 0.0f);
    std::vector<unsigned> order(nt);
    for (unsigned long long bb = 0; bb < (unsigned long long)g.x * g.y * g.z; ++bb) {
        const unsigned bx = (unsigned)(bb % g.x), by = (unsigned)(bb / g.x % g.y); // x fastest
        bid = uint3{bx, by, (unsigned)(bb / ((unsigned long long)g.x * g.y))};
        std::fill(smem_buf.begin(), smem_buf.end(), std::nanf(""));
        for (unsigned t = 0; t < nt; ++t) {
            fiber_state &f = fibers[t];
            f.started = false;
            f.tid = uint3{t, 0, 0};
            f.state = READY;
            order[t] = t;
        }
        for (;;) {
            if (order_mode == 1) std::reverse(order.begin(), order.end());
            if (order_mode == 2) std::shuffle(order.begin(), order.end(), rng);
            for (unsigned i = 0; i < nt; ++i) {
                fiber_state &f = fibers[order[i]];
                if (f.state != READY) continue;
                resume(f);
            }
            // all blocked or done: warps whose live lanes all wait at one warp sync go on
            bool released = false, any_live = false, all_block = true;
            int bline = -1;
            for (unsigned w0 = 0; w0 < nt; w0 += 32) {
                int live = 0, at_warp = 0, wline = -1;
                for (unsigned t = w0; t < std::min(nt, w0 + 32); ++t) {
                    fiber_state &f = fibers[t];
                    if (f.state == DONE) continue;
                    live++;
                    if (f.state == AT_WARP) {
                        if (wline >= 0 && wline != f.line) fail("lanes at different warp syncs");
                        wline = f.line;
                        at_warp++;
                    }
                }
                if (at_warp) {
                    if (live != 32 || at_warp != 32) fail("a warp sync without the whole warp");
                    for (unsigned t = w0; t < w0 + 32; ++t) fibers[t].state = READY;
                    released = true;
                }
            }
            if (released) continue;
            for (unsigned t = 0; t < nt; ++t) {
                fiber_state &f = fibers[t];
                if (f.state == DONE) continue;
                any_live = true;
                if (f.state != AT_BLOCK) all_block = false;
                if (bline >= 0 && f.line != bline) fail("threads at different __syncthreads");
                bline = f.line;
            }
            if (!any_live) break;
            if (!all_block) fail("deadlock");
            // a barrier with some threads exited: legal on the GPU, but none of ours does it
            for (unsigned t = 0; t < nt; ++t)
                if (fibers[t].state == DONE) fail("__syncthreads after some threads returned");
            for (unsigned t = 0; t < nt; ++t) fibers[t].state = READY;
        }
    }
}
} // namespace emu

// weak: a check that links csrc/status.c (pool_im2col_check, which reads the
// messages) gets the real one
extern "C" __attribute__((weak)) int cnn_set_error(int status, const char *fmt, ...)
{
    fprintf(stderr, "cnn_set_error: %s\n", fmt);
    return status;
}
