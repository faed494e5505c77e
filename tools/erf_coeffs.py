"""Regenerates tinytensor/ops/_erf_coeffs.py: the polynomials special.py evaluates for erf/erfc.

    python -m tinytensor.tools.erf_coeffs > tinytensor/ops/_erf_coeffs.py     (needs mpmath; about a minute)
    python -m tinytensor.tools.erf_coeffs --c     the same tables as C, for tinytensor/compiler/codegen/tt_math.h

_erf_coeffs.py is the one source of truth: `--c` reads it (no mpmath needed) and prints the
block between tt_math.h's "generated" markers, highest coefficient first and every piece of
a dtype padded with leading zeros to one length, so that C can evaluate whichever piece a
lane is in with one Horner chain of selected coefficients
(tests/tinytensor/compiler/test_tt_erf.py checks the header holds exactly this block).

Each piece is the Chebyshev interpolant (at Chebyshev nodes, computed with 40-digit mpmath) of a
smooth function on an interval, mapped to t in [-1, 1] and written in monomials for Horner. The
degree is the smallest whose float64 Horner evaluation on a dense grid stays within the target
relative error: ~2 ulp of float64 for float64 inputs, 1e-10 for float32 ones (after rounding to
float32 that is within 1 ulp of the exact value). The pieces, for a = |x|:
  small   erf(a) / a      as a function of s = a*a      on a in [0, 0.5) (float32: [0, 1))
  cx_k    erfcx(a) = exp(a*a) erfc(a)                    on [0.5, 1), [1, 2), [2, 4)
  tail    a * erfcx(a)    as a function of u = 1/(a*a)  on a in [4, inf)
"""
import sys

import numpy as np

try:
    import mpmath as mp
    mp.mp.dps = 40
except ImportError:  # only the generation needs it; `--c` reads the stored tables
    mp = None
TARGET = {"float64": 4.5e-16, "float32": 1e-10}


def _erfcx(a):
    return mp.exp(a * a) * mp.erfc(a)


def _erf_over_a(s):
    return mp.erf(mp.sqrt(s)) / mp.sqrt(s) if s > 0 else 2 / mp.sqrt(mp.pi)


PIECES = [  # name, function of the piece's variable, variable's interval, variable of a
    ("small", _erf_over_a, (0.0, 0.25)),
    ("cx1", _erfcx, (0.5, 1.0)),
    ("cx2", _erfcx, (1.0, 2.0)),
    ("cx3", _erfcx, (2.0, 4.0)),
    ("tail", lambda u: _erfcx(1 / mp.sqrt(u)) / mp.sqrt(u) if u > 0 else 1 / mp.sqrt(mp.pi), (0.0, 1 / 16)),
]


# float32 needs fewer digits, so its small piece reaches a = 1 (no exp for most activations)
# and cx1 is not used (special.py's float32 edges skip it)
PIECES_FOR = {"float64": PIECES,
              "float32": [("small", _erf_over_a, (0.0, 1.0))] + [p for p in PIECES if p[0] not in ("small", "cx1")]}
# C kernels' float32 (tt_math.h, computed in double): two pieces, so a vector lane selects
# between two coefficients, not four: the small one, and erfcx(a) on [1, 12] (erfc(12) is 0
# in float) as a function of v = (a - 2) / (a + 2), in which it is smooth enough for degree 11
# over the whole range
_K = 2.0
PIECES_FOR["float32_c"] = PIECES_FOR["float32"][:1] + [
    ("large", lambda v: _erfcx(_K * (1 + v) / (1 - v)), ((1.0 - _K) / (1.0 + _K), (12.0 - _K) / (12.0 + _K)))]
TARGET["float32_c"] = TARGET["float32"]
# C kernels' float32 computed in float (tt_math.h `tt_gelu_cdff`, `tt_erff`: float arithmetic
# with a double finish), one piece per function over its whole range, so no lane picks among
# tables: g(v) = erfcx(a s) (a + K) with v = (a - K) / (a + K) for a = |x| (s = 1/sqrt 2 for the
# GELU's cdf(-a) = exp(-a*a/2) g w / 2, s = 1 for erfc(a) = exp(-a*a) g w, w = 1 / (a + K)), a
# near-constant (0.6 .. 2) whose float Horner sum loses little, up to AMAX (past it x cdf(x) is 0
# in float, and erf(a) is 1); erf below 1/2 as a (erf(a) / a) of a*a
V_K = {"gelu": 2.0, "erfc": 3.0}
V_AMAX = {"gelu": 14.85, "erfc": 4.0}


def _v_piece(name, s2, lo_a):
    """The piece of function `name`: erfcx(a s) (a + K) of v, s*s = s2, a in [lo_a, AMAX]."""
    k, amax = V_K[name], V_AMAX[name]
    a = lambda v: k * (1 + v) / (1 - v)
    return (name, lambda v: _erfcx(a(v) * mp.sqrt(mp.mpf(s2))) * (a(v) + k),
            ((lo_a - k) / (lo_a + k), (amax - k) / (amax + k)))


PIECES_FOR["float32_v"] = [_v_piece("gelu", 0.5, 0.0), _v_piece("erfc", 1.0, 0.5),
                           ("erf_small", _erf_over_a, (0.0, 0.25))]
TARGET["float32_v"] = 3e-9


