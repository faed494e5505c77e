"""`tt.special`: torch.special's names. The functions live in ops/special_functions.py (and
the elementwise ops they alias); this module only names them as torch.special does.

    import tinytensor as tt
    x = tt.tensor([0.5, 1.0, 2.0], dtype=tt.float64)
    tt.special.ndtr(x), tt.special.i1e(x), tt.special.zeta(x + 1.0, 1.0)
"""
from .ops.elementwise import erf, log1p, round_half_even as round, sigmoid as expit  # noqa: F401
from .ops.math_functions import exp2, expm1  # noqa: F401
from .ops.reduce import logsumexp  # noqa: F401
from .ops.softmax import log_softmax, softmax  # noqa: F401
from .ops.special_functions import (  # noqa: F401
    airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, chebyshev_polynomial_t,
    chebyshev_polynomial_u, chebyshev_polynomial_v, chebyshev_polynomial_w, digamma, entr, erfc,
    erfcx, erfinv, hermite_polynomial_h, hermite_polynomial_he, i0, i0e, i1, i1e,
    laguerre_polynomial_l, legendre_polynomial_p, log_ndtr, logit, modified_bessel_i0,
    modified_bessel_i1, modified_bessel_k0, modified_bessel_k1, ndtr, ndtri, polygamma,
    scaled_modified_bessel_k0, scaled_modified_bessel_k1, shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w,
    sinc, spherical_bessel_j0, xlog1py, xlogy, zeta)
from .ops.special_functions import digamma as psi, lgamma as gammaln  # noqa: F401
from .ops.special_functions import igamma as gammainc, igammac as gammaincc  # noqa: F401
from .ops.special_functions import mvlgamma as multigammaln  # noqa: F401
