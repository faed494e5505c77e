"""How a complex tensor prints: torch's layout (issue 23).

torch formats the real parts and the imaginary parts with two independent formatters
(each picks integer, fixed or scientific notation from its own values), pads every real
part to one width and writes the imaginary part with its sign right after it:
`tensor([ 0.3120+1.3151j, -0.3496+0.9223j])`, `tensor([1.5000+2.j])`.
"""
import math

import numpy as np

PRECISION = 4  # torch's default print precision


class _PartFormatter:
    """torch's float formatter (torch/_tensor_str.py `_Formatter`) for one real array."""

    def __init__(self, values):
        finite = values[np.isfinite(values) & (values != 0)].astype(np.float64)
        self.int_mode, self.sci_mode, self.width = True, False, 1
        if finite.size == 0:
            return
        absv = np.abs(finite)
        lo, hi = absv.min(), absv.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if self.int_mode:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8
            widths = ([len(f"{v:.{PRECISION}e}") for v in finite] if self.sci_mode
                      else [len(f"{v:.0f}") + 1 for v in finite])
        else:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
            fmt = f"{{:.{PRECISION}{'e' if self.sci_mode else 'f'}}}"
            widths = [len(fmt.format(v)) for v in finite]
        self.width = max(widths)

    def format(self, v):
        if self.sci_mode:
            s = f"{v:{self.width}.{PRECISION}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{PRECISION}f}"
        return " " * (self.width - len(s)) + s


def complex_body(arr):
    """The bracketed body of repr() for a complex NumPy array, as torch prints it."""
    real, imag = _PartFormatter(arr.real), _PartFormatter(arr.imag)

    def element(z):
        re = real.format(float(z.real))
        im = imag.format(float(z.imag)).lstrip() + "j"
        return re + (im if im[0] in "+-" else "+" + im)

    return np.array2string(arr, separator=", ", prefix="tensor(", max_line_width=80,
                           formatter={"complex_kind": element})
