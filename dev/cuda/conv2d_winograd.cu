// conv2d_winograd.cu: the convolution forward by Winograd's F(2x2, 3x3)
// (conv2d_winograd.cuh), checked against the same CPU reference as
// conv2d_forward and timed at the seed CIFAR-10 CNN's three convolutions at
// batch 32 and at batch 512 (a total of its own), against the engine's
// forward (im2col + SGEMM): issue #29's lead of fewer multiplies (16 for
// each 2x2 block of outputs instead of 36).
//
//   ./conv2d_winograd [VERSION] [--jsonl FILE]
//
// Versions (Winograd at 3x3 stride-1 shapes; the others, among the odd
// shapes, run the engine's forward, so every check still applies):
//   1  U = G g G^T (a kernel), then one kernel: V = B^T d B formed in shared
//      memory 8 channels at a time from loads of each 4x4 patch, the 16
//      products (4 tiles by 4 filters a thread) and A^T M A added as each
//      chunk comes; two blocks an SM (64 KiB of shared memory each, at most
//      128 registers a thread)
//   2  the same, 16 channels at a time: one block an SM (128 KiB), half the
//      adds of A^T M A a channel
//   3  the next chunk's patches and U copied by cp.async into one of two
//      buffers while the chunk before is transformed and multiplied; 4
//      channels a chunk, two blocks an SM (80 KiB each)
//   4  the same, 8 channels a chunk, one block an SM (160 KiB)
//   5  version 1 with each chunk's input rows staged in shared memory first
//      (coalesced cp.async copies; U's by 16-byte copies), the patches read
//      from there: a block takes whole rows of tiles (64 / tw of them), two
//      blocks an SM (96 KiB each)
//   6  the same, one block an SM (its registers unbounded: no spills)
//   7  the same, 16 channels a chunk (192 KiB of shared memory)
//   8  the engine: cuda_conv2d_forward (im2col + cnn_cuda_sgemm, the bias as
//      it stores), conv2d_forward's version 6
#include "common.cuh"
#include "conv2d_winograd.cuh"
#include "conv_cases.cuh"
#include "conv_forward_case.cuh"

using namespace dev;

namespace {

bool engine_forward(const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e)
{
    return engine_ok(cuda_conv2d_forward(e.ctx, &d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, m.ws.p),
                     "cuda_conv2d_forward");
}

using winograd::Loads;

// Winograd where it applies, else the engine.
template <int CC, int MIN_BLOCKS, Loads KIND>
bool winograd_forward(const cnn_conv_desc &d, Buffers &m, bool bias, Engine &e)
{
    if (!winograd::applies(d) || (KIND == Loads::ROWS && !winograd::rows_fit(d)))
        return engine_forward(d, m, bias, e);
    return winograd::forward<CC, MIN_BLOCKS, KIND>(d, m.x.p, m.w.p, bias_of(m, bias), m.y.p, m.ws.p,
                                                    e.stream());
}

const Version VERSIONS[] = {
    {"Winograd F(2x2,3x3): U, then V + 16 products + A^T M A, 8 channels a step",
     winograd_forward<8, 2, Loads::PATCHES>},
    {"Winograd, 16 channels a step, one block an SM", winograd_forward<16, 1, Loads::PATCHES>},
    {"Winograd, 4 channels a step, the next step's loads in flight (cp.async)",
     winograd_forward<4, 2, Loads::PIPED>},
    {"Winograd, 8 channels a step, the next step's loads in flight (cp.async)",
     winograd_forward<8, 1, Loads::PIPED>},
    {"Winograd, 8 channels a step, the block's input rows staged (coalesced loads)",
     winograd_forward<8, 2, Loads::ROWS>},
    {"Winograd, the input rows staged, 8 channels a step, one block an SM (no spills)",
     winograd_forward<8, 1, Loads::ROWS>},
    {"Winograd, the input rows staged, 16 channels a step, one block an SM",
     winograd_forward<16, 1, Loads::ROWS>},
    {"engine cuda_conv2d_forward: im2col + split-K SGEMM + bias", engine_forward},
};

} // namespace

int main(int argc, char **argv)
{
    return run_conv_forward("conv2d_winograd", VERSIONS, argc, argv, true, 500);
}
