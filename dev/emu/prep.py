"""prep.py SRC OUT: a .cu source rewritten for the host emulation (see
cuda_runtime.h): the L1 prefetch hint dropped, the backward's shared block
taken from emu::block_smem (NaN-filled per block), the <<<>>> launches as
EMU_LAUNCH, and the forward's launch skipped while emu_skip_forward is set
(the check fills dz and the rows' losses itself)."""
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in dev/emu
from prep_kernels import split_top  # run as a script: its folder is on sys.path

src = open(sys.argv[1]).read()
src = src.replace('asm volatile("prefetch.global.L1 [%0];" ::"l"(a));', '(void)a;')
src = src.replace('__shared__ __align__(16) float smem[HEAD_BWD_SMEM];',
                  'float *smem = emu::block_smem(HEAD_BWD_SMEM);')


def launch(m):
    name, cfg, args = m.group(1), split_top(m.group(2)), m.group(3)
    pre = 'if (!emu_skip_forward) ' if 'forward' in name else ''
    return '%sEMU_LAUNCH(%s, %s, %s, %s);' % (pre, name, cfg[0], cfg[1], args)


src, count = re.subn(r'(\w+)<<<(.*?)>>>\((.*?)\);', launch, src, flags=re.S)
assert count == 2, count
src = 'extern int emu_skip_forward;\n' + src
open(sys.argv[2], 'w').write(src)
