"""The fusion switch: whether the core ops take the fused kernels or their reference
decompositions.

    import tinytensor as tt
    tt.kernels.set_fusion(False)              # everything runs the reference ops
    with tt.kernels.use_fusion(False): ...    # only inside the block (also a decorator)
    with tt.kernels.use_fusion(False, ops="attention"): ...   # one family only
    TINYTENSOR_FUSION=0 python train.py       # off from the start (also "false", "off", "no")

The families are "softmax" (softmax and log_softmax), "attention"
(scaled_dot_product_attention), "layer_norm" (layer_norm and rms_norm) and
"cross_entropy". Turning fusion off is for debugging: the reference path records the
primitive ops on the tape, so a graph or a gradient can be inspected op by op.
"""
import os

FAMILIES = ("softmax", "attention", "layer_norm", "cross_entropy")

_on = os.environ.get("TINYTENSOR_FUSION", "1").strip().lower() not in ("0", "false", "off", "no")
_off_families = set()


def enabled(family=None):
    """True when the fused path may be taken (for `family`, if given)."""
    return _on and (family is None or family not in _off_families)


def _check(ops):
    ops = [ops] if isinstance(ops, str) else list(ops)
    for op in ops:
        if op not in FAMILIES:
            raise ValueError(f"fusion: unknown op family {op!r}; expected one of {FAMILIES}")
    return ops


def set_fusion(enabled, ops=None):
    """Turn fusion on or off, globally or for some families; returns the previous state,
    which `restore_fusion` accepts."""
    global _on
    prev = (_on, frozenset(_off_families))
    if ops is None:
        _on = bool(enabled)
        if enabled:
            _off_families.clear()
    else:
        for op in _check(ops):
            if enabled:
                _off_families.discard(op)
            else:
                _off_families.add(op)
    return prev


def restore_fusion(state):
    global _on
    _on = state[0]
    _off_families.clear()
    _off_families.update(state[1])


class use_fusion:
    """Context manager (and decorator) that sets fusion inside a block."""

    def __init__(self, enabled=True, ops=None):
        self.enabled = enabled
        self.ops = None if ops is None else _check(ops)

    def __enter__(self):
        self.prev = set_fusion(self.enabled, self.ops)
        return self

    def __exit__(self, *exc):
        restore_fusion(self.prev)

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with use_fusion(self.enabled, self.ops):
                return fn(*args, **kwargs)
        return wrapper


def fusion_enabled(family=None):
    return enabled(family)
