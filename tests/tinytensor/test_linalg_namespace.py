"""tt.linalg and the top-level names that alias it, against torch in float64: values,
gradients and double backward (one line per case), torch's errors for singular and
non-positive-definite input, and the data-dependent results (pivots, info, rank) replayed
by tt.compile on two inputs. The op_db conformance test runs every name too; these cases
add batches, double backward and the gradients op_db does not take (gauge-invariant
functions of singular and eigenvectors, whose signs are LAPACK's choice)."""
import numpy as np
import pytest
import torch

import tinytensor as tt
from tests.tinytensor.cases import check_double

rng = np.random.default_rng(23)
A = rng.standard_normal((2, 4, 4))
B = rng.standard_normal((2, 4, 3))
TALL = rng.standard_normal((2, 5, 3))
WIDE = rng.standard_normal((2, 3, 5))
V3 = rng.standard_normal((2, 4, 3))
W3 = rng.standard_normal((4, 3))
X_ZERO = np.array([[0.0, 1.5, -2.0, 0.5], [1.0, -1.0, 3.0, 0.0]])


def spd(m, a):
    """a well-conditioned symmetric positive-definite batch built from a (so it has gradients)."""
    return a @ a.mT + 4 * m.eye(a.shape[-1], dtype=a.dtype)


def sym(m, a):
    return a + a.mT


