"""tt.backends.cuda: torch's `matmul.allow_tf32` and friends, settable and without effect
(see tt.backends)."""


class _MatmulFlags:
    """`tt.backends.cuda.matmul`: the flags torch's matmul reads. cuBLAS through CuPy always
    computes float32 products in float32 here, so they are recorded and not acted on."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self):
        return f"<tt.backends.cuda.matmul allow_tf32={self.allow_tf32}>"


matmul = _MatmulFlags()


def is_built():
    """Whether this tinytensor can run on CUDA: CuPy is importable and finds a GPU."""
    from ..device import cuda_is_available
    return cuda_is_available()


def flash_sdp_enabled():
    return False


def enable_flash_sdp(enabled):
    """Accepted for torch code: tinytensor's attention kernel is its own (no FlashAttention
    switch), so this changes nothing."""


def mem_efficient_sdp_enabled():
    return False


def enable_mem_efficient_sdp(enabled):
    """Accepted for torch code; changes nothing (see enable_flash_sdp)."""


def math_sdp_enabled():
    return True


def enable_math_sdp(enabled):
    """Accepted for torch code; changes nothing (see enable_flash_sdp)."""
