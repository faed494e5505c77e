"""dtypes and the type-promotion rules.

tinytensor has twelve dtypes: float16, float32 (the default floating type), float64,
int8, int16, int32, int64, uint8, uint16, uint32, uint64 and bool. Promotion follows
PyTorch:

1. Categories are ordered bool < integer < floating.
2. Among tensors with at least one dimension, the result is the widest dtype of the
   highest category present (int32 + int64 -> int64, float16 + float32 -> float32,
   int64 + float16 -> float16). uint8 with a signed integer gives the smallest signed
   dtype holding both (uint8 + int8 -> int16, uint8 + int32 -> int32).
   uint16, uint32 and uint64 promote only with themselves and with floating dtypes:
   torch refuses to mix them with other integer or bool tensors, and so does
   tinytensor (NumPy's answer, uint64 + int64 -> float64, would lose bits silently);
   cast one side explicitly.
3. Zero-dimensional tensors and Python scalars only matter when their category is
   higher than that of the dimensioned tensors: a 0-d float64 tensor times a float32
   matrix stays float32, but a 0-d float tensor times an int matrix is floating.
   A Python float then contributes the default float dtype, a Python int int64
   (uint64 from 2**63 up, as in torch), a Python bool bool; a 0-d tensor contributes
   its own dtype. Against an integer tensor a Python int is wrapped into the tensor's
   dtype (uint8 + 300 adds 44), as torch does.
4. True division (`/`) of integers gives the default float dtype.

bfloat16 is the thirteenth, stored through the `ml_dtypes` package (NumPy has no bfloat16;
ml_dtypes gives it a NumPy dtype that CuPy and safetensors understand too). It promotes as
in torch: bfloat16 + float16 -> float32 (neither holds the other), bfloat16 + float32 ->
float32, any integer or bool + bfloat16 -> bfloat16. Without ml_dtypes `tt.bfloat16` still
exists, and using it raises an ImportError naming `pip install ml_dtypes`.

complex64 (`cfloat`) and complex128 (`cdouble`) form a fourth category above floating
(issue 23). As in torch, real + complex gives the complex dtype of the wider precision
(float64 + complex64 -> complex128); a complex 0-d tensor or Python complex meeting
dimensioned floats takes their precision (float32 matrix + 0-d complex128 -> complex64),
and a Python complex contributes the complex dtype of the default float. torch's
complex32 (`chalf`) has no NumPy storage: it is refused by name, and float16 + complex
gives complex64 here where torch gives complex32.
"""
import numpy as np

try:  # optional: only bfloat16 needs it
    import ml_dtypes as _ml_dtypes
except ImportError:
    _ml_dtypes = None

from .messages import plain


class DType:
    __slots__ = ("name", "np", "category", "itemsize")

    def __init__(self, name, np_dtype, category):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category  # 0 bool, 1 integer, 2 floating, 3 complex
        self.itemsize = self.np.itemsize

    @property
    def is_floating_point(self):
        return self.category == 2

    @property
    def is_complex(self):
        return self.category == 3

    @property
    def is_signed(self):
        return self.category >= 2 or self.np.kind == "i"

    def to_real(self):
        """complex64 -> float32, complex128 -> float64; a real dtype is its own."""
        return _COMPLEX_TO_REAL.get(self, self)

    def to_complex(self):
        """float32 (and narrower floats) -> complex64, float64 -> complex128."""
        if self.category == 3:
            return self
        return complex128 if self is float64 else complex64

    def __repr__(self):
        return f"tinytensor.{self.name}"

    def __reduce__(self):  # dtypes are singletons, also after pickling
        return (from_any, (self.name,))


class _MissingDType(DType):
    """A dtype whose storage package is not installed: a clear error on first use."""
    __slots__ = ("_why",)

    def __init__(self, name, category, itemsize, why):
        self.name, self.category, self.itemsize, self._why = name, category, itemsize, why

    @property
    def np(self):
        raise ImportError(self._why)


bool_ = DType("bool", np.bool_, 0)
uint8 = DType("uint8", np.uint8, 1)
int8 = DType("int8", np.int8, 1)
int16 = DType("int16", np.int16, 1)
int32 = DType("int32", np.int32, 1)
int64 = DType("int64", np.int64, 1)
uint16 = DType("uint16", np.uint16, 1)
uint32 = DType("uint32", np.uint32, 1)
uint64 = DType("uint64", np.uint64, 1)
float16 = DType("float16", np.float16, 2)
float32 = DType("float32", np.float32, 2)
float64 = DType("float64", np.float64, 2)
complex64 = DType("complex64", np.complex64, 3)
complex128 = DType("complex128", np.complex128, 3)
_COMPLEX_TO_REAL = {complex64: float32, complex128: float64}
if _ml_dtypes is not None:
    bfloat16 = DType("bfloat16", _ml_dtypes.bfloat16, 2)
else:
    bfloat16 = _MissingDType("bfloat16", 2, 2, "tinytensor.bfloat16 needs the ml_dtypes package "
                             "(NumPy has no bfloat16): pip install ml_dtypes "
                             "(or pip install tinytensor[bf16])")

