"""Run by tests/nn/test_normalization.py under `mpiexec -n 2`: nn.SyncBatchNorm on two ranks
holding unequal parts of a batch (3 rows and 1) against nn.BatchNorm2d in one process on the
whole batch, two training steps: outputs, input gradients, parameter gradients summed over
the ranks, running statistics, then an eval step."""
import json

import numpy as np

from tinytensor import nn
import tinytensor as tt
import tinytensor.distributed as dist

dist.init_process_group("mpi")
rank = dist.get_rank()
rows = slice(0, 3) if rank == 0 else slice(3, 4)


def net():
    tt.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, dtype=tt.float64), nn.BatchNorm2d(3, dtype=tt.float64),
                      nn.ReLU(), nn.Conv2d(3, 3, 1, dtype=tt.float64),
                      nn.BatchNorm2d(3, momentum=None, dtype=tt.float64))
    with tt.no_grad():
        m[1].weight.uniform_(0.5, 1.5)
        m[4].bias.uniform_(-0.5, 0.5)
    return m


whole, synced = net(), nn.SyncBatchNorm.convert_sync_batchnorm(net())
out = {"converted": [type(m).__name__ for m in synced]}
worst = {"y": 0.0, "x_grad": 0.0, "param_grad": 0.0, "state": 0.0, "eval": 0.0}
rng = np.random.default_rng(7)
for step in range(2):
    x, g = rng.standard_normal((4, 2, 4, 4)), rng.standard_normal((4, 3, 4, 4))
    xw, xs = tt.tensor(x, requires_grad=True), tt.tensor(x[rows], requires_grad=True)
    yw, ys = whole(xw), synced(xs)
    (yw * tt.tensor(g)).sum().backward()
    (ys * tt.tensor(g[rows])).sum().backward()
    worst["y"] = max(worst["y"], float(np.abs(ys.detach().numpy() - yw.detach().numpy()[rows]).max()))
    worst["x_grad"] = max(worst["x_grad"], float(np.abs(xs.grad.numpy() - xw.grad.numpy()[rows]).max()))
    for p, q in zip(synced.parameters(), whole.parameters()):
        dist.all_reduce(p.grad)   # what DistributedDataParallel does with them
        worst["param_grad"] = max(worst["param_grad"], float(np.abs(p.grad.numpy() - q.grad.numpy()).max()))
        p.grad = q.grad = None
    for (k, a), b in zip(synced.state_dict().items(), whole.state_dict().values()):
        worst["state"] = max(worst["state"], float(np.abs(a.numpy() - b.numpy()).max()))
out["num_batches_tracked"] = synced[4].num_batches_tracked.item()
synced.eval(), whole.eval()
x = rng.standard_normal((4, 2, 4, 4))
worst["eval"] = float(np.abs(synced(tt.tensor(x[rows])).detach().numpy()
                             - whole(tt.tensor(x)).detach().numpy()[rows]).max())
out.update(worst)
print(f"RESULT {rank} {json.dumps(out)}", flush=True)
dist.destroy_process_group()
