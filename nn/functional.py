"""nn.functional as torch.nn.functional: `from tinytensor.nn import functional as F`.

The functions live in tinytensor.functional (the engine: they are ops); this module is the
name torch code imports them by, the same function objects under the same names."""
from tinytensor.functional import *  # noqa: F401,F403 -- the re-export is this module's job
from tinytensor.functional import __all__  # noqa: F401
