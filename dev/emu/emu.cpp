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
#include "cuda_runtime.h"

namespace emu {
enum { READY, AT_BLOCK, AT_WARP, DONE };
struct fiber_state {
    jmp_buf jb;
    bool started;
    uint3 tid;
    int state, line;
    char slot[8];
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
