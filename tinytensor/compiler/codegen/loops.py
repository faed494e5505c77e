"""Loop nests shared by every C kernel: strides of broadcast reads, the collapse of dims
that every operand steps through alike, the C function around a loop nest (its restrict
parameters, its dynamic sizes, its parts for the thread pool), and the kernel of a fused body
without reductions: one loop nest over its output shape.

A kernel is one loop nest over its output shape (static: the source is specialized on
it). Dimensions along which every operand is contiguous or broadcast alike are collapsed,
so the innermost loop is usually the whole array, with each input read either at the
loop index or at a fixed offset (broadcast): loops the C compiler vectorizes.
"""
import numpy as np

from ... import symbolic
from .emit import CTYPE, expr, lit
from . import toolchain

GRAIN = 16   # a split flat loop is cut at multiples of 16 elements: whole 64-byte cache lines


def broadcast_strides(shape, loop):
    """Element strides of a contiguous array of `shape` read broadcast over `loop`."""
    shape = (1,) * (len(loop) - len(shape)) + tuple(shape)
    strides, acc = [], 1
    for s, n in zip(reversed(shape), reversed(loop)):
        strides.append(acc if s != 1 or n == 1 else 0)
        acc *= s
    return strides[::-1]


def collapse(loop, operand_strides):
    """Merge adjacent dims wherever every operand steps through both the same way."""
    dims = [loop[0]] if loop else [1]
    strides = [[s[0]] if loop else [0] for s in operand_strides]
    for d in range(1, len(loop)):
        if all(s[d - 1] == s[d] * loop[d] for s in operand_strides):
            dims[-1] *= loop[d]
            for acc, s in zip(strides, operand_strides):
                acc[-1] = s[d]
        else:
            dims.append(loop[d])
            for acc, s in zip(strides, operand_strides):
                acc.append(s[d])
    return dims, strides


def function(cname, operands, n_out, same, body, symbols=(), split=None):
    """The C of a kernel whose loop nest is `body` (lines, indented one level): a static
    body function taking every operand as a `restrict` parameter (p0, p1, ...: outputs,
    then const inputs), the entry `void cname_part(void *const *b, const int64_t *n,
    int64_t part, int64_t parts)` that unpacks them, and `void cname(void *const *b)` (with
    `const int64_t *n` too where the kernel has dynamic sizes), the whole kernel in one call:
    the runner's call of one thread, whose arguments ctypes converts fastest.
    GCC honours restrict on parameters, not on locals loaded from b[]: without it a kernel
    of many operands needs more run-time overlap checks than GCC versions a loop for, and
    stays scalar (the AdamW update: 12 µs per 1K elements scalar, 1.1 vectorized).
    `same` ({input operand: output operand}) names inputs that are the very memory of an
    output (an optimizer update computed in place, codegen/runner.py): such an input gets
    no parameter of its own and reads through a pointer based on the output's, which
    restrict allows, so the loop still needs no overlap check.

    `symbols` (names s0, s1, ...) are the dynamic sizes the loops read (tt.compile with
    dynamic=True): the entries take them as `n`, n[k] the size of s<k> (`cname_part` always
    has `n`, NULL for fixed sizes: one signature for the thread pool), and hand the body
    each one it uses as a parameter of that name, so `s0*s1` in a loop bound is plain C.

    `cname_part` computes part `part` of `parts` (codegen/threads.py splits big kernels
    over threads); `cname` is part 0 of 1.
    `split` = (the length of the loop that is split, as C, and its grain): the body's loop
    over it runs from `tt_lo` to `tt_hi`, this part's share, cut at multiples of the grain
    (whole cache lines of output per thread). A kernel without one (a sum over everything)
    runs whole as part 0 and does nothing as any other part."""
    same = same or {}
    params, args, lines = [], [], []
    sizes = [(f"const int64_t {name}", f"n[{int(name[1:])}]") for name in symbols]
    for k, v in enumerate(operands):
        t = CTYPE[v.dtype.name]
        const = "const " if k >= n_out else ""
        if k in same:
            lines.append(f"    const {t} *p{k} = p{same[k]};  /* the same memory, read before written */")
            continue
        params.append(f"{const}{t} *restrict p{k}")
        args.append(f"({const}{t} *)b[{k}]")
    params += [p for p, _ in sizes] + ["const int64_t part", "const int64_t parts"]
    args += [a for _, a in sizes] + ["part", "parts"]
    head = [f"static inline __attribute__((always_inline)) void {cname}_body({', '.join(params)}) {{"]
    if split is None:
        lines.insert(0, "    if (part != 0) return;   /* not split: part 0 does it all */")
    else:
        d, grain = split
        lines.insert(0, f"    const int64_t tt_lo = tt_part_start({d}, part, parts, {grain}), "
                        f"tt_hi = tt_part_start({d}, part + 1, parts, {grain});")
    entry = [f"{toolchain.CLONES}void {cname}_part(void *const *b, const int64_t *n, int64_t part, int64_t parts) {{",
             f"    {cname}_body({', '.join(args)});", "}",
             f"void {cname}(void *const *b{', const int64_t *n' if sizes else ''}) {{",
             f"    {cname}_part(b, {'n' if sizes else '0'}, 0, 1);", "}"]
    return "\n".join(head + lines + body + ["}"] + entry)


def contiguous(shape):
    return broadcast_strides(shape, shape)


def split_at(dims):
    """The loop a kernel's parts share out: the first of length other than 1 (a dim of 1
    that the collapse could not merge, next to a broadcast operand, would leave all the
    work to one part); None if every loop has length 1."""
    return next((d for d, n in enumerate(dims) if not (isinstance(n, int) and n == 1)), None)


def flat_kernel_source(body, cname, same=None):
    """C source of the kernel of a fused body without reductions (see `function`)."""
    loop = tuple(body.outputs[0].shape)
    operands = list(body.outputs) + list(body.inputs)
    dims, strides = collapse(loop, [broadcast_strides(v.shape, loop) for v in operands])
    nd = len(dims)
    lines = []
    idx = [f"i{d}" for d in range(nd - 1)] + ["j"]
    indent = "    "
    cut = split_at(dims)
    for d in range(nd):
        lo, hi = ("tt_lo", "tt_hi") if d == cut else ("0", dims[d])
        lines.append(f"{indent}for (int64_t {idx[d]} = {lo}; {idx[d]} < {hi}; {idx[d]}++) {{")
        indent += "    "

    def offset(st):
        terms = [f"{i}" if s == 1 else f"{i} * {s}" for i, s in zip(idx, st) if s]
        return " + ".join(terms) or "0"

    names = {v.id: lit(np.asarray(a).reshape(()).item(), CTYPE[v.dtype.name])
             for v, a in body.consts.items()}
    for k, v in enumerate(body.inputs, start=len(body.outputs)):
        names[v.id] = f"x{k}"
        lines.append(f"{indent}const {CTYPE[v.dtype.name]} x{k} = p{k}[{offset(strides[k])}];")
    for n, ins in enumerate(body.instrs):
        out = ins.outputs[0]
        t = CTYPE[out.dtype.name]
        names[out.id] = f"v{n}"
        lines.append(f"{indent}const {t} v{n} = {expr(ins, [names[v.id] for v in ins.inputs], t)};"
                     f"  /* {ins.op} */")
    for k, v in enumerate(body.outputs):
        lines.append(f"{indent}p{k}[{offset(strides[k])}] = {names[v.id]};")
    for d in range(nd):
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return function(cname, operands, len(body.outputs), same, lines, symbolic.program_symbols(body),
                     split=None if cut is None else (dims[cut], GRAIN if cut == nd - 1 else 1))
