"""`Tensor`: an array with a dtype, a device, and a place in the autograd graph.

This file holds what a tensor is (storage, dtype/device, grad, version counter,
conversions, autograd entry points); its ops are the methods of `TensorMethods`
(core/methods.py), each a one-line call into `tinytensor.ops`, where forward and
backward live.
"""
import weakref

import numpy as np

from ..dtypes import (bool_, float16, float32, float64, from_any, from_numpy_dtype,
                      get_default_dtype, int32, int64)
from ..dtypes import int8, int16, uint8, uint64, complex64, complex128
from ..dtypes import BF16_NP, bfloat16
from ..device import CPU, device_of_array, get_device, to_device_array
from .grad_mode import STATE
from .methods import TensorMethods


def _symbolic_sizes(shape):
    """Whether `shape` holds sizes tt.compile(dynamic=True) is capturing as formulas."""
    hooks = STATE.hooks
    return hooks.symbolic and any(hooks.is_size(d) for d in shape)


class Tensor(TensorMethods):
    __slots__ = ("data", "_device", "requires_grad", "grad", "grad_fn", "_out_index",
                 "_version", "_base", "_hooks", "name", "_fw", "__weakref__")
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__
    _level = None   # the vmap level of a batched tensor (func/batching.py); None: a plain one

    def __init__(self, data, dtype=None, device=None, requires_grad=False):
        dev = get_device(device) if device is not None else None
        arr, dev = to_array(data, dtype, dev)
        self._init(arr, dev)
        if requires_grad:
            self.requires_grad_(True)

    def _init(self, data, device):
        self.data = data
        self._device = device
        self.requires_grad = False
        self._no_history()

    def _no_history(self):
        """The fields of a tensor that no op has produced or changed yet (__init__,
        func.batching.wrap; _make writes them out)."""
        self.grad = None
        self.grad_fn = None
        self._out_index = 0
        self._version = [0, False]
        self._base = None
        self._hooks = None
        self.name = None
        self._fw = None   # forward-mode tangents: {dual level: Tensor} (tt.func.jvp), or None

    @classmethod
    def _make(cls, data, device, requires_grad):
        if isinstance(data, np.generic):  # NumPy ufuncs return scalars for 0-d inputs
            data = np.asarray(data)
        # the fields of _no_history written out: this is every op result's constructor, and
        # calling it costs ~100 ns, 3% of a small op (x + y of 64 floats: 3.0 us, 2-core EPYC)
        t = object.__new__(cls)
        t.data = data
        t._device = device
        t.requires_grad = requires_grad
        t.grad = None
        t.grad_fn = None
        t._out_index = 0
        t._version = [0, False]
        t._base = None
        t._hooks = None
        t.name = None
        t._fw = None
        return t

    @classmethod
    def _zeros_meta(cls, shape, dtype, device):
        if _symbolic_sizes(shape):
            return STATE.hooks.filled(0, shape, dtype, device)
        return cls._make(device.xp.zeros(shape, dtype=dtype.np), device, False)

    @classmethod
    def _ones_meta(cls, shape, dtype, device):
        if _symbolic_sizes(shape):
            return STATE.hooks.filled(1, shape, dtype, device)
        return cls._make(device.xp.ones(shape, dtype=dtype.np), device, False)

    # ------------------------------------------------------------------ fields
    @property
    def shape(self):
        hooks = STATE.hooks
        if hooks.symbolic:   # tt.compile(dynamic=True) capturing: the sizes' formulas
            return hooks.shape_of(self)
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    def dim(self):
        return self.data.ndim

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[dim]

    def numel(self):
        if STATE.hooks.symbolic:
            n = 1
            for d in self.shape:
                n = n * d
            return n
        return int(self.data.size)

    @property
    def dtype(self):
        return from_numpy_dtype(self.data.dtype)

    @property
    def device(self):
        return self._device

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def is_cuda(self):
        return self._device.type == "cuda"

    def is_floating_point(self):
        if self.data.dtype == BF16_NP:  # ml_dtypes' bfloat16 has kind "V"
            return True
        return self.data.dtype.kind == "f"

    def is_complex(self):
        return self.data.dtype.kind == "c"

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    @property
    def _version_number(self):
        return self._version[0]

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])   # a size turned into a number: pinned while capturing

    def __iter__(self):
        # without this, Python iterates via __getitem__ until IndexError: a 0-d tensor
        # would silently iterate as empty
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.data.shape[0]))

    def __contains__(self, element):
        return bool((self == element).any())

    # ------------------------------------------------------------------ conversion
    def numpy(self):
        STATE.hooks.read_value(self, ".numpy()")
        if self.requires_grad:
            raise RuntimeError("numpy(): tensor requires grad; call .detach().numpy()")
        return self.data if self._device is CPU else self.data.get()

    def item(self, _what="item()"):
        STATE.hooks.read_value(self, _what)   # a value in Python would be frozen by the compiler
        if self.numel() != 1:
            raise ValueError(f"item(): only one-element tensors can be converted to Python "
                             f"scalars, this one has shape {tuple(self.shape)}")
        return self.data.reshape(()).item() if self._device is CPU else self.data.get().reshape(()).item()

    def tolist(self):
        STATE.hooks.read_value(self, ".tolist()")
        return to_device_array(self.data, CPU).tolist()

    def __float__(self):
        return float(self.item("float()"))

    def __int__(self):
        return int(self.item("int()"))

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is "
                               "ambiguous; use .any() or .all()")
        return bool(self.item("bool()"))

    def __index__(self):
        if self.data.dtype.kind not in "iu" or self.numel() != 1:
            raise TypeError("only integer tensors of one element can be used as an index")
        return int(self.item("use as an index"))

    def __array__(self, dtype=None, copy=None):
        STATE.hooks.read_value(self, "conversion to a NumPy array")
        a = to_device_array(self.data, CPU)
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export this tensor's memory, zero-copy, to `torch/np/cupy.from_dlpack` (tinytensor/interop.py)."""
        STATE.hooks.read_value(self, "__dlpack__")
        if self.requires_grad:  # the consumer's ops would bypass autograd, as torch refuses too
            raise BufferError(f"__dlpack__: cannot export a tensor that requires grad (shape "
                              f"{tuple(self.shape)}); export t.detach() instead")
        strides = tuple(s // self.data.itemsize for s in self.data.strides)
        if any(s < 0 for s in strides):  # torch aborts the process on these
            raise BufferError(f"__dlpack__: tensor of shape {tuple(self.shape)} has negative strides "
                              f"{strides} (a reversed NumPy view), which DLPack consumers cannot take; "
                              "export t.contiguous() instead")
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                    ("dl_device", dl_device), ("copy", copy)) if v is not None}
        if self.data.dtype == BF16_NP and self._device is CPU:  # NumPy's DLPack refuses this user dtype
            from .._dlpack_capsule import export_bf16
            return export_bf16(self.data, **kwargs)
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    def cpu(self):
        return self.to("cpu")

    def cuda(self, index=None, non_blocking=False):  # non_blocking accepted for torch code; copies are synchronous
        return self.to("cuda" if index is None else f"cuda:{index}")

    def float(self, memory_format=None):
        return self.to(float32, memory_format=memory_format)

    def double(self, memory_format=None):
        return self.to(float64, memory_format=memory_format)

    def half(self, memory_format=None):
        return self.to(float16, memory_format=memory_format)

    def bfloat16(self, memory_format=None):
        return self.to(bfloat16, memory_format=memory_format)

    def cfloat(self, memory_format=None):
        return self.to(complex64, memory_format=memory_format)

    def cdouble(self, memory_format=None):
        return self.to(complex128, memory_format=memory_format)

    def long(self, memory_format=None):
        return self.to(int64, memory_format=memory_format)

    def int(self, memory_format=None):
        return self.to(int32, memory_format=memory_format)

    def short(self, memory_format=None):
        return self.to(int16, memory_format=memory_format)

    def char(self, memory_format=None):
        return self.to(int8, memory_format=memory_format)

    def byte(self, memory_format=None):
        return self.to(uint8, memory_format=memory_format)

    def bool(self, memory_format=None):
        return self.to(bool_, memory_format=memory_format)

    def type_as(self, other):
        return self.to(other.dtype)

    # ------------------------------------------------------------------ autograd
    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.data.dtype.kind not in "fc" and self.data.dtype != BF16_NP:
            raise RuntimeError(f"requires_grad_: only floating-point tensors can require "
                               f"gradients (and complex ones), this one is {self.dtype.name}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor; use .detach()")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self):
        t = Tensor._make(self.data, self._device, False)
        t._version = self._version  # shares memory, so shares the version counter
        t._base = self._base if self._base is not None else self
        return t

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into the .grad of every leaf that requires grad."""
        from .engine import _default_grad, run_backward  # the engine makes Tensors: it imports this module
        g = _default_grad(self, gradient, "backward")
        graph = None
        if STATE.hooks.capturing:
            # the compiler captures the backward as ops, as create_graph records it; those ops
            # build a graph of their own (saving their inputs) only if create_graph asked it
            graph, create_graph = create_graph, True
        if retain_graph is None:
            retain_graph = create_graph
        if inputs is not None:
            inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
            grads = run_backward([self], [g], retain_graph, create_graph, inputs=inputs,
                                 allow_unused=True, graph=graph)
            for t, gt in zip(inputs, grads):
                if gt is not None:
                    t.grad = gt if t.grad is None else t.grad + gt
            return
        run_backward([self], [g], retain_graph, create_graph, graph=graph)

    def retain_grad(self):
        """Keep .grad on a non-leaf tensor after backward."""
        if self.grad_fn is None:
            return
        node = self.grad_fn
        if node.retained is None:
            node.retained = {}
        node.retained[self._out_index] = weakref.ref(self)

    @property
    def retains_grad(self):
        n = self.grad_fn
        return n is not None and bool(n.retained) and self._out_index in n.retained

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a returned tensor replaces it."""
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require grad")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = []
            hooks = self._hooks
        else:
            node = self.grad_fn
            if node.out_hooks is None:
                node.out_hooks = {}
            hooks = node.out_hooks.setdefault(self._out_index, [])
        hooks.append(hook)

        class _Handle:
            def remove(self_inner):
                if hook in hooks:
                    hooks.remove(hook)
        return _Handle()

    # ------------------------------------------------------------------ printing
    def __repr__(self):
        arr = to_device_array(self.data, CPU)
        extras = []
        if self._device is not CPU:
            extras.append(f"device='{self._device}'")
        default_shown = {"float32", "int64", "bool", "complex64"}
        dt = self.dtype
        if arr.size == 0:
            body = "[]"
            if arr.ndim > 1 or dt.name not in default_shown:
                extras.insert(0, f"size={tuple(arr.shape)}")
        elif dt.category == 3:
            from .complex_print import complex_body   # printing only: kept out of this file
            body = complex_body(arr)
        elif dt.category == 2:
            if arr.dtype == BF16_NP:  # NumPy's printer does not see ml_dtypes' bfloat16 as a float
                arr = arr.astype(np.float32)  # exact: every bfloat16 is a float32
            finite = arr[np.isfinite(arr)].astype(np.float64)  # float16 would overflow at 1e8
            is_int = finite.size == 0 or np.all(finite == np.round(finite))
            big = finite.size and (np.abs(finite).max() >= 1e8 or
                                   (np.abs(finite[finite != 0]).min() < 1e-4 if np.any(finite != 0) else False))
            if is_int and not big:
                fmt = {"float_kind": lambda v: _fmt_int_float(v)}
                body = np.array2string(arr, separator=", ", prefix="tensor(", formatter=fmt)
            elif big:
                body = np.array2string(arr, separator=", ", prefix="tensor(", precision=4,
                                       floatmode="fixed", formatter={"float_kind": lambda v: f"{v:.4e}"})
            else:
                body = np.array2string(arr, separator=", ", prefix="tensor(", precision=4,
                                       floatmode="fixed")
        else:
            body = np.array2string(arr, separator=", ", prefix="tensor(")
        if dt.name not in default_shown:
            extras.append(f"dtype=tinytensor.{dt.name}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __str__(self):
        return self.__repr__()

    def __hash__(self):
        return id(self)

    def __reduce__(self):
        return (_rebuild, (to_device_array(self.data, CPU), str(self._device), self.requires_grad))



def _fmt_int_float(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{int(v)}."


def _rebuild(arr, device, requires_grad):
    t = Tensor(arr, device=device)
    t.requires_grad = requires_grad
    return t



def to_array(data, dtype, device):
    """An array for `data` on `device` (default: where data lives, else cpu)."""
    if isinstance(data, Tensor):
        data = data.data
    dt = from_any(dtype) if dtype is not None else None
    if isinstance(data, np.generic):  # np.float64(2.0) keeps its dtype, as in torch
        data = np.asarray(data)
    if isinstance(data, np.ndarray) or type(data).__module__.startswith("cupy"):
        src_dev = device_of_array(data)
        device = device or src_dev
        arr = data
        if dt is None:
            dt = from_numpy_dtype(arr.dtype)
    else:
        device = device or CPU
        try:
            arr = np.asarray(data)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"tensor: cannot build a tensor from {type(data).__name__} data: "
                             f"{e}") from None
        if dt is uint64 and arr.dtype.kind == "f":  # ints past 2**63: NumPy chose float64, inexact
            arr = np.asarray(data, dtype=np.uint64)
        if dt is None:
            kind = arr.dtype.kind
            if kind == "f":
                dt = get_default_dtype()  # Python floats -> float32, like torch
            elif kind == "c":
                dt = get_default_dtype().to_complex()  # Python complex -> complex64, like torch
            elif kind in "iu":
                dt = int64
            elif kind == "b":
                dt = bool_
            elif arr.dtype == object or kind in "USO":
                raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} data "
                                f"(NumPy sees dtype {arr.dtype}); ragged or non-numeric input?")
            else:
                dt = from_numpy_dtype(arr.dtype)
    arr = to_device_array(arr, device)
    if arr.dtype != dt.np:
        arr = arr.astype(dt.np)
    return arr, device
