"""tt.backends as torch.backends: the switches torch scripts set at the top.

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True

They are plain settable flags here. On the CPU they change nothing (there is no TF32 and no
cuDNN); on CUDA, tinytensor's matrix products go through CuPy's cuBLAS, which computes in
full float32 whatever `allow_tf32` says, and it has no cuDNN autotuner for `benchmark` to
turn on. Scripts that set them run as written and compute what they would with them off.
"""
from . import cuda, cudnn, mps  # noqa: F401

__all__ = ["cuda", "cudnn", "mps"]
