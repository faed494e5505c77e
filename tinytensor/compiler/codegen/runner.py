"""The C backend's runner: executes a built program's schedule, its intermediates in one
arena laid out by the memory plan (passes/plan.py).

Fused kernels write their outputs straight into arena slots, float matmuls into theirs
through `np.matmul(..., out=)`, and ops with a `forward_into` (index_add, scatter_add,
gather, cat) through it (an embedding's index_add through a C loop, c_index.py): those
slots are views made once, at build time, so a
replay allocates nothing for them and its peak memory is the planned one. Every other
instruction runs its Function's NumPy forward, as eager does, into memory of its own,
freed as soon as its last reader has run.

Safety: an op that is not a declared view (`Function.is_view`) but hands back memory of
its input (a no-op reshape, `astype(copy=False)`) would alias an arena slot that the plan
is about to reuse; the runner checks each such result against the arena's address range
and copies it out when it overlaps, so the plan can never give a silent wrong answer.
Results handed to the caller never live in the arena; the memory of a result the caller
has dropped (its reference count says nobody else holds it, not even a view) is reused
for the same result at the next call, which spares a fresh allocation (and its page
faults) per result per call. An optimizer's new parameter and state values are computed
straight into the arrays they replace, where `in_place` proves nothing reads the old
values afterwards (the caller's write then finds nothing to copy).

Threads (codegen/threads.py): with `threads` > 1, kernels over at least SPLIT_ELEMENTS
elements and matmuls of at least SPLIT_FLOPS multiply-adds run in that many parts at once,
on the process's pool; OpenBLAS is held to one thread while the program runs (its spinning
workers would take the cores the parts need) and set back after. A split kernel computes
every element exactly as the whole one does (each part is a range of its loop), so the
results are the same bits; a split matmul is BLAS's on blocks of rows (or of the leading
batch dim): the same bits on some CPUs' kernels (Zen 4, AVX-512), not on others (OpenBLAS's
Haswell kernels round a product of fewer rows differently), so a matmul big enough to split
agrees with one thread to BLAS's rounding, not bit for bit.

A runner is not re-entrant (one arena per runner): calls from several threads take turns;
a call from inside its own run is an error.
"""
import ctypes
import dataclasses
import threading
import time
from sys import getrefcount

import numpy as np

from ...ops.movement import Permute, Reshape
from ..interpret import _dead_after, compile_instr, fill_attrs, run_instr
from ...symbolic import SymInt, contains_symbolic, evaluate
from ..passes import plan as plan_pass
from . import c_index, threads as _threads
from .pointers import data_pointer

_FLOAT = (np.dtype(np.float32), np.dtype(np.float64))
_VIEWS = (Reshape, Permute)


def _held_by_us():
    """What getrefcount says of a spare result nobody else holds, read the way the steps
    read it (a slot of a list, a local name): 3 on CPython 3.11 (the list, the name,
    getrefcount's argument); measured, not assumed, since interpreters count differently.
    Any view, Tensor or list of the caller's adds one."""
    spare = [np.empty(1)]
    a = spare[0]
    return getrefcount(a)


_HELD_BY_US = _held_by_us()


