"""Rematerialization: cheap forward values read again in the backward are recomputed
there, the program's results stay bit for bit the same, and the planned peak drops."""
import numpy as np

from tinytensor import nn
import tinytensor as tt
import tinytensor.functional as F
from tinytensor.compiler import pipeline
from tinytensor.compiler.passes import cse, dce, fold, fuse, plan, remat, simplify

from .helpers import assert_bitwise, captured, gpt, interpreted, lm_step


class _Block(nn.Module):
    """LayerNorm -> Linear -> GELU -> Linear, a GPT MLP on its own."""

    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.ln, self.fc, self.proj = nn.LayerNorm(d), nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(self.ln(x)), approximate="tanh"))


def _block_step(m, x):
    loss = (m(x) ** 2).mean()
    loss.backward()
    return loss


def _block_program():
    tt.manual_seed(0)
    m = nn.Sequential(_Block(), _Block())   # the first block's values live through the second
    x = tt.randn(4, 64, 64)
    program, outs, arrays = captured(_block_step, (m, x))
    return pipeline.run(program, (dce, cse, fold, simplify, dce))[0], outs, arrays


def test_gelu_and_the_norms_affine_part_are_recomputed_in_the_backward():
    program, outs, arrays = _block_program()
    chosen = remat.candidates(program)
    ops = sorted((program.instrs[k].scope, program.instrs[k].op) for k in chosen)
    # each norm's xhat * w + b, and the gelu the projection reads
    assert ops == [("0", "gelu"), ("0.ln", "add"), ("1", "gelu"), ("1.ln", "add")]
    after = remat.run(program)
    assert len(after.instrs) == len(program.instrs) + sum(len(r) for r, _ in chosen.values())
    assert_bitwise(interpreted(after, arrays), outs)
    assert_bitwise(interpreted(program, arrays), outs)
    saved = plan.plan(program).peak - plan.plan(after).peak
    # at least the first block's gelu output (4*64*256 float32 = 256 KiB) stops living
    # through the second block
    assert saved >= 4 * 64 * 256 * 4, saved


def test_values_whose_inputs_die_early_or_that_are_small_are_kept():
    program, _, _ = _block_program()
    assert remat.candidates(program, min_bytes=10 ** 9) == {}
    # depth 1: nothing may be redone that needs a producer redone too (the norm's affine
    # part needs xhat * w, which dies in the forward); gelu's input is kept anyway
    assert sorted(program.instrs[k].op for k in remat.candidates(program, depth=1)) == ["gelu", "gelu"]


