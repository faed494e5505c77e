"""Tensor methods bound straight to their op functions (core/methods.py) and the array-level
gradients of the engine (core/engine.py): both exist for speed, neither may change results."""
import ast
import inspect

import numpy as np

import tinytensor as tt
import tinytensor.ops as ops
from tinytensor.ops import methods

# the torch names whose tinytensor op is spelled otherwise
ALIASES = {"abs": "absolute", "clip": "clamp", "round": "round_half_even"}


def _bound():
    """{method: op} as the class body of TensorMethods writes it (`exp, log = _ops("exp log")`),
    read from the source: once used, the descriptors have given way to the functions."""
    body = next(n for n in ast.parse(inspect.getsource(methods)).body
                if isinstance(n, ast.ClassDef) and n.name == "TensorMethods").body
    table = {}
    for node in body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and getattr(node.value.func, "id", None) == "_ops":
            names = [t.id for t in node.targets[0].elts]
            ops_ = node.value.args[0].value.split()
            assert len(names) == len(ops_), names
            table.update(zip(names, ops_))
    return table


def test_bound_methods_are_the_op_functions_themselves():
    bound = _bound()
    assert len(bound) > 100 and bound["__mul__"] == "mul"
    for name, op in bound.items():
        assert getattr(tt.Tensor, name) is getattr(ops, op), name
        assert isinstance(vars(methods.TensorMethods)[name], type(ops.add)), name  # resolved once


def test_a_bound_method_names_its_own_op_unless_torch_spells_it_otherwise():
    for name, op in _bound().items():
        if not name.startswith("__"):
            assert op == ALIASES.get(name, name), (name, op)


def test_bound_methods_keep_torch_keywords():
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.sum(dim=1, keepdim=True).shape == (2, 1)
    assert x.view(4).shape == (4,) and x.clip(min=2.0).tolist() == [[2.0, 2.0], [3.0, 4.0]]
    y = x.clone()
    y += 1.0
    assert y.tolist() == [[2.0, 3.0], [4.0, 5.0]] and (x == x).all()


def test_summed_0d_gradients_stay_arrays_on_the_array_path():
    # NumPy returns a scalar (np.float32) for 0-d + 0-d; handed on to SumTo's backward_arrays,
    # a scalar was taken for a CuPy array there
    a = tt.tensor(np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3), requires_grad=True)
    b = tt.tensor(2.0, requires_grad=True)
    (gb,) = tt.grad((a * b).sum(), b, create_graph=True)  # summed back to b's 0-d shape by SumTo
    (gb * gb + gb).backward()  # gb's gradient: the sum of three 0-d gradients
    assert a.grad.tolist() == [[43.0] * 3] * 2  # d/da of (sum a)^2 + sum a = 2 * 21 + 1
    assert type(a.grad.data) is np.ndarray


def test_hooks_and_retain_grad_see_tensors_on_the_array_path():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(type(g)) or g * 2.0)
    y.sum().backward()
    assert seen == [tt.Tensor] and y.grad.tolist() == [2.0, 2.0]  # after the hook, as in torch
    assert x.grad.tolist() == [6.0, 6.0]


def test_to_its_own_device_or_dtype_is_the_tensor_itself_else_a_new_one():
    # .to's one-argument shortcut returns self exactly where the general path does
    x = tt.tensor([1.0, 2.0])
    assert x.to(x.device) is x and x.to(tt.float32) is x and x.to("cpu") is x
    assert x.to(x.device, copy=True) is not x and x.to(tt.float32, copy=True) is not x
    y = x.to(tt.float64)
    assert y is not x and y.dtype is tt.float64 and y.tolist() == [1.0, 2.0]
