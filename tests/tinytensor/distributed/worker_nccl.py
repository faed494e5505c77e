"""Run by test_nccl.py under `mpiexec -n 2` on 2 GPUs: the NCCL collectives against NumPy,
and DDP's averaged gradients against one process on the full batch."""
import json

import numpy as np

from tinytensor import nn
import tinytensor as tt
import tinytensor.distributed as dist

g = dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = str(g.device)
out = {"device": dev}


def data(r, shape=(3, 4), dtype=np.float32):
    return (np.random.default_rng(r).standard_normal(shape) * 10).astype(dtype)


def on_gpu(a):
    return tt.tensor(a).to(dev)


def err(t, ref):
    return float(np.abs(t.cpu().numpy() - ref).max())


every = [data(r) for r in range(world)]
for op, ref in (("sum", np.sum(every, 0)), ("mean", np.mean(every, 0)), ("max", np.max(every, 0))):
    t = on_gpu(data(rank))
    dist.all_reduce(t, op=op)
    out[f"all_reduce_{op}"] = err(t, ref)

b = on_gpu(data(rank, (5,)))
dist.broadcast(b, src=1)
out["broadcast_src1"] = err(b, data(1, (5,)))

parts = [on_gpu(np.zeros((3, 4), np.float32)) for _ in range(world)]
dist.all_gather(parts, on_gpu(data(rank)))
out["all_gather"] = max(err(p, every[r]) for r, p in enumerate(parts))

ins = [on_gpu(data(10 * rank + k)) for k in range(world)]
res = on_gpu(np.zeros((3, 4), np.float32))
ref = np.sum([data(10 * r + rank) for r in range(world)], 0)
dist.reduce_scatter(res, ins, op="sum")
out["reduce_scatter_sum"] = err(res, ref)
dist.reduce_scatter(res, ins, op="mean")
out["reduce_scatter_mean"] = err(res, ref / world)

# DDP: each rank half of the batch; the full batch in one process is the reference
tt.manual_seed(rank)  # different inits: DDP broadcasts rank 0's
model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 1)).to(dev)
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)  # several buckets
x = data(99, (8, 4))
ref_model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 1)).to(dev)
ref_model.load_state_dict(model.state_dict())
ref_model(on_gpu(x)).pow(2).mean().backward()
ddp(on_gpu(x[4 * rank:4 * rank + 4])).pow(2).mean().backward()
out["ddp_grads"] = max(float(np.abs(p.grad.cpu().numpy() - q.grad.cpu().numpy()).max())
                       for p, q in zip(model.parameters(), ref_model.parameters()))
worst = 0.0
for p in model.parameters():
    got = [on_gpu(np.zeros(p.shape, p.dtype.np)) for _ in range(world)]
    dist.all_gather(got, p.detach().clone())
    worst = max(worst, max(err(o, p.detach().cpu().numpy()) for o in got))
out["ddp_params_agree"] = worst

try:
    dist.all_reduce(tt.ones(2))
    out["cpu_tensor"] = "no error"
except RuntimeError as e:
    out["cpu_tensor"] = str(e)

print("RESULT", rank, json.dumps(out), flush=True)
dist.destroy_process_group()
