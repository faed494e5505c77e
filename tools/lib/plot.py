"""A loss-curve picture as a standalone SVG file (no plotting dependency)."""
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


def _esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