CASES = {
    # norms
    "vector_norm_2": (lambda m, x: m.linalg.vector_norm(x), [A]),
    "vector_norm_3_dim": (lambda m, x: m.linalg.vector_norm(x, 3, dim=(0, 2), keepdim=True), [A]),
    "vector_norm_0": (lambda m, x: m.linalg.vector_norm(x, 0, dim=1), [X_ZERO]),
    # torch's double backward for 0 < p < 1 imports torch._dynamo (9 s): finite differences below
    "vector_norm_half": (lambda m, x: m.linalg.vector_norm(x, 0.5, dim=1), [A], {"double_backward": False}),
    "vector_norm_neg": (lambda m, x: m.linalg.vector_norm(x, -1.5, dim=-1), [A], {"double_backward": False}),
    "vector_norm_inf": (lambda m, x: m.linalg.vector_norm(x, float("inf"), dim=-1), [A]),
    "vector_norm_neginf": (lambda m, x: m.linalg.vector_norm(x, -float("inf"), dim=-1), [A]),
    "matrix_norm_fro": (lambda m, x: m.linalg.matrix_norm(x), [A]),
    "matrix_norm_nuc": (lambda m, x: m.linalg.matrix_norm(x, "nuc", keepdim=True), [TALL]),
    "matrix_norm_2": (lambda m, x: m.linalg.matrix_norm(x, 2), [WIDE]),
    "matrix_norm_neg2": (lambda m, x: m.linalg.matrix_norm(x, -2), [TALL]),
    "matrix_norm_1_dims": (lambda m, x: m.linalg.matrix_norm(x, 1, dim=(2, 0)), [A]),
    "matrix_norm_inf": (lambda m, x: m.linalg.matrix_norm(x, float("inf")), [A]),
    "matrix_norm_neginf_keep": (lambda m, x: m.linalg.matrix_norm(x, -float("inf"), keepdim=True), [A]),
    "linalg_norm_flat": (lambda m, x: m.linalg.norm(x), [A]),
    "linalg_norm_vec_dim": (lambda m, x: m.linalg.norm(x, 4, dim=1), [A]),
    "linalg_norm_2d_ord": (lambda m, x: m.linalg.norm(x, "nuc"), [W3]),
    "torch_norm_nuc": (lambda m, x: m.norm(x, "nuc"), [W3]),
    "torch_norm_neg": (lambda m, x: m.norm(x, -1, dim=1), [A], {"double_backward": False}),
    "cond_2": (lambda m, x: m.linalg.cond(x), [A]),
    "cond_neg2": (lambda m, x: m.linalg.cond(x, -2), [TALL]),
    # torch's own backward of these fails (it writes into inv_ex's result): values only
    "cond_fro": (lambda m, x: m.linalg.cond(x, "fro"), [A], {"grad": False}),
    "cond_1": (lambda m, x: m.linalg.cond(x, 1), [A], {"grad": False}),
    # determinants, inverses, systems
    "det": (lambda m, x: m.linalg.det(x), [A]),
    "det_top": (lambda m, x: m.det(x), [A]),
    "slogdet": (lambda m, x: m.linalg.slogdet(x), [A]),
    "logdet": (lambda m, x: m.logdet(spd(m, x)), [A]),
    "inv": (lambda m, x: m.linalg.inv(x), [A]),
    "inverse": (lambda m, x: m.inverse(x), [A]),
    "inv_ex": (lambda m, x: m.linalg.inv_ex(x), [A]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [A, B]),
    "solve_vector": (lambda m, a, b: m.linalg.solve(a, b), [A, A[:, 0]]),
    "solve_broadcast": (lambda m, a, b: m.linalg.solve(a, b), [A[0], B]),
    "solve_right": (lambda m, a, b: m.linalg.solve(a, b.mT, left=False), [A, B]),
    "solve_ex": (lambda m, a, b: m.linalg.solve_ex(a, b), [A, B]),
    "solve_triangular_upper": (lambda m, a, b: m.linalg.solve_triangular(a + 4 * m.eye(4, dtype=a.dtype), b, upper=True), [A, B]),
    "solve_triangular_lower_unit_right": (
        lambda m, a, b: m.linalg.solve_triangular(a, b.mT, upper=False, left=False, unitriangular=True), [A, B]),
    "triangular_solve": (lambda m, b, a: m.triangular_solve(b, a + 4 * m.eye(4, dtype=a.dtype)), [B, A]),
    "triangular_solve_t": (lambda m, b, a: m.triangular_solve(b, a + 4 * m.eye(4, dtype=a.dtype), False, True), [B, A]),
    "cholesky": (lambda m, a: m.linalg.cholesky(spd(m, a)), [A]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(spd(m, a), upper=True), [A]),
    "cholesky_ex": (lambda m, a: m.linalg.cholesky_ex(spd(m, a)), [A]),
    "cholesky_top": (lambda m, a: m.cholesky(spd(m, a)), [A]),
    "cholesky_solve": (lambda m, b, a: m.cholesky_solve(b, m.linalg.cholesky(spd(m, a))), [B, A]),
    "cholesky_solve_upper": (lambda m, b, a: m.cholesky_solve(b, m.linalg.cholesky(spd(m, a)).mT, True), [B, A]),
    "cholesky_inverse": (lambda m, a: m.cholesky_inverse(m.linalg.cholesky(spd(m, a))), [A]),
    "matrix_power_3": (lambda m, a: m.linalg.matrix_power(a, 3), [A]),
    "matrix_power_neg2": (lambda m, a: m.linalg.matrix_power(a, -2), [A]),
    "matrix_power_top": (lambda m, a: m.matrix_power(a, 5), [A]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [A]),
    "matrix_exp_large": (lambda m, a: m.matrix_exp(3 * a), [A]),
    "multi_dot": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [(4,), (4, 3), (3, 5)]),
    "multi_dot_mats": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), [(2, 4), (4, 3), (3,)]),
    "tensorinv": (lambda m, a: m.linalg.tensorinv(a.reshape(4, 2, 2, 4), ind=2), [rng.standard_normal((8, 8)) + 4 * np.eye(8)]),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a.reshape(2, 3, 6), b), [rng.standard_normal((6, 6)), (2, 3)]),
    "tensorsolve_dims": (lambda m, a, b: m.linalg.tensorsolve(a.reshape(6, 2, 3), b, dims=(0,)), [rng.standard_normal((6, 6)), (2, 3)]),
    # products and shapes
    "cross": (lambda m, a, b: m.linalg.cross(a, b), [V3, (1, 4, 3)]),
    "cross_dim": (lambda m, a, b: m.linalg.cross(a, b, dim=0), [(3, 2), (3, 2)]),
    "cross_top": (lambda m, a, b: m.cross(a, b), [(3, 4), (3, 4)]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b, dim=1), [V3, (4, 3)]),
    "vander": (lambda m, x: m.linalg.vander(x), [X_ZERO]),
    "vander_N": (lambda m, x: m.linalg.vander(x, N=3), [(2, 5)]),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1), [A]),
    # decompositions (gauge-invariant functions of the vectors: squares, projectors)
    "svd_reduced": (lambda m, a: (lambda u, s, vh: (u * u, s, vh * vh))(*m.linalg.svd(a, full_matrices=False)), [TALL]),
    "svd_wide": (lambda m, a: (lambda u, s, vh: (u * u, s, vh * vh))(*m.linalg.svd(a, full_matrices=False)), [WIDE]),
    "svd_full_square": (lambda m, a: (lambda u, s, vh: (u @ u.mT, s, (vh[..., :2, :] ** 2)))(*m.linalg.svd(a)), [A]),
    "svd_full_tall": (lambda m, a: (lambda u, s, vh: (u[..., :3] ** 2, s, vh ** 2))(*m.linalg.svd(a)), [TALL]),
    "svd_full_wide": (lambda m, a: (lambda u, s, vh: (u ** 2, s, vh[..., :3, :] ** 2))(*m.linalg.svd(a)), [WIDE]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [WIDE]),
    "svd_top": (lambda m, a: (lambda u, s, v: (u * u, s, v * v))(*m.svd(a)), [TALL]),
    "eigh": (lambda m, a: (lambda l, v: (l, v * v))(*m.linalg.eigh(sym(m, a))), [A]),
    "eigh_upper": (lambda m, a: (lambda l, v: (l, v[..., :2] @ v[..., :2].mT))(*m.linalg.eigh(sym(m, a), "U")), [A]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a), [A]),
    "qr": (lambda m, a: m.linalg.qr(a), [TALL]),
    "qr_wide": (lambda m, a: m.linalg.qr(a), [WIDE]),
    "qr_complete_square": (lambda m, a: m.linalg.qr(a, "complete"), [A]),
    "qr_top": (lambda m, a: m.qr(a), [TALL]),
    "pinv": (lambda m, a: m.linalg.pinv(a), [TALL]),
    "pinv_hermitian": (lambda m, a: m.linalg.pinv(spd(m, a), hermitian=True), [A]),
    "pinverse": (lambda m, a: m.pinverse(a), [WIDE]),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b)[0], [TALL, (2, 5, 2)]),
    "lstsq_gelsd": (lambda m, a, b: tuple(m.linalg.lstsq(a, b, driver="gelsd")), [TALL, (2, 5, 2)]),
    "lstsq_underdetermined": (lambda m, a, b: m.linalg.lstsq(a, b)[0], [WIDE, (2, 3, 2)]),
    "lu_factor": (lambda m, a: m.linalg.lu_factor(a), [A]),
    "lu_factor_ex_tall": (lambda m, a: m.linalg.lu_factor_ex(a), [TALL]),
    "lu": (lambda m, a: m.linalg.lu(a), [WIDE]),
    "lu_top": (lambda m, a: m.lu(a, get_infos=True), [A]),
    "lu_unpack": (lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)), [TALL]),
    "lu_solve": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b), [A, B]),
    "lu_solve_adjoint_right": (lambda m, a, b: m.linalg.lu_solve(*m.linalg.lu_factor(a), b.mT, left=False, adjoint=True), [A, B]),
    "lu_solve_top": (lambda m, a, b: m.lu_solve(b, *m.linalg.lu_factor(a)), [A, B]),
    "matrix_rank": (lambda m, a: m.linalg.matrix_rank(a @ a.mT), [WIDE]),
    "householder_product": (lambda m, a, t: m.linalg.householder_product(a, t), [TALL, (2, 2)]),
    "geqrf": (lambda m, a: m.geqrf(a), [TALL], {"grad": False}),
    "ormqr": (lambda m, a, t, c: m.ormqr(a, t, c), [TALL, (2, 3), (2, 5, 2)]),
    "ormqr_right_t": (lambda m, a, t, c: m.ormqr(a, t, c, left=False, transpose=True), [TALL, (2, 3), (2, 4, 5)]),
    # an exactly low-rank A: U S V^T and S do not depend on the random sketch
    "svd_lowrank": (lambda m, a, b: (lambda u, s, v: (u * s.unsqueeze(-2) @ v.mT, s))(*m.svd_lowrank(a @ b.mT, q=3)),
                    [(2, 5, 2), (2, 4, 2)], {"grad": False}),
    "pca_lowrank": (lambda m, a, b: (lambda u, s, v: (u * s.unsqueeze(-2) @ v.mT, s))(*m.pca_lowrank(a @ b.mT, q=2)),
                    [(5, 2), (6, 2)], {"grad": False}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_torch(name):
    fn, inputs, *kw = CASES[name]
    check_double(fn, inputs, **(kw[0] if kw else {}))


@pytest.mark.parametrize("p", [0.5, -1.5])
def test_norm_below_one_double_backward_by_finite_differences(p):
    x = tt.tensor(A[0] + np.sign(A[0]), requires_grad=True)  # entries away from 0
    assert tt.testing.gradgradcheck(lambda t: tt.linalg.vector_norm(t, p, dim=1), [x])


@pytest.mark.parametrize("p", [0.5, -1, -2])
def test_norm_below_one_at_zero_entries_first_order(p):
    # torch's double backward there is nan (its mask does not reach the power's own gradient)
    check_double(lambda m, x: m.linalg.vector_norm(x, p, dim=1), [X_ZERO], double_backward=False)


@pytest.mark.parametrize("name", ["solve", "cholesky", "svdvals", "matrix_exp", "lu_factor", "pinv",
                                  "vector_norm_neg", "matrix_norm_nuc"])
def test_float32(name):
    fn, inputs, *_ = CASES[name]
    check_double(fn, inputs, dtype="float32", double_backward=False)


# ---------------------------------------------------------------- errors as torch raises them
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])


