"""prep_kernels.py SRC OUT [--suffix SFX] [--shim FILE]: a .cu source
rewritten for the host emulation (cuda_runtime.h), for files whose kernels
use no asm and no shared memory but __shared__ scalars (a static there:
blocks run one after another) (pool.cu, pool_im2col_kernels.cuh, gather.cu,
gather_im2col.cu): every launch name<<<grid, block[, smem, stream]>>>(args);
as EMU_LAUNCH (a template as (name<...>): its commas would split the
macro's arguments). prep.py stays dense_head.cu's (its shared block, its
skipped forward).

--suffix SFX: the file's kernels (__global__) and its non-static entries
(cnn_status NAME( at a line's start) renamed NAME -> NAME + SFX by #defines
before the includes (the headers' declarations follow), so that two
revisions of one file link into one program: without it, the two
revisions' template kernels, weak symbols of one name, would silently merge.
--shim FILE: FILE appended (host code that launches the file's kernels
directly, e.g. the size_t instantiations), @SFX@ replaced by SFX.
prep.py imports split_top from here."""
import re
import sys


def split_top(s):
    """s split at its commas outside parentheses and brackets, stripped."""
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([': depth += 1
        if ch in ')]': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur)
            cur = ''
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out]


def launch(m):
    name, cfg, a = m.group(1), split_top(m.group(2)), m.group(3)
    if '<' in name:  # a template's commas would split the macro's arguments
        name = '(%s)' % name
    return 'EMU_LAUNCH(%s, %s, %s, %s);' % (name, cfg[0], cfg[1], a)


def main():
    args = sys.argv[1:]
    suffix, shim = '', None
    while len(args) > 2:
        if args[0] == '--suffix':
            suffix, args = args[1], args[2:]
        elif args[0] == '--shim':
            shim, args = args[1], args[2:]
        else:
            sys.exit('prep_kernels.py: unknown option %s' % args[0])
    src = open(args[0]).read()
    src, count = re.subn(r'(\w+(?:<[^<>;]*>)?)<<<(.*?)>>>\((.*?)\);', launch, src, flags=re.S)
    assert count >= 1, 'no launch in %s' % args[0]
    assert '<<<' not in src, 'a launch left unconverted in %s' % args[0]
    head = ''
    if suffix:
        names = set(re.findall(r'__global__\s+void\s+(\w+)\s*\(', src))
        names |= set(re.findall(r'^cnn_status\s+(\w+)\s*\(', src, re.M))
        head = ''.join('#define %s %s%s\n' % (n, n, suffix) for n in sorted(names))
    if shim:
        src += '\n' + open(shim).read().replace('@SFX@', suffix)
    open(args[1], 'w').write(head + src)


if __name__ == '__main__':
    main()