# the real dtypes NumPy stores natively; SUPPORTED adds bfloat16 where ml_dtypes is installed,
# and the complex ones
ALL = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, float32, float64)
COMPLEX = (complex64, complex128)
SUPPORTED = ALL + ((bfloat16,) if _ml_dtypes is not None else ()) + COMPLEX
# NumPy dtype of bfloat16 arrays (kind "V", not "f": test floatness with is_floating_np)
BF16_NP = bfloat16.np if _ml_dtypes is not None else None
# torch's "shell" unsigned dtypes: no promotion with other integer or bool dtypes
_UNPROMOTABLE = (uint16, uint32, uint64)
_BY_NUMPY = {d.np: d for d in SUPPORTED}
_BY_NAME = {d.name: d for d in SUPPORTED}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "long": int64,
                 "int": int32, "short": int16, "bool_": bool_, "bfloat16": bfloat16,
                 "cfloat": complex64, "cdouble": complex128, "complex": complex64})

_default_float = float32
_INT64_MAX = 2 ** 63 - 1


def get_default_dtype():
    return _default_float


def set_default_dtype(dtype):
    """Set the dtype of Python floats turned into tensors (float32 unless changed)."""
    global _default_float
    dtype = from_any(dtype)
    if not dtype.is_floating_point:
        raise TypeError(f"set_default_dtype: {dtype} is not a floating dtype")
    _default_float = dtype


def is_floating_np(np_dtype):
    """True for a floating NumPy/CuPy dtype, bfloat16 included (its kind is "V")."""
    return np_dtype.kind == "f" or np_dtype == BF16_NP


def finfo(np_dtype):
    """np.finfo that also knows bfloat16 (np.finfo refuses it)."""
    if np_dtype == BF16_NP:
        return _ml_dtypes.finfo(np_dtype)
    return np.finfo(np_dtype)


def _no_chalf():
    raise TypeError("complex32 (chalf) is not supported: NumPy has no complex32 to store it in; "
                    "use complex64 (cfloat) or complex128 (cdouble)")


def from_numpy_dtype(np_dtype):
    """The tinytensor dtype of a NumPy/CuPy array dtype (errors on unsupported ones)."""
    d = _BY_NUMPY.get(np_dtype)
    if d is not None:
        return d
    np_dtype = np.dtype(np_dtype)
    d = _BY_NUMPY.get(np_dtype)
    if d is not None:
        return d
    if np_dtype.kind in "iu":  # a platform alias (longlong, intc): the same-sized dtype
        return _BY_NUMPY[np.dtype(f"{np_dtype.kind}{np_dtype.itemsize}")]
    if np_dtype.kind == "f":
        return float64
    raise TypeError(f"unsupported array dtype {np_dtype}; tinytensor supports "
                    + ", ".join(d.name for d in SUPPORTED))


def from_any(dtype):
    """Accept a tinytensor dtype, a name ('float32'), a NumPy dtype or a Python type."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        name = dtype.replace("tinytensor.", "").replace("torch.", "")
        if name in ("complex32", "chalf"):
            _no_chalf()
        try:
            return _BY_NAME[name]
        except KeyError:
            raise TypeError(f"unknown dtype {plain(dtype)!r}; expected one of "
                            + ", ".join(d.name for d in SUPPORTED)) from None
    if dtype is float:
        return _default_float
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if dtype is complex:
        return _default_float.to_complex()
    return from_numpy_dtype(np.dtype(dtype))


def scalar_dtype(value):
    """The dtype a Python scalar contributes to promotion."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return uint64 if value > _INT64_MAX else int64  # as torch reads such a Python int
    if isinstance(value, (complex, np.complexfloating)):
        return _default_float.to_complex()
    return _default_float


def promote(a, b):
    """Promote two dtypes of the same standing (both dimensioned or both not)."""
    if a is b:
        return a
    if (a in _UNPROMOTABLE or b in _UNPROMOTABLE) and a.category != 2 and b.category != 2:
        raise RuntimeError(f"type promotion of {a.name} and {b.name} is not supported (as in "
                           "torch, uint16, uint32 and uint64 mix only with themselves and "
                           "real floating dtypes); cast one operand with .to(dtype)")
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == 3 and lo.category == 2 and lo.itemsize > hi.itemsize // 2:
            return complex128  # float64 + complex64: the complex of the wider precision
        return hi
    if a.category == 3:
        return a if a.itemsize >= b.itemsize else b
    if a.itemsize == b.itemsize == 2 and a.category == 2:  # bfloat16 with float16, as torch
        return float32
    if a.category == 1 and a.np.kind != b.np.kind:  # uint8 with a signed dtype: the signed dtype that holds both
        signed = a if a.np.kind == "i" else b
        return int16 if signed.itemsize == 1 else signed
    return a if a.itemsize >= b.itemsize else b


def result_type(*operands):
    """Result dtype of an elementwise op over tensors and Python scalars (rules above)."""
    tiers = [None, None, None]  # dimensioned tensors, 0-d tensors, Python scalars
    for x in operands:
        dt = getattr(x, "dtype", None)
        if isinstance(dt, DType):
            tier = 0 if x.ndim > 0 else 1
        else:
            dt, tier = scalar_dtype(x), 2
        tiers[tier] = dt if tiers[tier] is None else promote(tiers[tier], dt)
    result = None
    for dt in tiers:
        if dt is not None and (result is None or dt.category > result.category):
            if result is not None and dt.category == 3 and result.category == 2:
                # a complex 0-d tensor or scalar takes the dimensioned floats' precision
                result = result.to_complex()
                continue
            # promote, not just take dt: torch refuses bool with uint16/32/64 in any tier
            result = dt if result is None else promote(result, dt)
    return result
