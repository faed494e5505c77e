"""Run by test_collectives.py under `mpiexec -n 2`: every collective against NumPy."""
import json

import numpy as np

import tinytensor as tt
import tinytensor.distributed as dist

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
out = {"world": world}


def data(r, shape=(3, 4), dtype=np.float64):
    return (np.random.default_rng(r).standard_normal(shape) * 10).astype(dtype)


every = [data(r) for r in range(world)]

for op, ref in (("sum", np.sum(every, 0)), ("mean", np.mean(every, 0)), ("max", np.max(every, 0))):
    t = tt.tensor(data(rank))
    r = dist.all_reduce(t, op=op)
    out[f"all_reduce_{op}"] = float(np.abs(t.numpy() - ref).max()) if r is t else "not in place"

ints = tt.tensor(np.arange(6, dtype=np.int64) * (rank + 1))
dist.all_reduce(ints)
out["all_reduce_int64"] = ints.tolist()

# a non-contiguous view: the result lands in the caller's memory
base = tt.tensor(data(rank, (4, 3)))
view = base.transpose(0, 1)
dist.all_reduce(view, op="sum")
out["all_reduce_view"] = float(np.abs(base.numpy() - np.sum([data(r, (4, 3)) for r in range(world)], 0)).max())

b = tt.tensor(data(rank, (5,), np.float32))
dist.broadcast(b, src=1)
out["broadcast_src1"] = float(np.abs(b.numpy() - data(1, (5,), np.float32)).max())

parts = [tt.zeros(3, 4, dtype=tt.float64) for _ in range(world)]
dist.all_gather(parts, tt.tensor(data(rank)))
out["all_gather"] = float(max(np.abs(p.numpy() - every[r]).max() for r, p in enumerate(parts)))

# rank r's input_list[k] = data(10 * r + k); rank k's output = sum over r
ins = [tt.tensor(data(10 * rank + k)) for k in range(world)]
res = tt.zeros(3, 4, dtype=tt.float64)
dist.reduce_scatter(res, ins, op="sum")
ref = np.sum([data(10 * r + rank) for r in range(world)], 0)
out["reduce_scatter_sum"] = float(np.abs(res.numpy() - ref).max())
dist.reduce_scatter(res, ins, op="mean")
out["reduce_scatter_mean"] = float(np.abs(res.numpy() - ref / world).max())

dist.barrier()

# mismatched shapes: every rank raises, naming both shapes, and the group still works after
try:
    dist.all_reduce(tt.zeros(2 + rank, dtype=tt.float32))
    out["mismatch"] = "no error"
except RuntimeError as e:
    out["mismatch"] = str(e)
try:  # different collectives on the two ranks
    t = tt.zeros(2)
    dist.broadcast(t, 0) if rank == 0 else dist.all_reduce(t)
    out["mismatch_fn"] = "no error"
except RuntimeError as e:
    out["mismatch_fn"] = str(e)
after = tt.ones(2)
dist.all_reduce(after)
out["after_mismatch"] = after.tolist()

for name, call in (("bad_op", lambda: dist.all_reduce(tt.ones(2), op="min")),
                   ("mean_int", lambda: dist.all_reduce(tt.tensor([1, 2]), op="mean")),
                   ("bad_src", lambda: dist.broadcast(tt.ones(2), src=world)),
                   ("bad_list", lambda: dist.all_gather([tt.ones(2)], tt.ones(2))),
                   ("not_tensor", lambda: dist.all_reduce(np.ones(2)))):
    try:
        call()
        out[name] = "no error"
    except (ValueError, TypeError, RuntimeError) as e:
        out[name] = f"{type(e).__name__}: {e}"

print("RESULT", rank, json.dumps(out), flush=True)
dist.destroy_process_group()
