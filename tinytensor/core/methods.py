"""Every Tensor op method and operator, written out: each is one call into `tinytensor.ops`
(names and signatures follow PyTorch). `Tensor` (core/tensor.py) inherits them, so an IDE
jumps from `x.sum` here and on to `ops.sum`."""


class _Ops:
    """The `tinytensor.ops` namespace, bound on first use. ops import core, so core cannot
    import ops while it loads; the first attribute read imports them and copies their
    names into this object, so every later `ops.add` is a plain attribute read."""

    def __getattr__(self, name):
        import tinytensor.ops as namespace  # at first use: ops import core, so not at load time
        self.__dict__.update((k, v) for k, v in vars(namespace).items() if not k.startswith("__"))
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"tinytensor.ops has no op {name!r}") from None


ops = _Ops()


class TensorMethods:
    __slots__ = ()

    def add(self, b, alpha=None):
        return ops.add(self, b, alpha)

    def sub(self, b, alpha=None):
        return ops.sub(self, b, alpha)

    def mul(self, b):
        return ops.mul(self, b)

    def div(self, b, rounding_mode=None):
        return ops.div(self, b, rounding_mode)

    def pow(self, exponent):
        return ops.pow(self, exponent)

    def neg(self):
        return ops.neg(self)

    def __add__(self, other):
        return ops.add(self, other)

    def __sub__(self, other):
        return ops.sub(self, other)

    def __mul__(self, other):
        return ops.mul(self, other)

    def __truediv__(self, other):
        return ops.div(self, other)

    def __pow__(self, exponent):
        return ops.pow(self, exponent)

    def __neg__(self):
        return ops.neg(self)

    def __matmul__(self, other):
        return ops.matmul(self, other)

    def __abs__(self):
        return ops.abs_(self)

    def __eq__(self, other):
        return ops.eq(self, other)

    def __ne__(self, other):
        return ops.ne(self, other)

    def __lt__(self, other):
        return ops.lt(self, other)

    def __le__(self, other):
        return ops.le(self, other)

    def __gt__(self, other):
        return ops.gt(self, other)

    def __ge__(self, other):
        return ops.ge(self, other)

    def __and__(self, other):
        return ops.bitwise_and(self, other)

    def __or__(self, other):
        return ops.bitwise_or(self, other)

    def __xor__(self, other):
        return ops.bitwise_xor(self, other)

    def __invert__(self):  # logical on bool, as in torch
        return ops.bitwise_not(self)

    def __mod__(self, other):
        return ops.remainder(self, other)

    def remainder(self, b):
        return ops.remainder(self, b)

    def __getitem__(self, key):
        return ops.getitem(self, key)

    def __setitem__(self, key, value):
        return ops.setitem(self, key, value)

    def exp(self):
        return ops.exp(self)

    def log(self):
        return ops.log(self)

    def log1p(self):
        return ops.log1p(self)

    def sqrt(self):
        return ops.sqrt(self)

    def rsqrt(self):
        return ops.rsqrt(self)

    def abs(self):
        return ops.abs_(self)

    def sign(self):
        return ops.sign(self)

    def sin(self):
        return ops.sin(self)

    def cos(self):
        return ops.cos(self)

    def tanh(self):
        return ops.tanh(self)

    def sigmoid(self):
        return ops.sigmoid(self)

    def relu(self):
        return ops.relu(self)

    def erf(self):
        return ops.erf(self)

    def square(self):
        return ops.square(self)

    def reciprocal(self):
        return ops.reciprocal(self)

    def maximum(self, b):
        return ops.maximum(self, b)

    def minimum(self, b):
        return ops.minimum(self, b)

    def clamp(self, min=None, max=None):
        return ops.clamp(self, min, max)

    def clip(self, min=None, max=None):
        return ops.clamp(self, min, max)

    def eq(self, b):
        return ops.eq(self, b)

    def ne(self, b):
        return ops.ne(self, b)

    def lt(self, b):
        return ops.lt(self, b)

    def le(self, b):
        return ops.le(self, b)

    def gt(self, b):
        return ops.gt(self, b)

    def ge(self, b):
        return ops.ge(self, b)

    def logical_and(self, b):
        return ops.logical_and(self, b)

    def logical_or(self, b):
        return ops.logical_or(self, b)

    def logical_not(self):
        return ops.logical_not(self)

    def logical_xor(self, b):
        return ops.logical_xor(self, b)

    def isfinite(self):
        return ops.isfinite(self)

    def isnan(self):
        return ops.isnan(self)

    def isinf(self):
        return ops.isinf(self)

    def sum(self, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
        return ops.sum(self, dim, keepdim, dtype, axis, keepdims)

    def mean(self, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
        return ops.mean(self, dim, keepdim, dtype, axis, keepdims)

    def prod(self, dim=None, keepdim=False, dtype=None, axis=None, keepdims=None):
        return ops.prod(self, dim, keepdim, dtype, axis, keepdims)

    def max(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.max(self, dim, keepdim, axis, keepdims)

    def min(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.min(self, dim, keepdim, axis, keepdims)

    def amax(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.amax(self, dim, keepdim, axis, keepdims)

    def amin(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.amin(self, dim, keepdim, axis, keepdims)

    def argmax(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.argmax(self, dim, keepdim, axis, keepdims)

    def argmin(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.argmin(self, dim, keepdim, axis, keepdims)

    def var(self, dim=None, unbiased=None, keepdim=False, correction=None, axis=None, keepdims=None):
        return ops.var(self, dim, unbiased, keepdim, correction, axis, keepdims)

    def std(self, dim=None, unbiased=None, keepdim=False, correction=None, axis=None, keepdims=None):
        return ops.std(self, dim, unbiased, keepdim, correction, axis, keepdims)

    def logsumexp(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.logsumexp(self, dim, keepdim, axis, keepdims)

    def norm(self, p=2, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.norm(self, p, dim, keepdim, axis, keepdims)

    def all(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.all(self, dim, keepdim, axis, keepdims)

    def any(self, dim=None, keepdim=False, axis=None, keepdims=None):
        return ops.any(self, dim, keepdim, axis, keepdims)

    def cumsum(self, dim=None, dtype=None, axis=None):
        return ops.cumsum(self, dim, dtype, axis)

    def reshape(self, *shape):
        return ops.reshape(self, *shape)

    def view(self, *shape):
        return ops.reshape(self, *shape)

    def flatten(self, start_dim=0, end_dim=-1):
        return ops.flatten(self, start_dim, end_dim)

    def unflatten(self, dim, sizes):
        return ops.unflatten(self, dim, sizes)

    def squeeze(self, dim=None):
        return ops.squeeze(self, dim)

    def unsqueeze(self, dim):
        return ops.unsqueeze(self, dim)

    def permute(self, *dims):
        return ops.permute(self, *dims)

    def transpose(self, dim0, dim1):
        return ops.transpose(self, dim0, dim1)

    def movedim(self, source, destination):
        return ops.movedim(self, source, destination)

    def expand(self, *sizes):
        return ops.expand(self, *sizes)

    def broadcast_to(self, shape):
        return ops.broadcast_to(self, shape)

    def repeat(self, *sizes):
        return ops.repeat(self, *sizes)

    def tile(self, *dims):
        return ops.tile(self, *dims)

    def repeat_interleave(self, repeats, dim=None):
        return ops.repeat_interleave(self, repeats, dim)

    def split(self, split_size_or_sections, dim=0):
        return ops.split(self, split_size_or_sections, dim)

    def chunk(self, chunks, dim=0):
        return ops.chunk(self, chunks, dim)

    def unbind(self, dim=0):
        return ops.unbind(self, dim)

    def flip(self, dims):
        return ops.flip(self, dims)

    def roll(self, shifts, dims=None):
        return ops.roll(self, shifts, dims)

    def tril(self, diagonal=0):
        return ops.tril(self, diagonal)

    def triu(self, diagonal=0):
        return ops.triu(self, diagonal)

    def contiguous(self):
        return ops.contiguous(self)

    def gather(self, dim, index):
        return ops.gather(self, dim, index)

    def scatter_add(self, dim, index, src):
        return ops.scatter_add(self, dim, index, src)

    def masked_fill(self, mask, value):
        return ops.masked_fill(self, mask, value)

    def index_select(self, dim, index):
        return ops.index_select(self, dim, index)

    def matmul(self, b):
        return ops.matmul(self, b)

    def softmax(self, dim=-1, dtype=None):
        return ops.softmax(self, dim, dtype)

    def log_softmax(self, dim=-1, dtype=None):
        return ops.log_softmax(self, dim, dtype)

    def floor(self):
        return ops.floor(self)

    def ceil(self):
        return ops.ceil(self)

    def trunc(self):
        return ops.trunc(self)

    def round(self):
        return ops.round_(self)

    def multinomial(self, num_samples, replacement=False):
        return ops.multinomial(self, num_samples, replacement)

    def sort(self, dim=-1, descending=False, stable=True):
        return ops.sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=True):
        return ops.argsort(self, dim, descending, stable)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        return ops.topk(self, k, dim, largest, sorted)

    def t(self):
        return ops.t(self)

    def narrow(self, dim, start, length):
        return ops.narrow(self, dim, start, length)

    def select(self, dim, index):
        return ops.select(self, dim, index)

    def mm(self, b):
        return ops.mm(self, b)

    def bmm(self, b):
        return ops.bmm(self, b)

    def add_(self, other, alpha=None):
        return ops.add_(self, other, alpha)

    def sub_(self, other, alpha=None):
        return ops.sub_(self, other, alpha)

    def mul_(self, other):
        return ops.mul_(self, other)

    def div_(self, other):
        return ops.div_(self, other)

    def zero_(self):
        return ops.zero_(self)

    def fill_(self, value):
        return ops.fill_(self, value)

    def copy_(self, src):
        return ops.copy_(self, src)

    def clamp_(self, min=None, max=None):
        return ops.clamp_(self, min, max)

    def masked_fill_(self, mask, value):
        return ops.masked_fill_(self, mask, value)

    # ------------------------------------------------------------------ reflected and derived forms
    def __radd__(self, other):
        return ops.add(other, self)

    def __rsub__(self, other):
        return ops.sub(other, self)

    def __rmul__(self, other):
        return ops.mul(other, self)

    def __rtruediv__(self, other):
        return ops.div(other, self)

    def __rpow__(self, other):
        return ops.pow(other, self)

    def __rmatmul__(self, other):
        return ops.matmul(other, self)

    def __floordiv__(self, other):
        return ops.div(self, other, rounding_mode="floor")

    def __rfloordiv__(self, other):
        return ops.div(other, self, rounding_mode="floor")

    def __rand__(self, other):
        return ops.bitwise_and(other, self)

    def __ror__(self, other):
        return ops.bitwise_or(other, self)

    def __rxor__(self, other):
        return ops.bitwise_xor(other, self)

    def __rmod__(self, other):
        return ops.remainder(other, self)

    def __iadd__(self, other):
        return ops.add_(self, other)

    def __isub__(self, other):
        return ops.sub_(self, other)

    def __imul__(self, other):
        return ops.mul_(self, other)

    def __itruediv__(self, other):
        return ops.div_(self, other)

    def where(self, condition, other):
        return ops.where(condition, self, other)

    def expand_as(self, other):
        return ops.expand(self, *other.shape)

    def view_as(self, other):
        return ops.reshape(self, other.shape)

    def reshape_as(self, other):
        return ops.reshape(self, other.shape)

    # ------------------------------------------------------------------ new tensors like this one
    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return ops.zeros(*size, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return ops.ones(*size, dtype=dtype or self.dtype, device=device or self.device,
                        requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return ops.full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                        requires_grad=requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return ops.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                          requires_grad=requires_grad)
