"""Run by test_faults.py: rank 1 fails (raises, or is killed), rank 0 waits in a collective."""
import os
import signal
import sys
import time

import tinytensor as tt
import tinytensor.distributed as dist

dist.init_process_group("mpi")
print(f"READY {dist.get_rank()} {time.time()}", flush=True)  # imports are slow on a busy machine
how = sys.argv[1]
if dist.get_rank() == 1:
    if how == "raise":
        raise ValueError("rank 1 fails on purpose")
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(tt.ones(3))  # rank 0 would wait here for ever without the abort
print("rank 0 passed the all_reduce", flush=True)
