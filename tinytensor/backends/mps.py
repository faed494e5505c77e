"""tt.backends.mps: Apple's GPU backend, which tinytensor does not have."""


def is_available():
    return False


def is_built():
    return False
