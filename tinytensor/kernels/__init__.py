"""The device runtime of the fused ops, and the switch that turns them on and off.

The fused ops themselves live beside their reference decompositions, one file per family
under `tinytensor/ops/`: softmax.py (softmax, log_softmax), norms.py (layer_norm,
rms_norm), cross_entropy.py, attention.py (scaled_dot_product_attention). Each file holds
the reference op, the fused op (its NumPy forward and backward for the CPU) and the rule
that picks one (`_why_not_fused`). Here are only what the GPU needs: `_cuda` (loading and
compiling `cuda/*.cu` through CuPy), one launcher per family (`cuda_softmax`, `cuda_norm`,
`cuda_cross_entropy`, `cuda_attention`: argument preparation, grids, block sizes) and
`fusion`, the switch.

The core (`F.softmax`, `F.log_softmax`, `F.layer_norm`, `F.rms_norm`,
`F.scaled_dot_product_attention`, `F.cross_entropy`) takes the fused path by default
whenever it applies. To debug with the reference ops instead:

    tt.kernels.set_fusion(False)                     # globally
    with tt.kernels.use_fusion(False): ...           # in a block (also a decorator)
    with tt.kernels.use_fusion(False, ops="attention"): ...  # one family
    TINYTENSOR_FUSION=0                              # environment, read at import

Which path ran, and why the fused one did not apply:

    with tt.kernels.report() as r:
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
        F.softmax(x, dim=-1)
    r["attention"]  # ("reference", "dropout_p > 0 (the fused op has no dropout)")
    r["softmax"]    # ("fused", None)
    r.counts        # {(family, path, reason): calls}, every outcome in the block

Graphs show the same: a fused node is drawn `softmax (fused)`, a node of a reference
decomposition `softmax (reference: dim 0 is not the last axis (1))`, or, inside a larger
one, `matmul (scaled_dot_product_attention reference: dropout_p > 0 ...)`
(`fusion.path_of(node)`).
"""
from . import fusion
from .fusion import FAMILIES, fusion_enabled, report, restore_fusion, set_fusion, use_fusion
from . import cuda_attention, cuda_cross_entropy, cuda_norm, cuda_softmax

__all__ = ["FAMILIES", "fusion", "use_fusion", "fusion_enabled", "set_fusion", "restore_fusion",
           "report", "cuda_attention", "cuda_cross_entropy", "cuda_norm", "cuda_softmax"]
