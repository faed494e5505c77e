"""A compiled step that draws random numbers, against eager from the same seed: the check
test_distributions.py and test_functional_more.py make."""
import tinytensor as tt


def eager_and_compiled_draws(fn, x, seed, calls=2):
    """([fn(x) eager, `calls` times from `seed`], [the same from tt.compile(fn)]), as arrays."""
    compiled = tt.compile(fn)
    tt.manual_seed(seed)
    eager = [fn(x).numpy() for _ in range(calls)]
    tt.manual_seed(seed)
    replay = [compiled(x).numpy() for _ in range(calls)]
    return eager, replay
