"""Compiler benchmarks (`python tools/bench.py compile`): the generated C of a fused
program against eager tinytensor and torch eager, in one run.

Cases: a 5-op elementwise chain (x * 1.5 + 0.5) * x - 0.25, relu, float32, at 64K and 1M
elements; GELU (tanh) forward, and forward + backward, at 1M; a tiny MLP training step
(Python-overhead bound: through the tt.compile call, in runs of MLP_INNER calls); KV-cached greedy decoding of the
GPT-2-style model below with tt.compile(model, dynamic=True). Every case compiles with
plain tt.compile, the backend a user gets without naming one (printed with each row: the
generated C where a C compiler is found). "compiled" times the runner of the program
tt.compile built on the input arrays (the tt.compile call wrapper around it is not
included); eager and torch time the same step written with their ops.

The GPT-2-style training step of `tools/bench.py train` (fwd+bwd+AdamW, opt.zero_grad(),
backward and opt.step() inside the compiled function) is timed through the tt.compile
call itself, against eager tinytensor and torch eager (sdpa attention); then its compile
time: cold (the first call, into an empty disk cache: capture, which runs the step once
eagerly, passes and the C compiler), and the first call in a new process that finds the
shared objects in that disk cache.
"""
import os
import subprocess
import sys
import tempfile
import time

from tinytensor.tools.lib.bench_train import lm_step
from tinytensor.tools.lib.timing import median_n

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def chain(x):
    return ((x * 1.5 + 0.5) * x - 0.25).relu()


def compiled_runner(step, tensors):
    """() -> the runner plain tt.compile built for `step` on `tensors`, called on their
    arrays; its fused kernels; the backend tt.compile chose."""
    import tinytensor as tt
    fast = tt.compile(step)
    fast(*tensors)
    (entry,) = fast._entries()
    arrays = [entry._read(k, tuple(tensors), {}, list(tensors)) for k in range(len(entry._fetch))]
    runner = entry.runner
    return (lambda: runner(arrays)), kernels_of(entry.program), fast.backend


def cases():
    """(name, compiled step, eager step, torch step, kernels)."""
    import numpy as np
    import torch
    import torch.nn.functional as TF
    import tinytensor as tt
    import tinytensor.functional as F

    rng = np.random.default_rng(0)
    for n in (64 * 1024, 1024 * 1024):
        a = rng.standard_normal(n).astype(np.float32)
        x, xt = tt.tensor(a), torch.tensor(a)
        run, k, b = compiled_runner(chain, [x])
        yield (f"5-op elementwise chain, float32, {n // 1024}K", run,
               lambda x=x: chain(x), lambda xt=xt: torch.relu((xt * 1.5 + 0.5) * xt - 0.25), k,
               {"backend": b})

    n = 1024 * 1024
    a = rng.standard_normal(n).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    x, xt = tt.tensor(a), torch.tensor(a)
    gelu = lambda x: F.gelu(x, approximate="tanh")
    run, k, b = compiled_runner(gelu, [x])
    yield ("GELU (tanh) forward, float32, 1M", run, lambda: gelu(x),
           lambda: TF.gelu(xt, approximate="tanh"), k, {"backend": b})

    xg, gg = tt.tensor(a, requires_grad=True), tt.tensor(g)
    xtg, gt = torch.tensor(a, requires_grad=True), torch.tensor(g)

    def step(x, g):
        y = gelu(x)
        y.backward(g)
        return y

    run, k, b = compiled_runner(step, [xg, gg])

    def eager_step():
        xg.grad = None
        step(xg, gg)

    def torch_step():
        xtg.grad = None
        TF.gelu(xtg, approximate="tanh").backward(gt)

    yield ("GELU (tanh) forward+backward, float32, 1M", run, eager_step, torch_step, k,
           {"backend": b})
    yield mlp_case()


