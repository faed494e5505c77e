"""Collectives on Tensors, in place like torch.distributed.

Before each one the ranks exchange a few bytes of metadata (which collective, shapes,
dtypes, op, root), so a rank passing a different shape gets an error naming every rank's
shape on all ranks, where the raw MPI call would read past a buffer or wait forever.
They work on the data, outside autograd: nothing is recorded on the tape. The exchange
waits at most the group's timeout, and fails at once if a rank it waits for is exiting.
"""

from ..core.tensor import Tensor
from ..messages import type_name
from . import process_group
from .process_group import ReduceOp, group as _group


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Replace `tensor` on every rank by its sum, mean or max over the ranks."""
    g = _default_group("all_reduce", group)
    _check_op("all_reduce", op, tensor)
    a = _array("all_reduce", g, tensor)
    _agree(g, "all_reduce", op, [_meta(tensor)])
    _in_place(tensor, a, lambda buf: _reduce(g, buf, op))
    return _Done() if async_op else tensor


def broadcast(tensor, src=0, group=None, async_op=False):
    """Replace `tensor` on every rank by rank `src`'s."""
    g = _default_group("broadcast", group)
    a = _array("broadcast", g, tensor)
    _check_rank("broadcast", "src", src, g)
    _agree(g, "broadcast", src, [_meta(tensor)])
    _in_place(tensor, a, lambda buf: g.broadcast(buf, src))
    return _Done() if async_op else tensor


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill `tensor_list[r]` on every rank with rank r's `tensor`."""
    g = _default_group("all_gather", group)
    a = _array("all_gather", g, tensor)
    outs = _tensor_list("all_gather", "tensor_list", tensor_list, tensor, g)
    _agree(g, "all_gather", None, [_meta(tensor)])
    xp = tensor.device.xp  # NumPy for MPI, CuPy for NCCL
    recv = xp.empty((g.world_size,) + a.shape, dtype=a.dtype)
    g.all_gather(xp.ascontiguousarray(a), recv)
    for t, part in zip(outs, recv):
        _write(t, part)
    return _Done() if async_op else tensor_list


def reduce_scatter(output, input_list, op=ReduceOp.SUM):
    """Rank r's `output` becomes the sum (mean, max) over ranks of their `input_list[r]`."""
    g = _group()
    _check_op("reduce_scatter", op, output)
    out = _array("reduce_scatter", g, output)
    ins = _tensor_list("reduce_scatter", "input_list", input_list, output, g)
    _agree(g, "reduce_scatter", op, [_meta(output)])
    xp = output.device.xp
    send = xp.ascontiguousarray(xp.stack([t.data for t in ins]))
    recv = xp.empty(out.shape, dtype=out.dtype)
    g.reduce_scatter(send, recv, op)
    if op == ReduceOp.MEAN:
        recv /= g.world_size
    _write(output, recv)
    return output


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank reaches this call (a rank in another collective is an error)."""
    _default_group("barrier", group)
    synchronize("barrier")
    return _Done() if async_op else None


class _Done:
    """What torch's `async_op=True` returns; these collectives finish before returning, so
    its wait() has nothing left to wait for."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


def _default_group(fn, g):
    """torch's `group=` argument: only the one group (init_process_group's) exists here."""
    pg = _group()
    if g is not None and g is not pg:
        raise ValueError(f"{fn}: only the default process group exists in tinytensor "
                         f"(group=None), got {g!r}")
    return pg


def destroy_process_group():
    """Leave the group (after a barrier, so no rank leaves while another still sends)."""
    if not process_group.is_initialized():
        return
    synchronize("destroy_process_group")  # every rank agrees it is leaving, within the timeout
    process_group.leave()


def synchronize(fn):
    g = _group()
    _agree(g, fn, None, [])
    g.barrier()  # NCCL: the GPU's queue first; after the agreement it cannot mismatch


def _reduce(g, buf, op):
    g.allreduce(buf, op)
    if op == ReduceOp.MEAN:
        buf /= g.world_size


def _check_op(fn, op, tensor):
    if op not in ReduceOp.ALL:
        raise ValueError(f"{fn}: unknown op {op!r}; choose one of {', '.join(ReduceOp.ALL)}")
    if op == ReduceOp.MEAN and isinstance(tensor, Tensor) and tensor.dtype.np.kind != "f":
        raise TypeError(f"{fn}: op='mean' needs a floating-point tensor, got {tensor.dtype.name}; "
                        "use op='sum' and divide yourself")


def _check_rank(fn, name, r, g):
    if not isinstance(r, int) or not 0 <= r < g.world_size:
        raise ValueError(f"{fn}: {name}={r!r} is not a rank of this group (0 to {g.world_size - 1})")


def _array(fn, g, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: expected a Tensor, got {type_name(t)}")
    if t.device.type != g.device_type:
        hint = ("move it with .cpu(), or use init_process_group('nccl') for GPUs" if g.name == "mpi"
                else "move it with .cuda(), one GPU per rank")
        raise RuntimeError(f"{fn}: the '{g.name}' backend works on {g.device_type} tensors, got a "
                           f"tensor on {t.device}; {hint}")
    return t.data


def _tensor_list(fn, what, ts, like, g):
    ts = list(ts)
    if len(ts) != g.world_size:
        raise ValueError(f"{fn}: {what} has {len(ts)} tensors; it needs one per rank, "
                         f"{g.world_size}")
    for i, t in enumerate(ts):
        _array(fn, g, t)
        if tuple(t.shape) != tuple(like.shape) or t.dtype is not like.dtype:
            raise ValueError(f"{fn}: {what}[{i}] has shape {tuple(t.shape)} {t.dtype.name}; each "
                             f"must match the tensor's shape {tuple(like.shape)} {like.dtype.name}")
    return ts


def _meta(t):
    return (tuple(t.shape), t.dtype.name)


def _agree(g, fn, arg, metas):
    """Raise on every rank, with every rank's view, unless all ranks called the same thing."""
    mine = (fn, arg, metas)
    every = g.allgather_object(mine, fn)
    if all(m == every[0] for m in every):
        return
    lines = "; ".join(f"rank {r}: {_describe(m)}" for r, m in enumerate(every))
    raise RuntimeError(f"{fn} on rank {g.rank}: the ranks disagree ({lines}); every rank must "
                       "call the same collective on tensors of the same shape and dtype")


def _describe(m):
    fn, arg, metas = m
    parts = [f"shape {s} {d}" for s, d in metas] + ([str(arg)] if arg is not None else [])
    return f"{fn}({', '.join(parts)})"


def _in_place(t, a, run):
    if a.flags.c_contiguous and _writeable(a):
        run(a)
        _bump(t)
    else:  # MPI needs one contiguous buffer; a view gets its result copied back
        buf = t.device.xp.ascontiguousarray(a).copy()
        run(buf)
        _write(t, buf)


def _write(t, values):
    if not _writeable(t.data):
        raise RuntimeError(f"collective: the output tensor of shape {tuple(t.shape)} is read-only "
                           "(a broadcast view?); pass a tensor with its own memory")
    t.device.xp.copyto(t.data, values)
    _bump(t)


def _writeable(a):
    return getattr(a.flags, "writeable", True)  # CuPy arrays have no read-only flag


def _bump(t):
    t._version[0] += 1  # saved-for-backward checks see the change, as with any in-place op
