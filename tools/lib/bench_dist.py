"""Data-parallel benchmark (`python tools/bench.py dist`): the GPT-2-style bench model of
`bench.py train` (4 layers, d=256, context 128, vocabulary 1024), global batch 8, trained
with AdamW on 1 process x 1 thread against 2 processes x 1 thread under `mpiexec -n 2`
(DistributedDataParallel, each rank on 4 sequences). Reports tokens/s, the speed-up, and
the communication: a blocking all-reduce of all gradients measured alone, the part of it
still waited for after backward (exposed), and so the share hidden behind backward."""
import json
import os
import subprocess
import sys
import time

from tinytensor.tools.lib.bench_train import BATCH, CONFIG, CONTEXT

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return env


def run(steps, bucket_mb=1.0, markdown=False):
    worker = [sys.executable, "-c", "from tinytensor.tools.lib.bench_dist import worker; "
              f"worker({int(steps)}, {float(bucket_mb)!r})"]
    rows = []
    for n, cmd in ((1, worker), (2, ["mpiexec", "-n", "2", "--bind-to", "none"] + worker)):
        proc = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=1800)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("BENCH ")]
        if proc.returncode or not lines:
            raise SystemExit(f"bench.py dist: the {n}-process run failed:\n{proc.stdout}\n{proc.stderr}")
        rows.append(json.loads(lines[0][6:]))
    one, two = rows
    speedup = two["tok_s"] / one["tok_s"]
    if markdown:
        print("| processes x threads | tokens/s | step (ms) |\n|---|---:|---:|")
        for r in rows:
            print(f"| {r['world']} x 1 | {r['tok_s']:.0f} | {r['step_s'] * 1e3:.0f} |")
    else:
        for r in rows:
            print(f"{r['world']} process(es) x 1 thread: {r['tok_s']:8.0f} tokens/s   "
                  f"step {r['step_s'] * 1e3:7.1f} ms (median of {steps})")
    c = two["comm"]
    hidden = 1 - c["exposed_wait_s"] / c["blocking_allreduce_s"] if c["blocking_allreduce_s"] else 0.0
    print(f"speed-up 2 vs 1 process: {speedup:.2f}x\n"
          f"communication per step (2 ranks, {c['buckets']} buckets of <= {bucket_mb} MB, "
          f"{c['mbytes']:.1f} MB of gradients): all-reduce alone {c['blocking_allreduce_s'] * 1e3:.1f} ms; "
          f"in backward: {c['calls_s'] * 1e3:.1f} ms in MPI calls, {c['exposed_wait_s'] * 1e3:.1f} ms "
          f"waited after backward; {max(hidden, 0.0) * 100:.0f}% of the all-reduce time hidden")
    return rows


def worker(steps, bucket_mb):
    import numpy as np
    from tinytensor import models
    from tinytensor import nn
    import tinytensor as tt

    world, rank, dist = 1, 0, None
    if "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ:
        import tinytensor.distributed as dist
        dist.init_process_group("mpi")
        world, rank = dist.get_world_size(), dist.get_rank()
    tt.manual_seed(0)
    model = models.GPT(models.GPTConfig(**CONFIG))
    trained = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_mb) if dist else model
    opt = nn.optim.AdamW(model.parameters(), lr=1e-4)
    ids = tt.tensor(np.random.default_rng(0).integers(0, CONFIG["vocab_size"], (BATCH, CONTEXT)))
    mine = dist.shard_rows(ids) if dist else ids
    times = []
    for i in range(steps + 2):  # two warm-up steps
        if dist:
            dist.barrier()
            if i == 2:
                trained.stats.update(comm_calls_s=0.0, exposed_wait_s=0.0)
        t0 = time.perf_counter()
        loss = trained(mine, labels=mine).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    step = float(np.median(times[2:]))
    out = {"world": world, "step_s": step, "tok_s": BATCH * CONTEXT / step}
    if dist:
        flat = np.concatenate([p.grad.data.ravel() for p in model.parameters()])
        t = []
        for _ in range(5):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(tt.tensor(flat))
            t.append(time.perf_counter() - t0)
        out["comm"] = {"buckets": len(trained._buckets), "mbytes": flat.nbytes / 2 ** 20,
                       "blocking_allreduce_s": float(np.median(t)),
                       "calls_s": trained.stats["comm_calls_s"] / steps,
                       "exposed_wait_s": trained.stats["exposed_wait_s"] / steps}
    if rank == 0:
        print("BENCH " + json.dumps(out), flush=True)
    if dist:
        dist.destroy_process_group()

