"""DistributedDataParallel: one model replica per process, gradients averaged over ranks.

How the overlap works. The engine runs a leaf's hooks only when the whole backward is
done, too late to overlap anything. So, while it syncs, DDP's forward hands the wrapped
module, in place of each parameter `p`, an alias `q` made by a one-node op (`_grad_ready`).
`q`'s node comes off the engine's heap exactly when every op that used `p` has been
differentiated, i.e. when `p`'s gradient is complete; a hook on `q` copies it into its
bucket, and a full bucket is all-reduced with a non-blocking MPI call while backward goes
on. `_grad_ready` passes no gradient on to `p`: DDP writes `p.grad` itself once the
reductions are done.

When syncing ends. Buckets are launched strictly in order (the same on every rank, which
MPI requires). When the last parameter reports, DDP waits for every bucket and writes the
averaged `.grad`s, still inside `loss.backward()`: after it returns, the gradients are
ready for `clip_grad_norm_` and `step()`. A parameter that gets no gradient (unused) would
keep the sync open: `find_unused_parameters=True` finds those after forward, by walking
the graph from the outputs; without it, `finish_gradient_synchronization()` closes the
sync by hand, and a forward that finds the previous sync still open raises, naming the
parameters that got none.
"""
import contextlib
import time


import tinytensor as tt
from tinytensor.distributed.process_group import group as _group

from .module import Module


class _GradReady(tt.Function):
    # not marked is_view: the alias lives only during one forward, and marking the
    # parameter as viewed would refuse autograd in-place ops on it for ever after
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return None  # DDP writes p.grad itself, from the reduced bucket

    @staticmethod
    def jvp(ctx, t):   # the identity forward: the tangent passes
        return t


class _Bucket:
    __slots__ = ("index", "params", "offsets", "size", "dtype", "buf", "filled", "req")

    def __init__(self, index, params, dtype):
        self.index, self.params, self.dtype = index, params, dtype
        self.offsets, n = [], 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.size = n


