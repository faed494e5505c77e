"""Run by test_parallel.py under `mpiexec -n 2`: DistributedDataParallel against one
process on the full batch. Every rank also trains that single-process reference itself."""
import copy
import json
import sys

import numpy as np

from tinytensor import models
from tinytensor import nn
import tinytensor as tt
import tinytensor.distributed as dist

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
ckpt_path = sys.argv[1]
out = {}

CONFIG = dict(vocab_size=32, n_positions=8, n_embd=16, n_layer=2, n_head=2,
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
B, T = 8, 8


def gpt(dtype, seed):
    tt.manual_seed(seed)  # a different init on each rank: DDP must broadcast rank 0's
    m = models.GPT(models.GPTConfig(**CONFIG))
    return m.double() if dtype == "float64" else m


def batches(steps):
    rng = np.random.default_rng(123)  # the same global batches on every rank
    return [rng.integers(0, CONFIG["vocab_size"], (B, T)) for _ in range(steps)]


def all_ranks_max_diff(model):
    """Largest difference between this rank's parameters and every other rank's."""
    worst = 0.0
    for p in model.parameters():
        parts = [tt.zeros(*p.shape, dtype=p.dtype) for _ in range(world)]
        dist.all_gather(parts, p.detach().clone())
        worst = max(worst, max(float(np.abs(q.numpy() - parts[0].numpy()).max()) for q in parts))
    return worst


def max_diff(a, b):
    return max(float(np.abs(x.detach().numpy() - y.detach().numpy()).max()) for x, y in zip(a, b))


def train_pair(dtype, micro):
    """10 AdamW steps: DDP with each rank on half of every batch (as `micro` microbatches,
    all but the last under no_sync) against one model on the whole batch."""
    model = gpt(dtype, seed=rank)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.004)  # several buckets
    ref = copy.deepcopy(model)       # rank 0's weights, after the broadcast
    opt = nn.optim.AdamW(ddp.parameters(), lr=1e-3)
    opt_ref = nn.optim.AdamW(ref.parameters(), lr=1e-3)
    grad_err = None
    for step, ids in enumerate(batches(10)):
        full = tt.tensor(ids)
        ref(full, labels=full).loss.backward()
        mine = np.array_split(ids[rank * B // world:(rank + 1) * B // world], micro)
        opt.zero_grad()
        for k, part in enumerate(mine):
            x = tt.tensor(part)
            if k < micro - 1:
                with ddp.no_sync():
                    (ddp(x, labels=x).loss / micro).backward()
            else:
                (ddp(x, labels=x).loss / micro).backward()
        if step == 0:
            grad_err = max_diff([p.grad for p in model.parameters()], [p.grad for p in ref.parameters()])
        opt.step()
        opt_ref.step()
        opt_ref.zero_grad()
    return ddp, ref, {"grad": grad_err, "params": max_diff(model.parameters(), ref.parameters()),
                      "across_ranks": all_ranks_max_diff(model), "buckets": len(ddp._buckets)}


for dtype in ("float64", "float32"):
    ddp, ref, res = train_pair(dtype, micro=1)
    out[dtype] = res
ddp64, _, out["no_sync_float64"] = train_pair("float64", micro=2)

# a checkpoint from rank 0 of the DDP model: keys without a prefix, loads in one process
if rank == 0:
    nn.save(ddp64.state_dict(), ckpt_path)
    probe = tt.tensor(batches(11)[-1])
    with tt.no_grad():
        out["probe_loss"] = ddp64.module(probe, labels=probe).loss.item()
    out["probe"], out["config"] = probe.tolist(), CONFIG
dist.barrier()


class TwoHeads(nn.Module):
    """`b` is used by rank 0 only, `c` by no rank."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(3, 3), nn.Linear(3, 1), nn.Linear(3, 1)

    def forward(self, x, use_b):
        h = self.a(x)
        return (self.b(h) if use_b else h).sum()


def unused(find):
    tt.manual_seed(0)
    net = TwoHeads().double()
    ddp = nn.parallel.DistributedDataParallel(net, find_unused_parameters=find)
    x = tt.tensor(np.random.default_rng(rank).standard_normal((4, 3)))
    ddp(x, use_b=rank == 0).backward()
    return ddp, net, x


ddp, net, x = unused(True)
# the reference: rank r's local gradients, by hand, on the same weights
local = copy.deepcopy(net)
local(x, use_b=rank == 0).backward()
grads = {n: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape)) for n, p in local.named_parameters()}
want = {}
for n in ("a.weight", "a.bias", "b.weight", "b.bias"):
    parts = [tt.zeros(*grads[n].shape, dtype=tt.float64) for _ in range(world)]
    dist.all_gather(parts, tt.tensor(grads[n]))
    want[n] = np.mean([p.numpy() for p in parts], 0)
out["unused_err"] = max(float(np.abs(dict(net.named_parameters())[n].grad.detach().numpy() - w).max())
                        for n, w in want.items())
out["unused_everywhere_grad"] = [net.c.weight.grad is None, net.c.bias.grad is None]

ddp, net, x = unused(False)  # rank 1 never sees b's gradient: its sync stays open
out["open_sync_grad_is_none"] = net.a.weight.grad is None
try:
    ddp(x, use_b=rank == 0)
    out["open_sync_error"] = "no error"
except RuntimeError as e:
    out["open_sync_error"] = str(e)
ddp, net, x = unused(False)
ddp.finish_gradient_synchronization()
out["finished_by_hand_err"] = max(float(np.abs(dict(net.named_parameters())[n].grad.detach().numpy() - w).max())
                                  for n, w in want.items())

print("RESULT", rank, json.dumps(out), flush=True)
dist.destroy_process_group()