def test_inv_and_solve_of_a_singular_matrix_raise():
    with pytest.raises(tt.linalg.LinAlgError, match=r"^linalg.inv: .*singular"):
        tt.linalg.inv(tt.tensor(SINGULAR))
    with pytest.raises(tt.linalg.LinAlgError, match=r"^linalg.solve: .*singular"):
        tt.linalg.solve(tt.tensor(SINGULAR), tt.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"^linalg.lu_factor: U\[2,2\] is zero"):
        tt.linalg.lu_factor(tt.tensor(SINGULAR))


def test_ex_forms_return_torchs_info_instead():
    for a in (SINGULAR, NOT_PD, np.stack([NOT_PD, np.eye(2), SINGULAR])):
        for name in ("inv_ex", "cholesky_ex", "lu_factor_ex"):
            got = getattr(tt.linalg, name)(tt.tensor(a))[-1]
            want = getattr(torch.linalg, name)(torch.tensor(a))[-1]
            assert got.dtype is tt.int32 and got.tolist() == want.tolist(), (name, a)
    b = np.array([1.0, 2.0])
    X, info = tt.linalg.solve_ex(tt.tensor(SINGULAR), tt.tensor(b))
    assert info.tolist() == torch.linalg.solve_ex(torch.tensor(SINGULAR), torch.tensor(b))[1].tolist()