class Runner:
    """Runs a built program: `runner(inputs) -> outputs` (lists of arrays). `kernels` maps
    instruction index -> the loaded C function of that fused instruction; `in_place` says
    which outputs those kernels compute over an input (codegen/c.py generated them so)."""

    def __init__(self, program, kernels, source, in_place=None, sizes=None, generic=False,
                 threads=1):
        # in_place ({output value id: input value id}, from `in_place` below) must be what
        # the kernels' source was generated for: such a kernel reads that input through the
        # output's pointer. sizes: the dynamic sizes (s0, s1, ... in order) the kernels of a
        # program of symbolic sizes take, `program` being that program at those sizes.
        # generic=True: `program` keeps its symbolic sizes and each call says them
        # (runner(inputs, {symbol: size})): no arena (its layout would depend on them), shapes
        # and attributes evaluated per call; what a size seen once runs on (instantiate.py)
        # threads: how many parts big kernels and matmuls run in (the module's docstring).
        # A kernel that cannot be split (a sum over everything) does it all as part 0, so
        # its tuning keeps it whole.
        self.program, self.source = program, source
        # what runs in parts: big kernels (where the timing says so) and big float matmuls;
        # a program with neither runs without the pool, and one without such a matmul
        # leaves BLAS's threads as they are
        split, gemms = set(), set()
        if threads > 1 and not generic:
            split = {k for k in kernels if _elements(program.instrs[k]) >= _threads.SPLIT_ELEMENTS}
            gemms = {k for k, ins in enumerate(program.instrs) if _gemm_worth(ins)}
        self.pool = _threads.pool(threads) if split or gemms else None
        if self.pool is not None and self.pool.gemm(np.float32) is None:
            gemms = set()    # not OpenBLAS: NumPy's matmul, in BLAS's own threads
        self._hold_blas = bool(gemms)
        parts = self.pool.threads if self.pool is not None else 1
        self._sizes = None if sizes is None else (ctypes.c_int64 * max(1, len(sizes)))(*sizes)
        size_arg = None if sizes is None else ctypes.addressof(self._sizes)
        self._senv = {} if generic else None   # the sizes of the call running (generic)
        # the plan pass (passes/plan.py) made the plan; a generic runner (sizes per call) has no arena
        self.plan = plan_pass.EMPTY if generic else plan_pass.planned(program, "the C runner")
        self.in_place = dict(in_place or {})
        self.arena, slots = _arena(self.plan)
        lo = self.arena.ctypes.data if self.arena.size else 0
        self._bounds = (lo, lo + self.arena.size)
        dead = _dead_after(program)
        # values whose arrays the runner makes itself, C-contiguous and of their own dtype:
        # a kernel reading one needs no layout check
        given = {v.id for v in program.inputs} | {v.id for v in program.consts}
        made = {v.id for k, ins in enumerate(program.instrs) if k in kernels or
                (ins.op == "matmul" or plan_pass.has_into(ins)) and plan_pass.placed_in_arena(ins) for v in ins.outputs}
        self.steps = []
        for k, ins in enumerate(program.instrs):
            if k in kernels:
                step = _kernel_step(ins, kernels[k], slots, self.in_place, made, size_arg, self._senv,
                                    given, self.pool, parts if k in split else 1)
            elif ins.op == "matmul" and plan_pass.placed_in_arena(ins) and not generic:
                step = _matmul_step(ins, slots.get(ins.outputs[0].id),
                                    self.pool if k in gemms and parts > 1 else None)
            elif plan_pass.has_into(ins) and plan_pass.placed_in_arena(ins) and not generic:
                step = _into_step(ins, slots.get(ins.outputs[0].id))
            else:
                step = numpy_step(ins, self._bounds, self._senv)
            self.steps.append((step, dead[k]))
        self._inputs = [v.id for v in program.inputs]
        self._consts = {v.id: np.asarray(a) for v, a in program.consts.items()}
        self._outputs = [v.id for v in program.outputs]
        self._lock = threading.Lock()
        self._owner = None    # the thread running the program now

    def __call__(self, inputs, sizes=None):
        if len(inputs) != len(self._inputs):
            raise ValueError(f"compiled program: expected {len(self._inputs)} inputs, got {len(inputs)}")
        if self._senv is not None:
            if sizes is None:
                raise ValueError("compiled program: a runner of symbolic sizes needs the call's sizes")
        me = threading.get_ident()
        if self._owner == me:
            raise RuntimeError("compiled program: called again from inside itself (a hook or "
                               "callback of its own run); a program has one arena, so it cannot "
                               "run twice at once")
        with self._lock:   # another thread waits its turn: the arena is shared
            self._owner = me
            if self._senv is not None:
                self._senv.clear()
                self._senv.update(sizes)
                for k in range(len(self._sizes)):
                    self._sizes[k] = sizes.get(f"s{k}", 0)
            try:
                with _threads.blas_held_to_one(self._hold_blas):
                    return self._run(inputs)
            finally:
                self._owner = None

    def _run(self, inputs):
        env = dict(self._consts)
        env.update(zip(self._inputs, inputs))
        for step, gone in self.steps:
            step(env)
            for i in gone:
                del env[i]
        return [env[i] for i in self._outputs]


