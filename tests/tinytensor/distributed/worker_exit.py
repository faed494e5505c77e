"""Run by test_exits.py: rank 1 leaves or misbehaves in one way (argv[1]); rank 0 carries on."""
import sys
import time

import tinytensor as tt
import tinytensor.distributed as dist

how = sys.argv[1]
dist.init_process_group("mpi", **({"timeout": float(sys.argv[2])} if len(sys.argv) > 2 else {}))
rank = dist.get_rank()
print(f"READY {rank} {time.time()}", flush=True)  # imports take long on a loaded machine


def ddp_step(model):
    x = tt.ones(2, 4)
    model(x).sum().backward()


if how == "ddp_exit3":  # rank 1 leaves before its backward: rank 0 waits on a gradient bucket
    from tinytensor import nn
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 3))
    if rank == 1:
        sys.exit(3)
    ddp_step(model)
    print("rank 0 passed backward", flush=True)
    sys.exit(0)

if rank == 1:
    if how == "exit3":
        sys.exit(3)
    if how == "return":
        sys.exit(0)  # as falling off the end of the script, group left open
    if how == "barrier":
        dist.barrier()
    if how == "late":
        time.sleep(30)  # longer than the timeout: rank 0 must not wait for it
if how in ("exit3", "return", "barrier", "late"):
    dist.all_reduce(tt.ones(3))  # rank 0 would wait here for ever
    print(f"rank {rank} passed the all_reduce", flush=True)
    sys.exit(0)

# both ranks finish together
dist.all_reduce(tt.ones(3))
if how == "all_return":  # nobody calls destroy_process_group(): nobody waits, a clean exit
    print(f"rank {rank} done", flush=True)
    sys.exit(0)
if how == "destroyed_exit3":  # the group was closed properly; the status still reaches mpiexec
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)
    sys.exit(3 if rank == 1 else 0)