def test_a_tiny_gpt_step_is_bitwise_unchanged():
    m = gpt()
    ids = tt.tensor(np.random.default_rng(0).integers(0, 32, (2, 8)))
    program, outs, arrays = captured(lm_step, (m, ids))
    program = pipeline.run(program, (dce, cse, fold, simplify, dce))[0]
    after = remat.run(program, min_bytes=0)
    assert len(after.instrs) > len(program.instrs)
    assert {ins.op for ins in after.instrs[len(program.instrs) // 2:] if ins.role == "backward"} >= {"gelu"}
    assert_bitwise(interpreted(after, arrays), outs)
    assert plan.plan(after).peak <= plan.plan(program).peak


def test_fusion_does_not_pull_a_recomputed_value_back_into_the_forward():
    # the recomputed gelu reads the forward's input of gelu, so vertical or sibling fusion
    # could join it to the forward's kernel; a kernel never spans more than fuse.SPANNED
    # matmuls, so the first block's (whose forward and backward lie across the second
    # block's matmuls) stays in the backward, and so does the memory remat saved
    program, outs, arrays = _block_program()
    after = remat.run(program)
    fused = fuse.run(after)
    for ins in fused.instrs:
        if ins.op == "fused" and ins.role == "forward":
            body = ins.attrs["body"].instrs
            assert not any(m.role == "backward" and m.scope.startswith("0") for m in body), ins.attrs["name"]
    first = [ins for ins in fused.instrs if ins.op == "fused" and ins.role == "backward"
             and any(m.scope == "0" and m.op in ("gelu", "tanh") for m in ins.attrs["body"].instrs)]
    assert first        # the first block's gelu, recomputed inside a backward kernel
    assert_bitwise(interpreted(fused, arrays), outs)
    unbounded = _fused_with_span(after, 10 ** 9)
    assert plan.plan(fused).peak < plan.plan(unbounded).peak


def _fused_with_span(program, spanned):
    saved = fuse.SPANNED
    fuse.SPANNED = spanned
    try:
        return fuse.run(program)
    finally:
        fuse.SPANNED = saved


class _ExactBlock(_Block):
    def forward(self, x):
        return self.proj(F.gelu(self.fc(self.ln(x))))


class _SigmoidBlock(_Block):
    def forward(self, x):
        return self.proj(self.fc(self.ln(x)).sigmoid())


def _program_of(block, passes=(dce, cse, fold, simplify, dce)):
    tt.manual_seed(0)
    m = nn.Sequential(block(), block())
    program, outs, arrays = captured(_block_step, (m, tt.randn(4, 64, 64)))
    return pipeline.run(program, passes)[0], outs, arrays


def test_remat_adds_no_transcendental_work_to_the_compiled_program():
    for block in (_Block, _ExactBlock):
        program, outs, arrays = _program_of(block)
        after = remat.run(program)
        assert sorted(program.instrs[k].op for k in remat.candidates(program)) == ["add", "add", "gelu", "gelu"]
        # unfused, the clone is one more gelu per element (the interpreter runs it) ...
        assert remat.transcendentals(after) == remat.transcendentals(program) + 2 * 4 * 64 * 256
        # ... in kernels it shares its erfc (tanh) with the slope beside it: none more
        assert remat.transcendentals(fuse.run(after)) == remat.transcendentals(fuse.run(program))
        assert plan.plan(fuse.run(after)).peak < plan.plan(fuse.run(program)).peak
        assert_bitwise(interpreted(fuse.run(after), arrays), interpreted(fuse.run(program), arrays))


def test_a_transcendental_value_the_backward_does_not_evaluate_again_is_kept():
    # sigmoid's backward reads its output (y (1 - y)): recomputing y would add an exp per element
    program, _, _ = _program_of(_SigmoidBlock)
    assert "sigmoid" in {ins.op for ins in program.instrs}
    assert sorted(program.instrs[k].op for k in remat.candidates(program)) == ["add", "add"]
    # the cost model: erf, exp, tanh... evaluate a transcendental function; arithmetic does not
    by_op = {ins.op: bool(remat.evaluations(ins)) for ins in program.instrs}
    assert by_op["sigmoid"] and not by_op["add"] and not by_op["mul"] and not by_op["matmul"]


def test_an_exact_gelu_step_counts_each_erf_once_per_element_and_pass():
    program, _, _ = _program_of(_ExactBlock)
    n = 4 * 64 * 256
    # per block: the forward's erfc, the slope's erfc and exp (the norms' rsqrt is arithmetic)
    assert remat.transcendentals(program) == 2 * 3 * n
    # and fused, the slope's kernel shares nothing with the forward's (they are far apart)
    assert remat.transcendentals(fuse.run(program)) == 2 * 3 * n


def test_a_value_remat_moved_every_reader_of_is_dropped_not_left_to_fuse():
    """Only the gradients are returned, so the forward GELUs' one reader was the backward;
    remat recomputes them there, and the originals must go (a kernel with no outputs crashed
    the C backend's column pass). One tensor passed for both arguments, NaN included."""
    def step(x, y):
        a = F.gelu(x) * F.gelu(y, approximate="tanh")
        return a.sum() + F.layer_norm(x, (x.shape[-1],)).sum() + F.softmax(y, -1).sum()

    grads = tt.func.grad(step, argnums=(0, 1))
    compiled = tt.compile(grads, backend="c")
    rng = np.random.default_rng(0)
    for scale in (1.0, 6.0):
        a = (rng.standard_normal((64, 300)) * scale).astype(np.float32)
        a[3, 4] = np.nan
        x = tt.tensor(a)
        for got, want in zip(compiled(x, x), grads(x, x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=2e-6)