def in_place(program, kernels, write_back):
    """{output value id: input value id} for each output of `write_back` ({output index:
    input index}) that a fused kernel can compute straight into the input's array: the
    kernel is the last reader of that input (and of every view of it), reads it at the very
    element it writes (same shape), and no other output goes into the same array. The rest
    are computed into memory of their own and copied by the caller's write, as before."""
    roots = plan_pass.aliases(program)
    made = {v.id: (k, ins) for k, ins in enumerate(program.instrs) for v in ins.outputs}
    last = {}
    for k, ins in enumerate(program.instrs):
        for v in ins.inputs:
            for r in roots.get(v.id, (v.id,)):
                last[r] = k
    out_ids = [v.id for v in program.outputs]
    chosen, taken = {}, set()
    for k, j in sorted(write_back.items()):
        out, dest = program.outputs[k], program.inputs[j]
        where = made.get(out.id)
        if where is None or where[0] not in kernels or dest.id in taken or dest.id in out_ids:
            continue
        p, ins = where
        if out_ids.count(out.id) > 1 or out.id in chosen or tuple(out.shape) != tuple(dest.shape) \
                or out.dtype.np != dest.dtype.np or last.get(dest.id, -1) > p:
            continue
        if any(dest.id in roots.get(v.id, (v.id,)) and (v.id != dest.id or tuple(v.shape) != tuple(out.shape))
               for v in ins.inputs):
            continue  # read through a view, or broadcast: other elements than the one written
        chosen[out.id] = dest.id
        taken.add(dest.id)
    return chosen


def _arena(memory):
    """One aligned block of memory.peak bytes and a view per planned buffer (value id -> array)."""
    raw = np.empty(memory.peak + plan_pass.ALIGN, np.uint8)
    shift = (-raw.ctypes.data) % plan_pass.ALIGN
    arena = raw[shift:shift + memory.peak]
    slots = {}
    for b in memory.buffers:
        v = b.value
        n = plan_pass.nbytes(v)
        slots[v.id] = arena[b.offset:b.offset + n].view(v.dtype.np).reshape(tuple(v.shape))
    return arena, slots


def _shaper(shape, senv):
    """() -> `shape` now: the tuple itself, or for a shape of formulas (a generic runner,
    senv its call's sizes) a function evaluating them."""
    shape = tuple(shape)
    if senv is None or not any(isinstance(d, SymInt) for d in shape):
        return lambda: shape
    return lambda: tuple([d.poly(senv) if isinstance(d, SymInt) else d for d in shape])


def _gemm_worth(ins):
    """Whether a matmul is one the pool computes as a gemm job (`_matmul_step`): at most 4
    leading dims (c_pool.Gemm's)."""
    if ins.op != "matmul" or not plan_pass.placed_in_arena(ins) or len(ins.outputs[0].shape) > 6:
        return False
    o, a = ins.outputs[0], ins.inputs[0]
    return int(np.prod([int(d) for d in o.shape])) * int(a.shape[-1]) >= _threads.SPLIT_FLOPS


def _elements(ins):
    """The most elements any operand of an instruction has (what a split would share out)."""
    return max(int(np.prod([int(d) for d in v.shape])) for v in (*ins.inputs, *ins.outputs))


