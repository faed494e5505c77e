"""The fused LSTM and GRU cells: the gates and state update of one step as ONE op.

    (z, c) -> (h', c'),  z = x W_ih^T + b_ih + h W_hh^T + b_hh  (B, 4H), gates i, f, g, o
    c' = sigmoid(f) * c + sigmoid(i) * tanh(g),   h' = sigmoid(o) * tanh(c')

    GRU: (xp, hp, h) -> h',  xp = x W_ih^T + b_ih, hp = h W_hh^T + b_hh  (B, 3H), gates r, z, n
    r = sigmoid(xr + hr), z = sigmoid(xz + hz), n = tanh(xn + r * hn),  h' = n + z * (h - n)

The reference is the same formula in ten recorded ops (nn/recurrent.py, `lstm_step`, `gru_step`). Per
time step that is ten tape nodes forward and ten backward, and at a language model's sizes
(batch 20, 200 units) their bookkeeping costs more than their arithmetic; one node does the
arithmetic in a few NumPy passes and its first-order backward on arrays. `backward` is the
reference's formula in tinytensor ops (recomputed from z and c), so create_graph still
differentiates it. The rule that picks it (`use_fused`): eager with fusion on; a tt.compile
capture records the reference ops instead, which the compiler fuses into its own kernels.
"""

from ..core.function import Function
from ..core.grad_mode import STATE
from ..kernels import fusion
from .elementwise import _sigmoid, sigmoid, tanh
from .forward_mode import add
from .movement import cat
from .split_parts import split_parts
from ..device import xp_of as _xp


def use_fused():
    """Eager with fusion on (tt.kernels.set_fusion): the fused cell; else the reference ops."""
    return not STATE.hooks.capturing and fusion.enabled()


class LstmCell(Function):
    name = "lstm_cell"
    fusion = "fused"   # the path graph export and tt.kernels.report name (kernels/fusion.py)

    @staticmethod
    def forward(ctx, z, c):
        xp = _xp(z)
        H = c.shape[-1]
        s = _sigmoid(xp, z)                      # (B, 4H): i, f and o used; g's quarter unused
        i, f, o = s[:, :H], s[:, H:2 * H], s[:, 3 * H:]
        g = xp.tanh(z[:, 2 * H:3 * H])
        c2 = f * c
        c2 += i * g
        tc = xp.tanh(c2)
        h2 = o * tc
        ctx.save_for_backward(z, c, i, f, g, o, tc)
        return h2, c2

    @staticmethod
    def backward(ctx, dh, dc):
        z, c = ctx.saved_tensor(0), ctx.saved_tensor(1)
        H = c.shape[-1]
        zi, zf, zg, zo = split_parts(z, (H,) * 4, z.ndim - 1)
        i, f, g, o = sigmoid(zi), sigmoid(zf), tanh(zg), sigmoid(zo)
        tc = tanh(f * c + i * g)
        dc = dc + dh * o * (1.0 - tc * tc)       # through h' = o * tanh(c')
        dz = cat([dc * g * (i * (1.0 - i)), dc * c * (f * (1.0 - f)), dc * i * (1.0 - g * g),
                  dh * tc * (o * (1.0 - o))], z.ndim - 1)
        return dz, dc * f

    @staticmethod
    def jvp(ctx, tz, tc_in):
        """dc' = df c + f dc + di g + i dg, dh' = do tanh(c') + o (1 - tanh(c')^2) dc', each
        gate's tangent its slope times its part of dz (gates recomputed as in backward)."""
        z, c = ctx.saved_tensor(0), ctx.saved_tensor(1)
        H = c.shape[-1]
        zi, zf, zg, zo = split_parts(z, (H,) * 4, z.ndim - 1)
        i, f, g, o = sigmoid(zi), sigmoid(zf), tanh(zg), sigmoid(zo)
        tc = tanh(f * c + i * g)
        dc = dh = None
        if tz is not None:
            ti, tf, tg, to = split_parts(tz, (H,) * 4, z.ndim - 1)
            dc = tf * (f * (1.0 - f)) * c + ti * (i * (1.0 - i)) * g + i * (tg * (1.0 - g * g))
            dh = to * (o * (1.0 - o)) * tc
        if tc_in is not None:
            dc = add(dc, f * tc_in)
        return add(dh, o * (1.0 - tc * tc) * dc), dc

    @staticmethod
    def backward_arrays(ctx, dh, dc):
        c, i, f, g, o, tc = (ctx.saved_array(k) for k in range(1, 7))
        xp = _xp(c)
        dc = dc + dh * o * (1.0 - tc * tc)
        dz = xp.concatenate([dc * g * (i * (1.0 - i)), dc * c * (f * (1.0 - f)), dc * i * (1.0 - g * g),
                             dh * tc * (o * (1.0 - o))], axis=-1)
        return dz, dc * f


