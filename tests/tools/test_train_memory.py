"""train.py refuses, before building anything, a configuration that cannot fit in memory."""
import argparse

import pytest

from tinytensor.tools import train
from tinytensor.tools.lib import memory


def test_a_context_of_100000_is_refused_naming_the_flag_and_a_size_that_fits(capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(["--context", "100000"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error: --context 100000 (with --batch-size 16, --d-model 128, --layers 4, --heads 4) " \
           "needs about" in err, err
    assert "(attention scores" in err and "use --context" in err, err


def _args(**kw):
    base = dict(context=64, batch_size=16, d_model=128, layers=4, heads=4)
    return argparse.Namespace(**dict(base, **kw))


def test_the_flag_named_is_the_one_whose_term_dominates_and_its_bound_fits():
    avail = 2e9
    for kw, flag in (({"context": 100_000}, "context"), ({"batch_size": 100_000}, "batch_size"),
                     ({"d_model": 65536, "heads": 1}, "d_model")):
        msg = memory.refusal(_args(**kw), "lm", 256, avail=avail)
        dashed = "--" + flag.replace("_", "-")
        assert msg.startswith(f"{dashed} {kw[flag]} "), msg
        bound = int(msg.rsplit(f"use {dashed} ", 1)[1].split()[0])
        sizes = dict(vocab=256, context=64, batch=16, d=128, layers=4, heads=kw.get("heads", 4))
        key = {"batch_size": "batch", "d_model": "d"}.get(flag, flag)
        fits = sum(memory.estimate("lm", **dict(sizes, **{key: bound})).values())
        over = sum(memory.estimate("lm", **dict(sizes, **{key: bound + 1})).values())
        assert fits <= avail < over, (flag, bound, fits, over)


def test_the_defaults_of_every_kind_fit_in_a_gigabyte():
    for model, kind, vocab in (("gpt2", "lm", 256), ("bert", "mlm", 257), ("t5", "seq2seq", 16)):
        args = train.parse_args(["--model", model])
        assert memory.refusal(args, kind, vocab, avail=1e9) is None, model


def test_the_estimate_follows_the_measured_peaks_it_was_fitted_on():
    # peak RSS of one GPT-2 step (batch 16, d 128, 4 layers, 4 heads): 274 MB and 883 MB
    for context, measured in ((256, 274e6), (1024, 883e6)):
        est = sum(memory.estimate("lm", 256, context, 16, 128, 4, 4).values())
        assert 0.8 < est / measured < 1.25, (context, est)
