"""prep.py SRC OUT: a .cu source rewritten for the host emulation (see
cuda_runtime.h): the L1 prefetch hint dropped, the backward's shared block
taken from emu::block_smem (NaN-filled per block), the <<<>>> launches as
EMU_LAUNCH, and the forward's launch skipped while emu_skip_forward is set
(the check fills dz and the rows' losses itself)."""
import re, sys
src = open(sys.argv[1]).read()
src = src.replace('asm volatile("prefetch.global.L1 [%0];" ::"l"(a));', '(void)a;')
src = src.replace('__shared__ __align__(16) float smem[HEAD_BWD_SMEM];',
                  'float *smem = emu::block_smem(HEAD_BWD_SMEM);')
def split_top(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([': depth += 1
        if ch in ')]': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur); cur = ''
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out]
def launch(m):
    name, cfg, args = m.group(1), split_top(m.group(2)), m.group(3)
    pre = 'if (!emu_skip_forward) ' if 'forward' in name else ''
    return '%sEMU_LAUNCH(%s, %s, %s, %s);' % (pre, name, cfg[0], cfg[1], args)
src, count = re.subn(r'(\w+)<<<(.*?)>>>\((.*?)\);', launch, src, flags=re.S)
assert count == 2, count
src = 'extern int emu_skip_forward;\n' + src
open(sys.argv[2], 'w').write(src)