def _kernel_step(ins, fn, slots, in_place, made=frozenset(), sizes=None, senv=None, given=frozenset(),
                 pool=None, parts=1):
    """The call of a fused kernel: its operands' pointers in one array, `fn(that array)`.
    `made`: ids of values the runner itself makes (`Runner`): an input among them needs no
    layout check, and one in an arena slot (`slots`) has the same pointer at every call.
    `sizes`: the address of the dynamic sizes, the second argument of a kernel generated
    for symbolic sizes. `given`: ids of the program's inputs and constants: a parameter, an
    optimizer state or a learning rate is usually the very array of the last call, whose
    address and layout a kernel then need not read again (an array object keeps its data
    pointer for life; its shape and dtype are in the call's guards): the step keeps the
    last one it checked, which holds that array (an argument's last batch) until the next
    call. `fn`: the kernel, or (the kernel, its `_part` entry) (codegen/c.py); `parts` > 1:
    that entry runs in that many parts at once on `pool`, where the timing says so."""
    fn, part_fn = fn if isinstance(fn, tuple) else (fn, None)
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] if sizes is None else [ctypes.c_void_p, ctypes.c_void_p]
    call = (lambda: fn(addr)) if sizes is None else (lambda: fn(addr, sizes))
    if parts > 1 and pool is not None and part_fn is not None:
        run, part_addr = pool.run, ctypes.cast(part_fn, ctypes.c_void_p).value
        call = _tuned(call, lambda: run(part_addr, addr, sizes, parts))
    n_out = len(ins.outputs)
    fixed = [slots.get(v.id) for v in ins.outputs]        # arena outputs: same memory every call
    fresh = [(k, v.id, _shaper(v.shape, senv), v.dtype.np) for k, v in enumerate(ins.outputs)
             if fixed[k] is None and v.id not in in_place]
    into = [(k, v.id, _shaper(v.shape, senv), v.dtype.np, in_place[v.id]) for k, v in enumerate(ins.outputs)
            if fixed[k] is None and v.id in in_place]
    outs = [(v.id, a) for v, a in zip(ins.outputs, fixed) if a is not None]
    ptrs = (ctypes.c_void_p * (n_out + len(ins.inputs)))()
    for k, a in enumerate(fixed):
        if a is not None:
            ptrs[k] = a.ctypes.data
    ins_, trusted = [], []
    for k, v in enumerate(ins.inputs, start=n_out):
        if v.id in made and v.id in slots:
            ptrs[k] = slots[v.id].ctypes.data
        elif v.id in made:
            trusted.append((k, v.id))
        else:   # n: a given input's place in `checked`, None for another's
            ins_.append((k, v.id, v.dtype.np, len(ins_) if v.id in given else None))
    checked = [None] * len(ins_)   # the array each given input was last checked on
    took = [None] * len(into)      # the array each in-place output last computed into
    addr = ctypes.addressof(ptrs)
    empty, contiguous, ndarray = np.empty, np.ascontiguousarray, np.ndarray

    spare = [None] * n_out    # the last call's results: reused once the caller let go of them

    pointer = data_pointer

    def step(env):
        for k, i, shape, dt in fresh:
            a, shape = spare[k], shape()
            if a is None or getrefcount(a) > _HELD_BY_US or a.shape != shape:
                a = spare[k] = empty(shape, dt)
            env[i] = a
            ptrs[k] = pointer(a)
        for n, (k, i, shape, dt, dest) in enumerate(into):  # the array this value replaces, if it can take it
            a = env[dest]
            if a is took[n]:     # the same parameter (or state) array as at the last call
                env[i] = a
                continue
            shape = shape()
            # flags.carray: C-contiguous, aligned and writeable, in one read
            if a.__class__ is not ndarray or (a.dtype is not dt and a.dtype != dt) \
                    or a.shape != shape or not a.flags.carray:
                # the kernel reads that input through this pointer: a copy of it, then
                a = np.array(a, dtype=dt, order="C").reshape(shape)
                took[n] = None
            else:
                took[n] = a
            env[i] = a
            ptrs[k] = pointer(a)
        for i, a in outs:
            env[i] = a
        for k, i in trusted:
            ptrs[k] = pointer(env[i])
        keep = []   # contiguous copies must outlive the call
        for k, i, dt, n in ins_:
            a = env[i]
            if n is not None and a is checked[n]:
                continue
            if a.__class__ is not ndarray or (a.dtype is not dt and a.dtype != dt) \
                    or not a.flags.c_contiguous:
                a = contiguous(a, dtype=dt)
                keep.append(a)
                if n is not None:
                    checked[n] = None   # a copy: made again at the next call
            elif n is not None:
                checked[n] = a
            ptrs[k] = pointer(a)
        call()
    return step


def _tuned(whole, split):
    """A call that runs `whole` and `split` (the same kernel in one part or in several, the
    same bits either way) in turn for its first 2 * TUNE_CALLS calls, timing each, then
    keeps the faster: split only if it took at most SPLIT_GAIN of whole's best time. Where a
    split pays is the program's own business: a compute-bound kernel (GELU, softmax) runs
    ~1.6x faster in two parts, a memory-bound one whose operands sit in the first core's
    cache slower (measured on the dev machine: 1.2 -> 0.7 ms and 0.22 -> 0.29 ms)."""
    times = ([], [])
    chosen = []
    clock = time.perf_counter

    def call():
        if chosen:
            return chosen[0]()
        k = len(times[0]) > len(times[1])    # whole, split, whole, ...
        t = clock()
        (split if k else whole)()
        times[k].append(clock() - t)
        if len(times[1]) == _threads.TUNE_CALLS:
            chosen.append(split if min(times[1]) <= _threads.SPLIT_GAIN * min(times[0]) else whole)
    call.chosen = chosen   # what the tuning kept (tests read it)
    call.split = split
    return call


