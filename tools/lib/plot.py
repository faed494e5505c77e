"""Pictures as standalone SVG files (no plotting dependency): loss curves, and a matrix as a
heat map (the Jacobian picture of docs/func.md)."""
import math

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"]


def _ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out = []
    v = start
    while v <= hi + 1e-12:
        out.append(round(v, 10))
        v += step
    return out


def write_curves_svg(path, series, title="", xlabel="step", ylabel="loss", width=640, height=380):
    """series: {name: [(x, y), ...]}; draws each as a line with a legend."""
    pts = [p for s in series.values() for p in s if math.isfinite(p[1])]
    if not pts:
        raise ValueError("write_curves_svg: nothing to plot")
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    if x1 == x0:
        x1 = x0 + 1
    pad = (y1 - y0) * 0.05 or 0.5
    y0, y1 = y0 - pad, y1 + pad
    left, right, top, bottom = 60, 20, 36, 46
    W, H = width - left - right, height - top - bottom

    def sx(x):
        return left + (x - x0) / (x1 - x0) * W

    def sy(y):
        return top + (1 - (y - y0) / (y1 - y0)) * H

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{_esc(title)}</text>']
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{left}" x2="{left + W}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in _ticks(x0, x1):
        out.append(f'<text x="{sx(t):.1f}" y="{top + H + 16}" text-anchor="middle">{t:g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{W}" height="{H}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{left + W / 2}" y="{height - 8}" text-anchor="middle">{_esc(xlabel)}</text>')
    out.append(f'<text x="14" y="{top + H / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + H / 2})">{_esc(ylabel)}</text>')
    for i, (name, s) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s if math.isfinite(y))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{line}"/>')
        ly = top + 14 + 16 * i
        out.append(f'<line x1="{left + W - 120}" x2="{left + W - 100}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{left + W - 94}" y="{ly + 4}">{_esc(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def write_heatmap_svg(path, matrix, title="", xlabel="", ylabel="", cell=14, legend="value"):
    """matrix: rows of non-negative numbers (a list of lists or a 2-D array), drawn as a
    grid of cells from white (0) to dark blue (the largest entry), row 0 at the top;
    a colour bar says what the darkest cell is worth."""
    rows = [[float(v) for v in r] for r in matrix]
    if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
        raise ValueError("write_heatmap_svg: matrix must be a non-empty rectangle of numbers")
    if any(not math.isfinite(v) or v < 0 for r in rows for v in r):
        raise ValueError("write_heatmap_svg: entries must be finite and non-negative")
    top_value = max(max(r) for r in rows) or 1.0
    n, m = len(rows), len(rows[0])
    left, top, bar = 56, 36, 70
    W, H = m * cell, n * cell
    width, height = left + W + bar, top + H + 44

    def shade(v):   # white -> #08306b, linear in the value
        f = v / top_value
        return "#%02x%02x%02x" % tuple(round(255 + (c - 255) * f) for c in (0x08, 0x30, 0x6b))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + W / 2}" y="20" text-anchor="middle" font-size="14">{_esc(title)}</text>']
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            out.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell}" height="{cell}" '
                       f'fill="{shade(v)}"><title>[{i}, {j}] {v:.4g}</title></rect>')
    out.append(f'<rect x="{left}" y="{top}" width="{W}" height="{H}" fill="none" stroke="#444"/>')
    step = max(1, math.ceil(12 / cell))   # a tick label every `step` cells, so labels never overlap
    for j in range(0, m, step):
        out.append(f'<text x="{left + (j + 0.5) * cell:.1f}" y="{top + H + 13}" text-anchor="middle">{j}</text>')
    for i in range(0, n, step):
        out.append(f'<text x="{left - 4}" y="{top + (i + 0.5) * cell + 4:.1f}" text-anchor="end">{i}</text>')
    out.append(f'<text x="{left + W / 2}" y="{height - 8}" text-anchor="middle">{_esc(xlabel)}</text>')
    out.append(f'<text x="14" y="{top + H / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + H / 2})">{_esc(ylabel)}</text>')
    bx = left + W + 16
    for k in range(20):   # the colour bar, darkest at the top
        out.append(f'<rect x="{bx}" y="{top + k * H / 20:.1f}" width="12" height="{H / 20 + 0.5:.1f}" '
                   f'fill="{shade(top_value * (1 - k / 20))}"/>')
    out.append(f'<text x="{bx}" y="{top - 4}">{top_value:.3g}</text>')
    out.append(f'<text x="{bx}" y="{top + H + 13}">0</text>')
    out.append(f'<text x="{bx + 30}" y="{top + H / 2}" text-anchor="middle" '
               f'transform="rotate(90 {bx + 30} {top + H / 2})">{_esc(legend)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def _esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