class DistributedDataParallel(Module):
    """Wrap `module` so that backward averages its gradients over all ranks.

    At wrap time every rank gets rank 0's parameters and buffers (and the ranks check they
    hold the same parameter names and shapes). During backward gradients are all-reduced
    in buckets of about `bucket_cap_mb` megabytes, in reverse parameter order (roughly the
    order backward produces them), overlapping the rest of backward. Gradients are averaged:
    `p.grad` = mean over ranks of each rank's local gradient (a parameter a rank did not use
    counts as zero there; one no rank used keeps its `.grad` unchanged).

    `no_sync()` skips communication, accumulating locally; the next synced backward
    averages the accumulated sum. `module` is the wrapped model; `state_dict()` and
    `load_state_dict()` are the module's own (no "module." prefix), so a checkpoint loads
    in one process.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=None,
                 init_sync=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        # torch's signature, so `DDP(model, device_ids=[local_rank])` runs as written. One
        # process drives one device here, so `device_ids`/`output_device` can only name the
        # device the parameters are on, and `dim` (how a multi-device process splits its
        # input) has nothing to split; `check_reduction`, `gradient_as_bucket_view` and
        # `static_graph` are torch's performance hints, with no effect on what is computed.
        super().__init__()
        g = _group()
        if process_group is not None and process_group is not g:
            raise ValueError("DistributedDataParallel: only the default process group "
                             "(init_process_group's) is supported")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got {type(module).__name__}")
        _check_device_ids(module, device_ids, output_device)
        if bucket_cap_mb is None:
            bucket_cap_mb = 4.0
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        object.__setattr__(self, "_pg", g)
        object.__setattr__(self, "find_unused_parameters", bool(find_unused_parameters))
        object.__setattr__(self, "_syncing", True)
        object.__setattr__(self, "_sync", None)
        object.__setattr__(self, "stats", {"comm_launched": 0, "comm_calls_s": 0.0, "exposed_wait_s": 0.0})
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        for n, p in named:
            if p.device.type != g.device_type:
                raise RuntimeError(f"DistributedDataParallel: parameter '{n}' is on {p.device}, but "
                                   f"the '{g.name}' backend works on {g.device_type} tensors")
        self._check_same_model(module, g)
        with tt.no_grad():
            for t in list(module.parameters()) + [b for b in module.buffers() if b is not None]:
                if not init_sync:  # torch's init_sync=False: the caller made the ranks equal
                    break
                g.broadcast(t.data if t.data.flags.c_contiguous else _not_contiguous(t), 0)
                t._version[0] += 1
        object.__setattr__(self, "_names", {id(p): n for n, p in named})
        object.__setattr__(self, "_buckets", self._make_buckets([p for _, p in named], bucket_cap_mb))
        object.__setattr__(self, "_where", {id(p): (b, i) for b in self._buckets
                                            for i, p in enumerate(b.params)})

    # ------------------------------------------------------------------ setup
    @staticmethod
    def _check_same_model(module, g):
        mine = [(n, tuple(p.shape), p.dtype.name) for n, p in module.named_parameters()]
        every = g.allgather_object(mine, "DistributedDataParallel")
        for r, theirs in enumerate(every):
            if theirs != mine:
                diff = next(((a, b) for a, b in zip(mine, theirs) if a != b), None)
                what = (f"'{diff[0][0]}' {diff[0][1]} {diff[0][2]} here, '{diff[1][0]}' "
                        f"{diff[1][1]} {diff[1][2]} there" if diff
                        else f"{len(mine)} parameters here, {len(theirs)} there")
                raise RuntimeError(f"DistributedDataParallel on rank {g.rank}: rank {r} wraps a "
                                   f"different model ({what}); build the same model on every rank")

    @staticmethod
    def _make_buckets(params, cap_mb):
        cap = cap_mb * 2 ** 20
        buckets, cur, size = [], [], 0
        for p in reversed(params):  # backward produces the last layers' gradients first
            if cur and (size + p.data.nbytes > cap or p.dtype is not cur[0].dtype):
                buckets.append(_Bucket(len(buckets), cur, cur[0].dtype))
                cur, size = [], 0
            cur.append(p)
            size += p.data.nbytes
        if cur:
            buckets.append(_Bucket(len(buckets), cur, cur[0].dtype))
        return buckets

    # ------------------------------------------------------------------ forward
    def forward(self, *args, **kwargs):
        self._check_previous_sync()
        if not (self._syncing and tt.is_grad_enabled() and self._buckets):
            return self.module(*args, **kwargs)
        sync = _Sync(self)
        aliases = {}
        for b in self._buckets:
            for i, p in enumerate(b.params):
                q = _GradReady.apply(p)
                q.register_hook(sync.hook(b, i))
                aliases[id(p)] = q
        swapped = []
        try:
            for m in self.module.modules():
                store = m._parameters
                for name, p in store.items():
                    if p is not None and id(p) in aliases:
                        swapped.append((store, name, p))
                        store[name] = aliases[id(p)]
            out = self.module(*args, **kwargs)
        finally:
            for store, name, p in swapped:
                store[name] = p
        object.__setattr__(self, "_sync", sync)
        if self.find_unused_parameters:
            sync.mark_unreached([q.grad_fn for q in aliases.values()], _tensors_in(out))
        return out

    def _check_previous_sync(self):
        s = self._sync
        if s is not None and s.started and not s.done:
            missing = [self._names[id(p)] for b in self._buckets for i, p in enumerate(b.params)
                       if not s.ready[b.index][i]]
            object.__setattr__(self, "_sync", None)
            raise RuntimeError(
                "DistributedDataParallel: the previous backward did not synchronize gradients: "
                f"{len(missing)} parameter(s) got no gradient ({', '.join(missing[:5])}"
                f"{', ...' if len(missing) > 5 else ''}); pass find_unused_parameters=True, or "
                "call finish_gradient_synchronization() after backward")

    def finish_gradient_synchronization(self):
        """Complete the gradient averaging of the last backward: parameters that got no
        gradient count as unused. Needed only when some parameter can miss its gradient
        and find_unused_parameters is off; a no-op when backward already finished it."""
        s = self._sync
        if s is not None and s.started and not s.done:
            s.finish()

    @property
    def require_backward_grad_sync(self):
        """torch's flag: False makes the next backwards accumulate locally, as `no_sync()`
        does (nanoGPT sets it on all but the last micro-batch of a gradient accumulation)."""
        return self._syncing

    @require_backward_grad_sync.setter
    def require_backward_grad_sync(self, value):
        object.__setattr__(self, "_syncing", bool(value))

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside accumulates `.grad` locally, without communicating; the first
        synced backward after it averages the accumulated gradients."""
        prev = self._syncing
        object.__setattr__(self, "_syncing", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_syncing", prev)

    # ------------------------------------------------------------------ the module's face
    def state_dict(self, prefix=""):
        return self.module.state_dict(prefix)

    def load_state_dict(self, state_dict, strict=True):
        return self.module.load_state_dict(state_dict, strict)

    def extra_repr(self):
        return (f"world_size={self._pg.world_size}, buckets={len(self._buckets)}, "
                f"find_unused_parameters={self.find_unused_parameters}")


def _check_device_ids(module, device_ids, output_device):
    """torch's rule: device_ids/output_device name the one device a GPU module is on, and
    must be None for a CPU module."""
    devices = {p.device for p in module.parameters()}
    if device_ids is None and output_device is None:
        return
    ids = list(device_ids or []) + ([output_device] if output_device is not None else [])
    cpu = all(d.type == "cpu" for d in devices)
    named = {d.index if d.index is not None else 0 for d in devices}
    wanted = {i if isinstance(i, int) else (tt.device(i).index or 0) for i in ids}
    if cpu or len(device_ids or []) > 1 or not wanted <= named:
        raise ValueError(
            "DistributedDataParallel device_ids and output_device arguments only work with "
            "single-device GPU modules (one process per device), and must be None for CPU "
            f"modules, but got device_ids {device_ids}, output_device {output_device}, and "
            f"module parameters {sorted(str(d) for d in devices)}")


class _Sync:
    """The gradient averaging of one forward/backward."""

    def __init__(self, ddp):
        self.ddp, self.pg, self.buckets = ddp, ddp._pg, ddp._buckets
        self.ready = [[False] * len(b.params) for b in self.buckets]
        self.left = [len(b.params) for b in self.buckets]
        self.bufs = [None] * len(self.buckets)
        self.reqs = []
        self.next = 0          # the next bucket to launch: all ranks launch in the same order
        self.started = self.done = False

    def hook(self, bucket, i):
        def grad_ready(g):
            self.arrive(bucket, i, g.data)
        return grad_ready

    def _buf(self, b):
        buf = self.bufs[b.index]
        if buf is None:
            # a fresh buffer every step: the .grads of the last step are views into the old one
            buf = self.bufs[b.index] = b.params[0].device.xp.zeros(b.size + len(b.params),
                                                                 dtype=b.dtype.np)
        return buf

    def arrive(self, b, i, g, launch=True):
        if self.done:
            raise RuntimeError("DistributedDataParallel: backward ran a second time through one "
                               "forward; run a new forward for every backward")
        if self.ready[b.index][i]:
            return
        p = b.params[i]
        buf = self._buf(b)
        lo = b.offsets[i]
        dst = buf[lo:lo + p.numel()].reshape(p.shape)
        contributed = g is not None or p.grad is not None
        if g is not None:
            dst[...] = g  # NumPy or CuPy alike
        if p.grad is not None:  # accumulated under no_sync (or not zeroed): averaged with it
            dst += p.grad.data
        # one count per parameter: zero after the sum means no rank used it
        buf[b.size + i] = 1 if contributed else 0
        self.ready[b.index][i] = True
        self.left[b.index] -= 1
        if launch:
            self.started = True
            self._launch_ready()

    def _launch_ready(self):
        t0 = time.perf_counter()
        while self.next < len(self.buckets) and self.left[self.next] == 0:
            b = self.buckets[self.next]
            self.reqs.append(self.pg.iallreduce(self._buf(b), "sum",
                                                f"DistributedDataParallel's all_reduce of bucket {b.index}"))
            self.ddp.stats["comm_launched"] += 1
            self.next += 1
        for r in self.reqs:  # MPI moves data only inside MPI calls: give it a turn
            r.test()
        self.ddp.stats["comm_calls_s"] += time.perf_counter() - t0
        if self.next == len(self.buckets):
            self._complete()

    def mark_unreached(self, nodes, outputs):
        """Parameters whose alias the outputs do not depend on get no gradient this step."""
        reached, stack = set(), [t.grad_fn for t in outputs if t.grad_fn is not None]
        wanted = set(nodes)
        seen = set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in wanted:
                reached.add(n)
                continue
            for e in n.edges or ():
                if e.__class__ is tuple:
                    stack.append(e[0])
        k = 0
        for b in self.buckets:
            for i in range(len(b.params)):
                if nodes[k] not in reached:  # launched with the first real gradient, in backward
                    self.arrive(b, i, None, launch=False)
                k += 1

    def finish(self):
        for b in self.buckets:
            for i in range(len(b.params)):
                if not self.ready[b.index][i]:
                    self.arrive(b, i, None)

    def _complete(self):
        t0 = time.perf_counter()
        for r in self.reqs:
            r.wait()
        self.ddp.stats["exposed_wait_s"] += time.perf_counter() - t0
        n = self.pg.world_size
        for b in self.buckets:
            buf = self.bufs[b.index]
            grads, counts = buf[:b.size], buf[b.size:].tolist()  # one host copy, not one per check
            grads /= n
            for i, p in enumerate(b.params):
                if counts[i] == 0:
                    continue
                lo = b.offsets[i]
                p.grad = tt.Tensor._make(grads[lo:lo + p.numel()].reshape(p.shape), p._device, False)
        self.done = True


def _tensors_in(out):
    if isinstance(out, tt.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors_in(o)]
    return []


def _not_contiguous(t):
    raise RuntimeError(f"DistributedDataParallel: a parameter or buffer of shape {tuple(t.shape)} "
                       "is not contiguous; make it so before wrapping")