def chebyshev_monomials(f, lo, hi, n):
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / (n + 1)) for k in range(n + 1)]
    mid, half = (mp.mpf(hi) + lo) / 2, (mp.mpf(hi) - lo) / 2
    vals = [f(mid + half * t) for t in nodes]
    cheb = [2 * mp.fsum(vals[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / (n + 1)) for k in range(n + 1)) / (n + 1)
            for j in range(n + 1)]
    cheb[0] /= 2
    basis = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]  # T_j in monomials
    for j in range(2, n + 1):
        up = [mp.mpf(0)] + [2 * v for v in basis[j - 1]]
        basis.append([u - (basis[j - 2][i] if i < len(basis[j - 2]) else 0) for i, u in enumerate(up)])
    mono = [mp.mpf(0)] * (n + 1)
    for j in range(n + 1):
        for i, v in enumerate(basis[j]):
            mono[i] += cheb[j] * v
    return [float(m) for m in mono], float(mid), float(half)


def max_rel_error(f, lo, hi, coeffs, mid, half):
    xs = np.linspace(lo, hi, 1501)
    t = (xs - mid) * (1.0 / half)   # as special.py and tt_math.h map it
    r = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        r = r * t + c
    ref = np.array([float(f(mp.mpf(x))) for x in xs])
    return float(np.max(np.abs(r / ref - 1)))


def main():
    print('"""Generated by `python -m tinytensor.tools.erf_coeffs` (see there): per dtype, per piece,\n'
          '(mid, half, monomial coefficients in t = (v - mid) / half, lowest first)."""')
    print("PIECES = {")
    fitted, shared = {}, []   # a piece two dtypes use alike (same function, interval, target) is written once
    for dtype, target in TARGET.items():
        print(f"    {dtype!r}: {{")
        for name, f, (lo, hi) in PIECES_FOR[dtype]:
            key = (f, lo, hi, target)
            if key in fitted:
                shared.append((dtype, name, fitted[key]))
                continue
            fitted[key] = (dtype, name)
            for n in range(4, 30):
                coeffs, mid, half = chebyshev_monomials(f, lo, hi, n)
                err = max_rel_error(f, lo, hi, coeffs, mid, half)
                if err <= target:
                    break
            print(f"        {name!r}: ({mid!r}, {half!r}, (  # degree {n}, max rel error {err:.2g}")
            for c in coeffs:
                print(f"            {c!r},")
            print("        )),")
        print("    },")
    print("}")
    for dtype, name, (dtype0, name0) in shared:
        print(f"PIECES[{dtype!r}][{name!r}] = PIECES[{dtype0!r}][{name0!r}]")
    # the dict's order of pieces is the C tables' order: an alias goes back to its place
    for dtype in {d for d, _, _ in shared}:
        order = [name for name, _, _ in PIECES_FOR[dtype]]
        print(f"PIECES[{dtype!r}] = {{k: PIECES[{dtype!r}][k] for k in {order!r}}}")


C_NAMES = {"float64": "TT_ERF64", "float32_c": "TT_ERF32"}   # the sets tt_math.h evaluates
C_BEGIN = "/* BEGIN generated by `python -m tinytensor.tools.erf_coeffs --c` from tinytensor/ops/_erf_coeffs.py */"
C_END = "/* END generated */"


def c_block(pieces=None):
    """The C tables of `pieces` (default: the stored _erf_coeffs.PIECES), as tt_math.h holds them."""
    if pieces is None:
        from tinytensor.ops._erf_coeffs import PIECES as pieces
    lines = [C_BEGIN]
    for dtype, name in C_NAMES.items():
        table = pieces[dtype]
        order = list(table)
        n = max(len(coeffs) for _, _, coeffs in table.values())
        lines.append(f"/* {dtype}: pieces {', '.join(order)}; t = (v - MID) * SCALE */")
        lines.append(f"#define {name}_N {n}")
        lines.append(f"static const double {name}_MID[{len(order)}] = "
                     "{" + ", ".join(float(table[k][0]).hex() for k in order) + "};")
        lines.append(f"static const double {name}_SCALE[{len(order)}] = "
                     "{" + ", ".join((1.0 / table[k][1]).hex() for k in order) + "};")
        lines.append(f"static const double {name}_POLY[{len(order)}][{n}] = {{")
        for k in order:
            coeffs = list(table[k][2])[::-1]
            # a shorter piece starts at its index (the designator): the leading ones stay 0
            lines.append(f"    {{ /* {k} */ [{n - len(coeffs)}] = " + ", ".join(float(c).hex() for c in coeffs) + "},")
        lines.append("};")
    lines.append("/* float32_v: g(t) = C0 + t P(t) (tt_vpoly), t = (v - MID) * SCALE, v = (a - K) / (a + K) "
                 "(erf_small: v = a*a); P highest first */")
    for k, (mid, half, coeffs) in pieces["float32_v"].items():
        name = "TT_V_" + k.upper()
        if k in V_K:
            lines.append(f"#define {name}_K {V_K[k]!r}f")
            lines.append(f"#define {name}_AMAX {V_AMAX[k]!r}f")
        lines.append(f"#define {name}_MID {float(mid).hex()}")
        lines.append(f"#define {name}_SCALE {(1.0 / half).hex()}")
        lines.append(f"#define {name}_C0 {float(coeffs[0]).hex()}")
        lines.append(f"#define {name}_N {len(coeffs) - 1}")
        lines.append(f"static const float {name}_P[{len(coeffs) - 1}] = {{ "
                     + ", ".join(float(np.float32(c)).hex() + "f" for c in list(coeffs[1:])[::-1]) + "};")
    lines.append(C_END)
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--c"]:
        print(c_block())
    else:
        main()
