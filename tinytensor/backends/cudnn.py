"""tt.backends.cudnn: torch's cuDNN switches, settable and without effect: tinytensor's
convolutions do not use cuDNN (see tt.backends)."""

allow_tf32 = True      # torch's defaults
benchmark = False
deterministic = False
enabled = True


def is_available():
    """cuDNN is not used by tinytensor, on any device."""
    return False


def version():
    return None