def _destination(ins, out):
    """() -> the array an instruction's one result is computed into: `out` (its arena
    slot), or, for a result handed to the caller (a weight gradient), the last call's
    result once the caller let go of it, else a new array."""
    if out is not None:
        return lambda: out
    shape, dt = tuple(ins.outputs[0].shape), ins.outputs[0].dtype.np
    spare = [None]

    def destination():
        o = spare[0]
        if o is None or getrefcount(o) > _HELD_BY_US:
            o = spare[0] = np.empty(shape, dt)
        return o
    return destination


def _matmul_step(ins, out, pool=None):
    """np.matmul into its destination (`_destination`); with a pool, as a gemm job of the
    pool's threads (`GemmJob`) when BLAS can read its operands' layout."""
    a_id, b_id = (v.id for v in ins.inputs)
    o_id = ins.outputs[0].id
    matmul, destination = np.matmul, _destination(ins, out)
    a, b, o = ins.inputs[0], ins.inputs[1], ins.outputs[0]
    gemm = pool.gemm(o.dtype.np) if pool is not None else None
    if gemm is None:
        def step(env):
            env[o_id] = matmul(env[a_id], env[b_id], out=destination())
        return step
    job = GemmJob(gemm, tuple(a.shape), tuple(b.shape), tuple(o.shape), o.dtype.np, pool.threads)
    run, part, parts = pool.run, pool.gemm_part, pool.threads
    addr = ctypes.addressof(job.args)

    def step(env):
        x, y, z = env[a_id], env[b_id], destination()
        if job.set(x, y, z):
            run(part, addr, None, parts)
        else:   # a layout BLAS cannot read as it is: NumPy's matmul (which copies)
            matmul(x, y, out=z)
        env[o_id] = z
    return step


class GemmJob:
    """The c_pool.Gemm arguments of one matmul a @ b -> out of fixed shapes, its pointers
    and strides set per call (`set`): whole matrices of the batch per part when there are
    at least as many as parts (attention's (B, H, T, T) products), else blocks of rows.
    Eager matmuls run as such jobs too (compiler/eager_gemm.py)."""

    def __init__(self, gemm, a, b, o, dtype, parts):
        from .c_pool import Gemm
        g = self.args = Gemm()
        g.gemm, g.ilp64 = gemm
        g.dbl = int(np.dtype(dtype) == np.float64)
        self.item = np.dtype(dtype).itemsize
        self.lead = o[:-2]
        self.n_lead = len(self.lead)
        g.nlead = self.n_lead   # <= 4: `_gemm_worth`
        g.M, g.K, g.N = o[-2], a[-1], o[-1]
        batch = int(np.prod(self.lead)) if self.lead else 1
        g.by_batch = int(batch >= parts)
        self.a_nd, self.b_nd = len(a), len(b)
        self._last = None

    def set(self, x, y, z):
        """Point the job at x @ y -> z; False if a layout or a broadcast is not BLAS's."""
        key = (data_pointer(x), data_pointer(y), data_pointer(z), x.strides, y.strides, z.strides)
        if key == self._last:
            return True
        g, item = self.args, self.item
        if x.ndim != self.a_nd or y.ndim != self.b_nd:
            return False
        la = _ld(x.strides[-2:], item, g.M, g.K)
        lb = _ld(y.strides[-2:], item, g.K, g.N)
        lc = _ld(z.strides[-2:], item, g.M, g.N)
        if la is None or lb is None or lc is None or lc[0] != 111:
            return False
        if not g.ilp64 and max(g.M, g.N, g.K, la[1], lb[1], lc[1]) >= 2 ** 31:
            return False   # a 32-bit BLAS cannot take these sizes: NumPy's matmul can
        (g.ta, g.lda), (g.tb, g.ldb), g.ldc = la, lb, lc[1]
        g.a_row = x.strides[-2]
        g.c_row = z.strides[-2]
        for d in range(g.nlead):
            g.lead[d] = self.lead[d]
            g.sa[d] = _lead_stride(x, d, self.n_lead)
            g.sb[d] = _lead_stride(y, d, self.n_lead)
            g.sc[d] = z.strides[d]
        g.A, g.B, g.C = key[0], key[1], key[2]
        self._last = key
        return True


