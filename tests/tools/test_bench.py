"""The benchmarks build what they compare correctly (they are never timed in tests)."""
import logging

import numpy as np
import pytest


@pytest.mark.slow  # alone, importing torch and transformers takes seconds; the model tests share it
def test_training_benchmark_configures_transformers_without_warnings():
    import transformers.utils.logging as hf_logging

    from tinytensor.tools.lib.bench_train import CONFIG, build_pair
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    hf_logging.warning_once.cache_clear()  # warnings other tests already triggered count too
    try:
        ours, ref, ids_tt, ids_th, *_ = build_pair()
        loss = ref(ids_th[:1, :16], labels=ids_th[:1, :16]).loss  # the loss is chosen lazily
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == []
    assert int(ids_th.max()) < CONFIG["vocab_size"]
    ours_loss = ours(ids_tt[:1, :16], labels=ids_tt[:1, :16]).loss.item()
    np.testing.assert_allclose(ours_loss, loss.item(), rtol=1e-4)  # identical weights


def test_ops_benchmark_cases_run_and_agree_with_torch():
    # tiny sizes: each case's forward is checked against torch inside ops_cases, and one
    # step of each library runs its backward (no timing: benchmarks never gate tests)
    from tinytensor.tools.lib.bench_ops import ops_cases
    names = []
    for name, tt_step, th_step in ops_cases(small=True):
        tt_step()
        th_step()
        names.append(name)
    assert len(names) == len(set(names)) == 40


@pytest.mark.slow  # ~4 s: importing torch's optimizers and building three models
def test_nanogpt_benchmark_runs_eager_compiled_and_torch_to_the_same_losses(monkeypatch, tmp_path):
    # a tiny nanoGPT (no timing): three iterations of each variant agree with torch, and a
    # variant that trains differently (a wrong learning rate) is caught by the same check.
    # The compiled copy on the interpreter: gcc over the step's kernels takes ~30 s on 2
    # loaded cores (the C kernels' own tests are the compiler's: test_gelu_erf.py...)
    monkeypatch.setenv("TINYTENSOR_CACHE_DIR", str(tmp_path))
    from tinytensor.tools.lib import bench_nanogpt, nanogpt_pair
    tiny = dict(vocab=32, block=8, n_layer=1, n_head=2, n_embd=16)
    steps = bench_nanogpt.variants(tiny, micro=2, accum=2, backend="numpy")
    assert [name for name, _ in steps] == ["tinytensor eager", "tinytensor @tt.compile", "torch eager"]
    losses = bench_nanogpt.check_losses(steps)
    assert len(losses) == 3 and all(len(ls) == bench_nanogpt.AGREE_ITERATIONS for ls in losses)
    assert losses[0][0] != losses[0][-1]   # it trains (the check compares more than a constant)
    ours, theirs, data = nanogpt_pair.build_pair(tiny, 2, 2)
    ours[1].param_groups[0]["lr"] *= 10
    bad = [("tinytensor eager", nanogpt_pair.stepper(ours, data)), ("torch eager", nanogpt_pair.stepper(theirs, data))]
    with pytest.raises(AssertionError, match="tinytensor eager's loss at iteration 1"):
        bench_nanogpt.check_losses(bad)


def test_nanogpt_round_robin_times_each_variant_after_its_own_untimed_iteration():
    """At each turn a variant runs `settle` untimed iterations before its timed one, so
    that none is timed right after another library's (whose threads may still spin)."""
    from tinytensor.tools.lib import bench_nanogpt
    calls = []
    steps = [(name, lambda name=name: calls.append(name)) for name in ("a", "b")]
    rows = bench_nanogpt.time_steps(steps, 2, settle=1, gap=0.0)
    assert calls == ["a", "a", "b", "b"] * 2
    assert [r[0] for r in rows] == ["a", "b"] and all(r[2] <= r[1] <= r[3] for r in rows)


def test_cpu_line_names_family_vector_unit_and_blas_kernels(monkeypatch, tmp_path):
    # a VM's "model name" may say only "AMD EPYC" for CPUs generations apart: the benchmark
    # line adds what tells them apart, read from /proc/cpuinfo
    import builtins

    from tinytensor.blas_threads import blas
    from tinytensor.tools.lib import bench_ops
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: AMD EPYC\ncpu family\t: 26\nmodel\t\t: 2\n"
                    "flags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nmodel name\t: other\n")
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: real_open(
        fake if path == "/proc/cpuinfo" else path, *a, **k))
    line = bench_ops.cpu_model()
    assert line.startswith("AMD EPYC (family 26 model 2, AVX-512")
    core = blas().corename() if blas() is not None else None
    assert core is None or (isinstance(core, str) and f"OpenBLAS {core})" in line)


def test_ops_table_reports_median_ratio_and_its_range_over_rounds(capsys):
    # three rounds of two cases: the row's times and ratio are medians over the rounds (not
    # the ratio of median times), its range the rounds' min-max; worst median ratio first
    import tinytensor.tools.bench as bench
    rounds = [[("a", 2.0e-3, 1.0e-3), ("b", 1.0e-3, 4.0e-3)],
              [("a", 3.0e-3, 1.0e-3), ("b", 2.0e-3, 4.0e-3)],
              [("a", 1.0e-3, 2.0e-3), ("b", 1.0e-3, 1.0e-3)]]
    bench._ranges_table(rounds)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("| a |", "| b |"))]
    assert lines == ["| a | 2.00 | 1.00 | 2.00 | 0.50–3.00 |", "| b | 1.00 | 4.00 | 0.50 | 0.25–1.00 |"]
