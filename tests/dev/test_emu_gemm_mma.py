"""The host emulation of the wide SGEMM's tensor-core instances
(dev/emu/gemm_mma_check.cpp: precisions "tf32", "bf16" and "fp16", their
mma.sync emulated with each lane's fragments as the PTX ISA lays them out):
every instance (row tiles 32, 64, 128; A and B either way round) on random
odd shapes with the engine's layouts and extras, against float64 sums of
the operands rounded as the precision says, within float32's rounding of
the sum's magnitude per k step; and the 16-bit instances that take B
stored in 16 bits (a convolution's column matrix) against B in float32,
bit for bit. Skipped without g++ or on other than
x86-64."""
from emulation import run_emulation


def test_gemm_mma_emulation():
    run = run_emulation("run_gemm_mma.sh", 2, 13)
    assert ", 0 failed" in run.stdout, run.stdout
    checks = int(run.stdout.split("gemm_mma_check: ")[1].split()[0])
    sums = int(run.stdout.split("checks (")[1].split()[0])
    b16 = int(run.stdout.split("copies, ")[1].split()[0])
    # every instance twice and the seed CNN's nine products; then again each
    # 16-bit product with A plain and B not batched, with B in 16 bits
    assert checks == 9 + 36 * 2 + b16 and sums >= 4 and b16 >= 10, run.stdout