def test_cholesky_of_a_non_positive_definite_matrix_names_the_minor():
    batch = tt.tensor(np.stack([np.eye(2), NOT_PD]))
    with pytest.raises(tt.linalg.LinAlgError, match=r"^linalg.cholesky: .*batch element 1.*leading minor of order 2"):
        tt.linalg.cholesky(batch)
    with pytest.raises(torch.linalg.LinAlgError, match="order 2"):
        torch.linalg.cholesky(torch.tensor(np.stack([np.eye(2), NOT_PD])))


def test_shapes_are_checked_by_name():
    with pytest.raises(tt.OpError, match=r"linalg.det: A must be a batch of square matrices, but got shape \(2, 3\)"):
        tt.linalg.det(tt.zeros(2, 3))
    with pytest.raises(tt.OpError, match=r"linalg.solve: .*\(2, 2\).*\(3,\)"):
        tt.linalg.solve(tt.eye(2), tt.zeros(3))
    with pytest.raises(tt.OpError, match=r"linalg.cross: .*length 3"):
        tt.linalg.cross(tt.zeros(2, 4), tt.zeros(2, 4))
    with pytest.raises(tt.OpError, match=r"linalg.matrix_norm: order 3"):
        tt.linalg.matrix_norm(tt.zeros(2, 2), 3)
    with pytest.raises(tt.OpError, match="linalg.vector_norm: ord must be a number"):
        tt.linalg.vector_norm(tt.zeros(2), "fro")


