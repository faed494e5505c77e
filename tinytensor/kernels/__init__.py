"""Fused kernels: softmax / log_softmax, attention, layer_norm / rms_norm, cross_entropy.

Each is one op on the tape (named like the op it replaces) with a NumPy implementation
for the CPU and a CUDA one (`cuda/*.cu`, compiled through CuPy) for the GPU, chosen by
the device of its inputs. Each keeps its reference decomposition in primitive ops (the
code in `tinytensor.ops` that runs with fusion off); a backward with `create_graph=True`
is written in tinytensor ops, so higher-order gradients stay exact.

The core (`F.softmax`, `F.log_softmax`, `F.layer_norm`, `F.rms_norm`,
`F.scaled_dot_product_attention`, `F.cross_entropy`) takes the fused path by default
whenever it applies. To debug with the reference ops instead:

    tt.kernels.set_fusion(False)                     # globally
    with tt.kernels.use_fusion(False): ...           # in a block (also a decorator)
    with tt.kernels.use_fusion(False, ops="attention"): ...  # one family
    TINYTENSOR_FUSION=0                              # environment, read at import
"""
from . import fusion
from .fusion import FAMILIES, fusion_enabled, restore_fusion, set_fusion, use_fusion
from . import attention, cross_entropy, layer_norm, softmax

__all__ = ["FAMILIES", "fusion", "use_fusion", "fusion_enabled", "set_fusion", "restore_fusion",
           "attention", "cross_entropy", "layer_norm", "softmax"]