def lstm_cell(z, c):
    """(h', c') of an LSTM step from its gate pre-activations z (B, 4H) and state c (B, H)."""
    if z.ndim != 2 or c.ndim != 2 or z.shape[0] != c.shape[0] or z.shape[1] != 4 * c.shape[1]:
        raise ValueError(f"lstm_cell: expected z (B, 4H) and c (B, H), got {tuple(z.shape)} and {tuple(c.shape)}")
    return LstmCell.apply(z, c)


class GruCell(Function):
    name = "gru_cell"
    fusion = "fused"

    @staticmethod
    def forward(ctx, xp_, hp, h):
        xp = _xp(h)
        H = h.shape[-1]
        rz = _sigmoid(xp, xp_[:, :2 * H] + hp[:, :2 * H])
        r, z = rz[:, :H], rz[:, H:]
        hn = hp[:, 2 * H:]
        n = xp.tanh(xp_[:, 2 * H:] + r * hn)
        out = h - n
        out *= z
        out += n
        ctx.save_for_backward(xp_, hp, h, r, z, n)
        return out

    @staticmethod
    def _gates(ctx):
        """The gates recomputed in tinytensor ops (differentiable again) from the saved inputs:
        h, hn, r, z, n, H and the dim the gates are concatenated along."""
        xp_, hp, h = ctx.saved_tensor(0), ctx.saved_tensor(1), ctx.saved_tensor(2)
        H = h.shape[-1]
        d = h.ndim - 1
        xr, xz, xn = split_parts(xp_, (H,) * 3, d)
        hr, hz, hn = split_parts(hp, (H,) * 3, d)
        r, z = sigmoid(xr + hr), sigmoid(xz + hz)
        return h, hn, r, z, tanh(xn + r * hn), H, d

    @staticmethod
    def backward(ctx, g):
        h, hn, r, z, n, H, d = GruCell._gates(ctx)
        dn = g * (1.0 - z) * (1.0 - n * n)        # through tanh, at its pre-activation
        dr = dn * hn * (r * (1.0 - r))
        dz = g * (h - n) * (z * (1.0 - z))
        return cat([dr, dz, dn], d), cat([dr, dz, dn * r], d), g * z

    @staticmethod
    def jvp(ctx, txp, thp, th):
        """h' = n + z (h - n): dh' = (1 - z) dn + (h - n) dz + z dh, with dr, dz the sigmoid
        slopes times d(x. + h.) and dn = (1 - n^2) (dxn + dr hn + r dhn)."""
        h, hn, r, z, n, H, d = GruCell._gates(ctx)
        parts = [split_parts(t, (H,) * 3, d) if t is not None else (None,) * 3 for t in (txp, thp)]
        ar, az = add(parts[0][0], parts[1][0]), add(parts[0][1], parts[1][1])
        dr = ar * (r * (1.0 - r)) if ar is not None else None
        an = add(parts[0][2], add(dr * hn if dr is not None else None,
                                  r * parts[1][2] if parts[1][2] is not None else None))
        out = an * (1.0 - n * n) * (1.0 - z) if an is not None else None
        if az is not None:
            out = add(out, az * (z * (1.0 - z)) * (h - n))
        if th is not None:
            out = add(out, th * z)
        return out

    @staticmethod
    def backward_arrays(ctx, g):
        hp, h, r, z, n = (ctx.saved_array(k) for k in range(1, 6))
        xp = _xp(h)
        H = h.shape[-1]
        dn = g * (1.0 - z) * (1.0 - n * n)
        dr = dn * hp[:, 2 * H:] * (r * (1.0 - r))
        dz = g * (h - n) * (z * (1.0 - z))
        return xp.concatenate([dr, dz, dn], axis=-1), xp.concatenate([dr, dz, dn * r], axis=-1), g * z


def gru_cell(xp, hp, h):
    """h' of a GRU step from its input and hidden projections xp, hp (B, 3H) and state h (B, H)."""
    if (h.ndim != 2 or xp.shape != hp.shape or xp.ndim != 2 or xp.shape[0] != h.shape[0]
            or xp.shape[1] != 3 * h.shape[1]):
        raise ValueError(f"gru_cell: expected xp and hp (B, 3H) and h (B, H), got {tuple(xp.shape)}, "
                         f"{tuple(hp.shape)} and {tuple(h.shape)}")
    return GruCell.apply(xp, hp, h)
