"""The benchmarks build what they compare correctly (they are never timed in tests)."""
import logging

import numpy as np
import pytest


@pytest.mark.slow  # alone, importing torch and transformers takes seconds; the model tests share it
def test_training_benchmark_configures_transformers_without_warnings():
    import transformers.utils.logging as hf_logging

    from tools.lib.bench_train import CONFIG, build_pair
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
    from tools.lib.bench_ops import ops_cases
    names = []
    for name, tt_step, th_step in ops_cases(small=True):
        tt_step()
        th_step()
        names.append(name)
    assert len(names) == len(set(names)) == 20