def test_logdet_is_nan_for_a_negative_determinant_and_minus_inf_for_zero():
    a = np.stack([np.diag([1.0, -2.0]), SINGULAR])
    assert np.array_equal(tt.logdet(tt.tensor(a)).numpy(), torch.logdet(torch.tensor(a)).numpy(), equal_nan=True)


def test_singular_and_eigen_vectors_match_torch_up_to_sign():
    for m in (TALL[0], WIDE[0]):
        U, S, Vh = tt.linalg.svd(tt.tensor(m), full_matrices=False)
        Ut, St, Vht = torch.linalg.svd(torch.tensor(m), full_matrices=False)
        signs = np.sign((U.numpy() * Ut.numpy()).sum(0))
        np.testing.assert_allclose(U.numpy() * signs, Ut.numpy(), atol=1e-12)
        np.testing.assert_allclose(Vh.numpy() * signs[:, None], Vht.numpy(), atol=1e-12)
    L, V = tt.linalg.eigh(tt.tensor(A[0]), UPLO="U")
    Lt, Vt = torch.linalg.eigh(torch.tensor(A[0]), UPLO="U")
    np.testing.assert_allclose(L.numpy(), Lt.numpy(), atol=1e-12)
    np.testing.assert_allclose(np.abs(V.numpy()), np.abs(Vt.numpy()), atol=1e-12)


# ---------------------------------------------------------------- data-dependent results replay
def _values(a):
    LU, piv, info = tt.linalg.lu_factor_ex(a)
    return (LU * 2, piv, info, tt.linalg.matrix_rank(a), tt.linalg.cholesky_ex(a)[1],
            tt.linalg.inv_ex(a)[1], tt.linalg.lu(a)[0])


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_pivots_info_and_rank_are_recomputed_by_a_compiled_function(backend):
    g = tt.compile(_values, backend=backend)
    first = np.array([[1.0, 2, 0], [3, 4, 0], [0, 0, 5]])     # pivots [2, 2, 3], full rank, not PD
    second = np.array([[4.0, 1, 0], [1, 3, 0], [0, 0, 0]])    # pivots [1, 2, 3], rank 2, singular
    for a in (first, second, first):
        got = g(tt.tensor(a))
        want = _values(tt.tensor(a))
        for x, y in zip(got, want):
            assert np.array_equal(x.numpy(), y.numpy())
        ta = torch.tensor(a)
        assert got[1].tolist() == torch.linalg.lu_factor_ex(ta)[1].tolist()
        assert got[3].item() == torch.linalg.matrix_rank(ta).item()
        assert got[4].item() == torch.linalg.cholesky_ex(ta)[1].item()
        assert np.array_equal(got[6].numpy(), torch.linalg.lu(ta)[0].numpy())


def test_norm_backward_of_p_zero_is_zero_not_nan():
    x = tt.tensor([[0.0, float("inf"), 2.0]], requires_grad=True)
    tt.linalg.vector_norm(x, 0).backward()
    assert x.grad.tolist() == [[0.0, 0.0, 0.0]]


# ---------------------------------------------------------------- LDL^T (Bunch-Kaufman)
def test_ldl_factor_and_solve_match_lapack_pivot_for_pivot():
    r = np.random.default_rng(5)
    for trial in range(24):
        n = 1 + trial % 7
        a = r.standard_normal((3, n, n))
        a = a + a.mT
        if trial % 2:
            a[..., np.arange(n), np.arange(n)] *= 0.01  # small diagonals: 2x2 pivot blocks
        b = r.standard_normal((3, n, 2))
        LD, piv, info = tt.linalg.ldl_factor_ex(tt.tensor(a))
        LDt, pivt, infot = torch.linalg.ldl_factor_ex(torch.tensor(a))
        assert piv.tolist() == pivt.tolist() and info.tolist() == infot.tolist()
        np.testing.assert_allclose(LD.numpy(), LDt.numpy(), atol=1e-12)
        X = tt.linalg.ldl_solve(LD, piv, tt.tensor(b))
        np.testing.assert_allclose(X.numpy(), torch.linalg.ldl_solve(LDt, pivt, torch.tensor(b)).numpy(),
                                   atol=1e-10)
    zero = np.zeros((2, 2))
    assert tt.linalg.ldl_factor_ex(tt.tensor(zero))[2].item() == torch.linalg.ldl_factor_ex(torch.tensor(zero))[2].item()


