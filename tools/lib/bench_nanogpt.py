"""nanoGPT's training iteration (`python tools/bench.py train --model nanogpt`): the model and
iteration of tools/lib/nanogpt_pair.py (exact GELU, causal sdpa, tied lm_head, 2 micro-batches
of 8 x 64 tokens, clip_grad_norm_, AdamW with decay groups) in three copies with the same
weights and batches: tinytensor eager, tinytensor under plain @tt.compile, torch eager. The
losses are checked against torch's first (they must agree to float32 rounding), then every
variant runs `repeat` timed iterations round-robin, each after one untimed iteration of its
own (`time_steps`); each reports its median and range (min-max) and the ratio of medians
to torch's."""
import time

from . import nanogpt_pair

AGREE_ITERATIONS = 3
AGREE_RTOL = 1e-4   # float32 losses after a few AdamW steps, summed in other orders
# Each turn of the round-robin: a pause, then untimed iterations. torch's OpenMP workers spin
# ~10 ms after its last op and OpenBLAS's (eager's matmuls) longer; a compiled program
# timed right after the eager iteration shared a core with them (measured at 2 threads: the
# compiled iteration 74 ms back to back, 127 ms right after eager's).
GAP = 0.03
SETTLE = 1


def variants(config=None, micro=nanogpt_pair.MICRO, accum=nanogpt_pair.ACCUM, backend=None):
    """[(name, step)]: each step runs the next iteration and returns its loss (backend: the
    compiled copy's, default tt.compile's own choice)."""
    ours, theirs, data = nanogpt_pair.build_pair(config, micro, accum)
    ours_too, _, _ = nanogpt_pair.build_pair(config, micro, accum)   # the compiled copy's own weights
    return [("tinytensor eager", nanogpt_pair.stepper(ours, data)),
            ("tinytensor @tt.compile", nanogpt_pair.stepper(ours_too, data, compiled=True, backend=backend)),
            ("torch eager", nanogpt_pair.stepper(theirs, data))]


def check_losses(steps, iterations=AGREE_ITERATIONS, rtol=AGREE_RTOL):
    """Run `iterations` iterations of every variant; raise unless each loss agrees with the
    last variant's (torch's) within rtol. Returns [[loss per iteration] per variant]."""
    losses = [[step() for _ in range(iterations)] for _, step in steps]
    ref = losses[-1]
    for (name, _), got in zip(steps, losses):
        for k, (a, b) in enumerate(zip(got, ref)):
            if not abs(a - b) <= rtol * abs(b):
                raise AssertionError(f"nanoGPT benchmark: {name}'s loss at iteration {k} is {a!r}, "
                                     f"torch's {b!r} (relative difference {abs(a - b) / abs(b):.2g} > {rtol})")
    return losses


def time_steps(steps, repeat, settle=SETTLE, gap=GAP):
    """[(name, median, min, max) seconds per iteration], timed round-robin: at each turn a
    variant sleeps `gap`, runs `settle` untimed iterations, then the timed one, so that it
    is timed as its own training loop runs, after its own iteration, never while the
    threads of the variant before it still spin (timing.median_n says why)."""
    times = [[] for _ in steps]
    for _ in range(repeat):
        for (_, step), out in zip(steps, times):
            time.sleep(gap)
            for _ in range(settle):
                step()
            t = time.perf_counter()
            step()
            out.append(time.perf_counter() - t)
    return [(name, sorted(ts)[len(ts) // 2], min(ts), max(ts)) for (name, _), ts in zip(steps, times)]


def run(repeat, markdown=False):
    steps = variants()
    t = time.perf_counter()
    losses = check_losses(steps)
    first = time.perf_counter() - t
    print(f"losses over {AGREE_ITERATIONS} iterations agree with torch's "
          f"(last: {', '.join(f'{n} {ls[-1]:.7f}' for (n, _), ls in zip(steps, losses))}); "
          f"first iterations and the compile took {first:.1f} s", flush=True)
    rows = time_steps(steps, repeat)
    torch_median = rows[-1][1]
    c = nanogpt_pair.CONFIG
    title = (f"nanoGPT {c['n_layer']}x{c['n_embd']}, {c['n_head']} heads, vocab {c['vocab']}, "
             f"{nanogpt_pair.ACCUM} micro-batches of {nanogpt_pair.MICRO}x{c['block']}: one iteration")
    print(title)
    if markdown:
        print("\n| variant | median (ms) | range (ms) | / torch |\n|---|---:|---:|---:|")
    for name, med, lo, hi in rows:
        if markdown:
            print(f"| {name} | {med * 1e3:.1f} | {lo * 1e3:.1f}-{hi * 1e3:.1f} | {med / torch_median:.2f} |")
        else:
            print(f"{name:24s} median {med * 1e3:8.1f} ms   range {lo * 1e3:8.1f}-{hi * 1e3:8.1f} ms   "
                  f"/ torch {med / torch_median:5.2f}", flush=True)
    return rows