def mlp_case():
    """The tiny MLP training step (Linear 64->64, ReLU, Linear 64->10, cross-entropy, AdamW;
    batch 32), Python-overhead bound: timed through the tt.compile call itself."""
    import numpy as np
    import torch
    from tinytensor import nn
    import tinytensor as tt
    import tinytensor.functional as F

    def make():
        tt.manual_seed(0)
        m = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
        return m, nn.optim.AdamW(m.parameters(), lr=1e-3)

    def step(m, opt, x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(0)
    xa, ya = rng.standard_normal((32, 64)).astype(np.float32), rng.integers(0, 10, 32)
    x, y = tt.tensor(xa), tt.tensor(ya)
    (mc, oc), (me, oe) = make(), make()
    compiled = tt.compile(step)
    compiled(mc, oc, x, y)
    k = kernels_of(compiled.programs[0])
    tm = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    to = torch.optim.AdamW(tm.parameters(), lr=1e-3)
    xt, yt = torch.tensor(xa), torch.tensor(ya)

    def torch_step():
        loss = torch.nn.functional.cross_entropy(tm(xt), yt)
        to.zero_grad()
        loss.backward()
        to.step()
    return ("tiny MLP step 64-64-10, batch 32, AdamW (tt.compile call)",
            lambda: compiled(mc, oc, x, y), lambda: step(me, oe, x, y), torch_step, k,
            {"inner": MLP_INNER, "backend": compiled.backend})


# The tiny MLP's steps are timed in runs of this many back-to-back calls, as a training loop
# makes them, the three libraries still taking turns run by run: one call of ~0.1 ms between
# two of the others' measures mostly the caches those left cold (2.0-2.2x alternating call
# by call against 2.9-3.4x in runs, on the dev machine).
MLP_INNER = 20


gpt_step = lm_step  # the step tt.compile captures, eager runs and torch runs

# Each library's turn starts with this many untimed calls (timing.median_n): a library's
# threads keep spinning a while after its call and slow the next library's first one
# down. The compiled programs split big kernels and matmuls over the cores
# (compiler/codegen/threads.py), and OpenBLAS's workers spin ~0.1 s after eager's last
# matmul: measured on the dev machine, the GPT-2 step took 155-176 ms back to back and
# 221-260 ms right after an eager step. A training loop makes its steps back to back.
SETTLE = 1

# The compiled side's first calls, back to back before the timed rounds: they time each big
# kernel whole and split and keep the faster (codegen/runner.py `_tuned`), as a training
# loop's first steps do; timed between the other libraries' calls they would judge by
# those libraries' still-spinning threads.
QUIET = 0.3   # seconds for the last case's threads to stop spinning before the tuning calls


def _tuned_calls():
    from tinytensor.compiler.codegen.threads import TUNE_CALLS   # NumPy after set_threads
    return 2 * TUNE_CALLS + 1


def gpt_first_call(cache):
    """Seconds of the first tt.compile call of gpt_step with `cache` as the disk cache, and
    the fused kernels of its program."""
    from tinytensor.tools.lib import bench_train
    import tinytensor as tt
    os.environ["TINYTENSOR_CACHE_DIR"] = cache
    model, _, ids, _, nn, _, _ = bench_train.build_pair()
    opt = nn.optim.AdamW(model.parameters(), lr=1e-4)
    step = tt.compile(gpt_step)
    t = time.perf_counter()
    step(model, opt, ids)
    seconds = time.perf_counter() - t
    kernels = kernels_of(step.programs[0])
    return seconds, kernels, (step, model, opt, ids), step.backend


def gpt_case():
    """(name, compiled step, eager step, torch step, kernels, compile times)."""
    from tinytensor.tools.lib import bench_train
    cache = tempfile.mkdtemp(prefix="tt-bench-cache-")
    saved = os.environ.get("TINYTENSOR_CACHE_DIR")
    try:
        cold, kernels, (step, model, opt, ids), backend = gpt_first_call(cache)
        # `tools` is an installed package (pip install -e .), so the child imports it as is
        code = ("from tinytensor.tools.lib.bench_compile import gpt_first_call; "
                "print(gpt_first_call(%r)[0])" % cache)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=600, cwd=_ROOT, env=dict(os.environ))
        if out.returncode:
            raise RuntimeError(f"bench compile: the new-process compile failed:\n{out.stderr}")
        warm = float(out.stdout.split()[-1])
    finally:
        if saved is None:
            os.environ.pop("TINYTENSOR_CACHE_DIR", None)
        else:
            os.environ["TINYTENSOR_CACHE_DIR"] = saved
    eager_model, ref, ids_tt, ids_th, nn, torch, _ = bench_train.build_pair()
    opt_e = nn.optim.AdamW(eager_model.parameters(), lr=1e-4)
    opt_t = torch.optim.AdamW(ref.parameters(), lr=1e-4)

    return ("GPT-2-style 4x256, B=8 T=128: fwd+bwd+AdamW", lambda: step(model, opt, ids),
            lambda: gpt_step(eager_model, opt_e, ids_tt), lambda: gpt_step(ref, opt_t, ids_th),
            kernels, {"compile_times": (cold, warm), "backend": backend})


