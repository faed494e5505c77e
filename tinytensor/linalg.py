"""`tt.linalg`: torch.linalg's names. The ops live by family in tinytensor/ops/ (linalg.py:
matmul and einsum; linalg_solve.py: det, inv, solve, triangular systems, Cholesky;
linalg_decomp.py: svd, eigh, qr and what is built on them; linalg_norms.py; linalg_misc.py:
matrix_exp, cross, vecdot, vander); this module only gathers them under torch's names."""
from .ops.linalg import matmul  # noqa: F401
from .ops.linalg_decomp import (eigh, eigvalsh, householder_product, lstsq, matrix_rank,  # noqa: F401
                                pinv, qr, svd, svdvals)
from .ops.linalg_misc import cross, diagonal, matrix_exp, vander, vecdot  # noqa: F401
from .ops.linalg_norms import cond, matrix_norm, norm, vector_norm  # noqa: F401
from .ops.linalg_solve import (LinAlgError, cholesky, cholesky_ex, det, inv, inv_ex, matrix_power,  # noqa: F401
                               multi_dot, slogdet, solve, solve_ex, solve_triangular, tensorinv,
                               tensorsolve)
from .ops.linalg_lu import lu, lu_factor, lu_factor_ex, lu_solve  # noqa: F401
from .ops.linalg_ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: F401
