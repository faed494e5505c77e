"""DLPack capsules for bfloat16, patched and read with ctypes.

NumPy's DLPack refuses ml_dtypes' bfloat16 (a user dtype) both ways, although DLPack has a
bfloat16 type (code kDLBfloat = 4, 16 bits, 1 lane). Every other dtype goes through NumPy.

Out (`export_bf16`): NumPy exports a uint16 view of the array and the capsule's dtype is
rewritten to bfloat16 before anyone sees it, so NumPy's own C capsule destructor and
deleter free it. They keep an exception in flight; a ctypes callback cannot (a Python
callable that returns while an exception is set becomes a SystemError), and consumers do
free capsules and tensors mid-exception: NumPy refusing the capsule, or the temporary in
`torch.from_dlpack(t) + "x"`, which would then fail with "SystemError: error return
without exception set" instead of the TypeError.
In (`import_bf16`): the producer's capsule is read here; a NumPy uint16 array over its
memory, viewed as bfloat16, owns it, and a Python `__del__` calls the producer's deleter.
The structs and capsule names follow dlpack.h (v1.0) and the Python specification:
https://dmlc.github.io/dlpack/latest/python_spec.html
"""
import ctypes
from ctypes import POINTER, Structure, c_char_p, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

import numpy as np

from .dtypes import bfloat16

CPU_DEVICES = {1: "CPU", 3: "CUDA host (pinned)"}  # DLPack device types whose memory the CPU reads
_UINT, _BFLOAT = 1, 4                              # kDLUInt, kDLBfloat
_READ_ONLY = 1                                     # DLManagedTensorVersioned.flags bit
_VERSION = (1, 0)                                  # the DLPack version of the structs below


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):      # the legacy "dltensor" capsule's pointer
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):  # the "dltensor_versioned" capsule's pointer
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p),
                ("flags", c_uint64), ("dl_tensor", DLTensor)]


_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
_call_deleter = ctypes.PYFUNCTYPE(None, c_void_p)  # calls a producer's deleter holding the GIL

NAME, NAME_V = b"dltensor", b"dltensor_versioned"
# A capsule keeps a pointer to its name, not a copy, and may outlive this module at exit.
_USED, _USED_V = b"used_dltensor", b"used_dltensor_versioned"
for _name in (_USED, _USED_V):
    _api.Py_IncRef(ctypes.py_object(_name))


def _managed(capsule):
    """(the DLManagedTensor(Versioned) of an unconsumed capsule, whether it is versioned, address)."""
    versioned = bool(_api.PyCapsule_IsValid(capsule, NAME_V))
    if not versioned and not _api.PyCapsule_IsValid(capsule, NAME):
        return None, versioned, None
    address = _api.PyCapsule_GetPointer(capsule, NAME_V if versioned else NAME)
    return (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(address), versioned, address


def export_bf16(arr, **kwargs):
    """A DLPack capsule ("dltensor", or "dltensor_versioned" for max_version >= (1, 0)) viewing
    the bfloat16 CPU array `arr`; kwargs are those of ndarray.__dlpack__."""
    capsule = arr.view(np.uint16).__dlpack__(**kwargs)
    managed, _, _ = _managed(capsule)
    dtype = managed.dl_tensor.dtype
    if (dtype.code, dtype.bits, dtype.lanes) != (_UINT, 16, 1):  # NumPy's capsule is not what we patch
        raise BufferError(f"__dlpack__: NumPy exported the uint16 view of a bfloat16 tensor of shape "
                          f"{tuple(arr.shape)} as DLPack type code {dtype.code}, {dtype.bits} bits, "
                          f"{dtype.lanes} lanes, not uint16")
    dtype.code = _BFLOAT
    return capsule


class _Imported:
    """Base of a NumPy array over a producer's memory: calls the producer's deleter when the
    last array viewing the memory dies (a Python __del__ keeps any exception in flight)."""
    __slots__ = ("__array_interface__", "_managed", "_deleter")

    def __init__(self, interface, managed, deleter):
        self.__array_interface__, self._managed = interface, managed
        # bound now: at interpreter exit __del__ may run after this module's globals are gone
        self._deleter = _call_deleter(deleter) if deleter else None  # DLPack allows a NULL deleter

    def __del__(self):
        if self._deleter is not None:
            self._deleter(self._managed)


def import_bf16(x, what):
    """A NumPy bfloat16 array sharing the memory of `x`'s DLPack capsule, or None when the
    capsule does not hold bfloat16 (then the producer frees it, unconsumed)."""
    try:
        capsule = x.__dlpack__(max_version=_VERSION)
    except TypeError:  # a producer from before DLPack 1.0 takes no max_version
        capsule = x.__dlpack__()
    managed, versioned, address = _managed(capsule)
    if managed is None:
        raise BufferError(f"tt.from_dlpack: {what}.__dlpack__() returned {capsule!r}, not a "
                          "capsule named 'dltensor' or 'dltensor_versioned' (already consumed?)")
    if versioned and managed.version.major != _VERSION[0]:
        raise BufferError(f"tt.from_dlpack: {what} exported DLPack {managed.version.major}."
                          f"{managed.version.minor}; tinytensor reads DLPack 1.x")
    t = managed.dl_tensor
    if t.dtype.code != _BFLOAT:
        return None
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if (t.dtype.bits, t.dtype.lanes) != (16, 1):
        raise TypeError(f"tt.from_dlpack: {what} of shape {shape} has DLPack bfloat type with "
                        f"{t.dtype.bits} bits and {t.dtype.lanes} lanes; tinytensor reads "
                        "bfloat16 (16 bits, 1 lane)")
    if t.device.device_type not in CPU_DEVICES:
        raise TypeError(f"tt.from_dlpack: {what} of shape {shape} and dtype bfloat16 is on DLPack "
                        f"device type {t.device.device_type}; tinytensor reads bfloat16 from CPU memory")
    if t.strides:
        strides = tuple(2 * t.strides[i] for i in range(t.ndim))
    else:  # NULL strides mean compact row-major
        strides = tuple(2 * int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
    bf16 = bfloat16.np  # an ImportError naming ml_dtypes when that is missing
    read_only = versioned and bool(managed.flags & _READ_ONLY)
    # From here the memory is ours: the spec's rename stops the capsule freeing it.
    _api.PyCapsule_SetName(capsule, _USED_V if versioned else _USED)
    owner = _Imported({"version": 3, "shape": shape, "typestr": "<u2", "strides": strides,
                       "data": ((t.data or 0) + t.byte_offset, read_only)}, address, managed.deleter)
    return np.asarray(owner).view(bf16)