def decode_case(new_tokens=32, prompt=16):
    """Greedy KV-cached decoding of `new_tokens` tokens after a `prompt`-token prompt, batch 1,
    with the bench's GPT-2-style model: models.generate on tt.compile(model, dynamic=True)
    (one program for the prompt and one for every cache length: no capture per token)
    against eager tinytensor and transformers' generate (torch eager, sdpa, its KV cache)."""
    from tinytensor.tools.lib import bench_train
    import numpy as np
    from tinytensor import models
    ours, ref, ids_tt, ids_th, _, torch, tt = bench_train.build_pair()
    ours.eval(), ref.eval()
    fast = tt.compile(ours, dynamic=True)
    p_tt, p_th = ids_tt[:1, :prompt], ids_th[:1, :prompt]
    want = models.generate(ours, p_tt, max_new_tokens=new_tokens).numpy()
    got = models.generate(fast, p_tt, max_new_tokens=new_tokens).numpy()   # captures, compiles
    with torch.no_grad():
        theirs = ref.generate(p_th, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                              do_sample=False, pad_token_id=ref.config.eos_token_id).numpy()
    if not (np.array_equal(got, want) and np.array_equal(want, theirs)):
        raise RuntimeError("bench compile: compiled, eager and transformers' greedy tokens differ")

    def torch_decode():
        with torch.no_grad():
            ref.generate(p_th, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                         do_sample=False, pad_token_id=ref.config.eos_token_id)
    return (f"GPT-2-style KV-cached greedy decoding, {new_tokens} tokens (dynamic=True, "
            f"{len(fast.programs)} programs)",
            lambda: models.generate(fast, p_tt, max_new_tokens=new_tokens),
            lambda: models.generate(ours, p_tt, max_new_tokens=new_tokens), torch_decode,
            sum(kernels_of(p) for p in fast.programs), {"backend": fast.backend})


def kernels_of(program):
    """The C kernels the C backend builds for a program (fused groups, then column sums)."""
    from tinytensor.compiler import pipeline
    return sum(ins.op == "fused" for ins in pipeline.lower(program, "c").instrs)


def run_compile(repeat, gpt=True):
    rows = []
    extra = [decode_case()] + ([gpt_case()] if gpt else [])
    for name, f_c, f_e, f_t, kernels, *options in list(cases()) + extra:
        options = options[0] if options else {}
        time.sleep(QUIET)
        for _ in range(_tuned_calls()):
            f_c()
        c, e, t = median_n([f_c, f_e, f_t], repeat, inner=options.get("inner", 1), settle=SETTLE)
        rows.append((name, c, e, t, kernels))
        print(f"{name:44s} compiled {c * 1e3:7.3f} ms ({kernels} kernel{'s' * (kernels != 1)}, "
              f"backend {options.get('backend')})   eager {e * 1e3:7.3f} ms   torch {t * 1e3:7.3f} ms   "
              f"eager/compiled {e / c:5.2f}x   torch/compiled {t / c:5.2f}x", flush=True)
        if "compile_times" in options:
            cold, warm = options["compile_times"]
            print(f"{'':44s} compile time: cold {cold:.2f} s, new process with the disk cache "
                  f"{warm:.2f} s (each includes the one eager step the capture runs; eager step "
                  f"{e:.2f} s)", flush=True)
    return rows
