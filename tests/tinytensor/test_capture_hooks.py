"""The capture-hooks protocol (core/hooks.py): what core, ops and nn may ask of a capture in
progress, answered eagerly by default and by the compiler while it captures."""
import os
import re

import tinytensor as tt
from tinytensor.core import hooks
from tinytensor.core.grad_mode import STATE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_nothing_outside_the_compiler_reads_the_capture_tape():
    # the tape is the compiler's; everyone else asks STATE.hooks (and no `_recompute` probes)
    pattern = re.compile(r"STATE\.capture\b|\.capture\.\w|_recompute\b|state\.capture\b")
    found = []
    for top in ("tinytensor", "nn", "models", "tools"):
        for d, subdirs, files in os.walk(os.path.join(ROOT, top)):
            rel = os.path.relpath(d, ROOT).replace(os.sep, "/")
            if rel.startswith("tinytensor/compiler") or "__pycache__" in rel:
                continue
            for f in files:
                if f.endswith(".py") and f"{rel}/{f}" not in ("tinytensor/core/grad_mode.py", "tinytensor/core/hooks.py",
                                                            "tinytensor/symbolic.py"):
                    for k, line in enumerate(open(os.path.join(d, f), encoding="utf-8"), 1):
                        if pattern.search(line.split("#")[0]):
                            found.append(f"{rel}/{f}:{k}: {line.strip()}")
    assert not found, "\n".join(found)


def test_eager_answers_by_default():
    h = STATE.hooks
    assert h is hooks.NO_CAPTURE and not h.capturing and not h.symbolic
    t = tt.ones(3)
    assert not h.traced(t) and not h.is_size(3) and h.shape_of(t) == (3,)
    h.read_value(t, "item()")          # allowed: nothing is being captured
    h.refuse_inplace("add_", (t,))
    written = []
    h.assign(t, written.append)
    assert written == [t.data]
    with h.recording_as("optimizer"):
        pass


def test_the_compiler_answers_while_it_captures():
    seen = []

    def step(x):
        seen.append((STATE.hooks.capturing, STATE.hooks.fn_name, STATE.hooks.traced(x)))
        return x * 2

    f = tt.compile(step)
    assert f(tt.ones(4)).tolist() == [2.0] * 4
    assert seen == [(True, "step", True)]
    assert STATE.hooks is hooks.NO_CAPTURE   # put back after the capture