def test_ldl_pivots_are_recomputed_by_a_compiled_function():
    g = tt.compile(lambda a: tt.linalg.ldl_factor(a))
    for a in (np.array([[0.01, 2.0], [2.0, 0.01]]), np.array([[4.0, 1.0], [1.0, 3.0]])):
        got, want = g(tt.tensor(a)), torch.linalg.ldl_factor(torch.tensor(a))
        assert got[1].tolist() == want[1].tolist()
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), atol=1e-12)


def test_tensor_methods_are_the_top_level_functions():
    a = np.random.default_rng(1).standard_normal((3, 3)) + 3 * np.eye(3)
    x, t = tt.tensor(a), torch.tensor(a)
    for name, args in [("det", ()), ("logdet", ()), ("slogdet", ()), ("inverse", ()), ("matrix_power", (3,)),
                       ("matrix_exp", ()), ("pinverse", ()), ("geqrf", ()), ("qr", ()), ("lu", ())]:
        for got, want in zip(*(r if isinstance(r, tuple) else (r,) for r in (getattr(x, name)(*args), getattr(t, name)(*args)))):
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12, err_msg=name)
    np.testing.assert_allclose(x.norm("nuc").numpy(), t.norm("nuc").numpy(), atol=1e-12)
    np.testing.assert_allclose(x.cross(x.flip(0), dim=1).numpy(), t.cross(t.flip(0), dim=1).numpy(), atol=1e-12)


def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix():
    # torch 2.13 returns zeros there (its solve-based formula multiplies by det = 0); the
    # derivative of det is the cofactor matrix, finite differences agree
    for a in (np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]]), np.diag([2.0, 0, 0])):
        x = tt.tensor(a, requires_grad=True)
        assert tt.testing.gradcheck(lambda t: tt.linalg.det(t), [x])
        tt.linalg.det(x).backward()
        cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                         for j in range(len(a))] for i in range(len(a))])
        np.testing.assert_allclose(x.grad.numpy(), cof, atol=1e-12)


def _step(a, b):
    eye = tt.eye(3, dtype=a.dtype)
    loss = (tt.linalg.solve(a, b).sum() + tt.linalg.det(a).sum() + tt.linalg.svdvals(a).sum()
            + tt.linalg.matrix_exp(a).sum() + tt.linalg.cholesky(a @ a.mT + 3 * eye).sum()
            + tt.linalg.lu_factor(a)[0].sum())
    loss.backward()
    return loss


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_a_compiled_step_through_linalg_ops_equals_eager(backend):
    g = tt.compile(_step, backend=backend)
    r = np.random.default_rng(2)
    for _ in range(2):
        a, b = r.standard_normal((2, 3, 3)), r.standard_normal((2, 3, 2))
        eager = [tt.tensor(a, requires_grad=True), tt.tensor(b, requires_grad=True)]
        compiled = [tt.tensor(a, requires_grad=True), tt.tensor(b, requires_grad=True)]
        np.testing.assert_allclose(g(*compiled).item(), _step(*eager).item(), rtol=1e-12)
        for x, y in zip(compiled, eager):
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_singular_values_and_eigenvalues_alone_have_finite_gradients_at_ties():
    # only S (or L) is used: the vectors' terms, which divide by s_i^2 - s_j^2, are left out
    for name in ("svdvals", "eigvalsh"):
        x, t = tt.tensor(np.eye(3), requires_grad=True), torch.tensor(np.eye(3), requires_grad=True)
        (getattr(tt.linalg, name)(x) * tt.tensor([1.0, 2.0, 3.0])).sum().backward()
        (getattr(torch.linalg, name)(t) * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-12)


def test_linalg_norms_refuse_integer_input_as_torch():
    with pytest.raises(tt.OpError, match="linalg.vector_norm: expected a floating point tensor"):
        tt.linalg.vector_norm(tt.tensor([3, 4]))
    with pytest.raises(RuntimeError):
        torch.linalg.vector_norm(torch.tensor([3, 4]))
    assert tt.linalg.vector_norm(tt.tensor([3, 4]), dtype=tt.float64).item() == 5.0