def _ld(strides, item, rows, cols):
    """(trans, leading dimension) of a matrix of these byte strides for a row-major BLAS
    call: 111 with rows of contiguous elements, 112 for the transpose of such; None else."""
    sr, sc = strides
    if sc == item and sr % item == 0 and sr // item >= max(1, cols):
        return 111, sr // item
    if sr == item and sc % item == 0 and sc // item >= max(1, rows):
        return 112, sc // item
    if rows == 1 and sc == item:
        return 111, max(1, cols)
    if cols == 1 and sr == item:
        return 111, 1
    return None


def _lead_stride(x, d, n_lead):
    """x's byte stride along leading dim d of the output's n_lead (0 where x broadcasts)."""
    k = d - (n_lead - (x.ndim - 2))
    if k < 0 or x.shape[k] == 1:
        return 0
    return x.strides[k]


def _into_step(ins, out):
    """An op's `forward_into` (core/function.py) into its destination (`_destination`)."""
    in_ids = [v.id for v in ins.inputs]
    n_attr = len(ins.attr_inputs)    # the last inputs fill attributes (an index array of a key)
    o_id = ins.outputs[0].id
    into = c_index.step(ins) or ins.fn.forward_into   # an embedding's backward: a C loop
    attrs, ndarray, destination = ins.attrs, np.ndarray, _destination(ins, out)
    plain = compile_instr(ins)

    def step(env):
        arrays = [env[i] for i in in_ids]
        if arrays and arrays[0].__class__ is not ndarray:   # CuPy's, or a subclass's
            env[o_id] = plain(arrays)[0]
            return
        if n_attr:
            env[o_id] = into(destination(), *arrays[:-n_attr],
                             **fill_attrs(attrs, ins.attr_inputs, arrays[-n_attr:]))
        else:
            env[o_id] = into(destination(), *arrays, **attrs)
    return step


def _sized_step(ins, senv):
    """An instruction whose attributes hold formulas of the sizes (a reshape to (B*T, C), a
    slice up to the cache length), run with them evaluated for the call."""
    in_ids = [v.id for v in ins.inputs]
    out_ids = [v.id for v in ins.outputs]
    attrs = ins.attrs

    def step(env):
        now = dataclasses.replace(ins, attrs=evaluate(attrs, senv))
        env.update(zip(out_ids, run_instr(now, [env[i] for i in in_ids])))
    return step


def _view_step(ins):
    """A reshape or permute, as its forward computes it (the same NumPy call) without the
    interpreter's general path: these are a fifth of a training step's instructions and
    cost ~0.3 us this way against ~1.5 us."""
    i, o = ins.inputs[0].id, ins.outputs[0].id
    if ins.fn is Reshape:
        shape = ins.attrs["shape"]

        def step(env):
            env[o] = env[i].reshape(shape)
    else:
        dims = ins.attrs["dims"]

        def step(env):
            env[o] = env[i].transpose(dims)
    return step


def numpy_step(ins, bounds=(0, 0), senv=None):
    """Run `ins` by its Function's forward (the interpreter's step); results that start inside
    `bounds` (the arena's address range) are copied out. senv: the sizes of the call of a
    generic runner, which attributes holding formulas are evaluated at."""
    if senv is not None and contains_symbolic(ins.attrs):
        return _sized_step(ins, senv)
    # attribute inputs, saved side outputs and 0-d results are handled by run_instr, in one
    # place for every backend
    if ins.fn in _VIEWS and not ins.saved and not ins.attr_inputs and len(ins.inputs) == 1:
        return _view_step(ins)
    in_ids = [v.id for v in ins.inputs]
    out_ids = [v.id for v in ins.outputs]
    own = len(ins.outputs) - len(ins.saved)        # forward's results, before the saved ones
    check = not getattr(ins.fn, "is_view", False) and bounds[1] > bounds[0]
    lo, hi = bounds
    run = compile_instr(ins)

    def step(env):
        outs = run([env[i] for i in in_ids])
        if check:
            for k in range(own):
                a = outs[k]
                if a.__class__ is np.ndarray and a.size and lo <= data_pointer(a) < hi:
                    outs[k] = a.copy()   # memory of an arena slot the plan will reuse
        env.update(zip(out_ids, outs))
    return step
