"""The compiler's IR: an SSA program of primitive ops, read off a recorded tape.

Every `Value` is defined once: as a program input (an argument or a parameter), as a
constant, or as an output of one `Instr`. An `Instr` is one tape node: its op name, the
`Function` class that implements it (so the NumPy interpreter can run any op exactly as
eager does, through `fn.forward`), its attributes, its input and output Values, the
module path it ran under and its role in the step (forward, backward or optimizer).

A pass takes a Program and returns a new one (`Program.replace`); nothing is mutated in
place, so every stage can be compared with the one before it by the interpreter.
A fused kernel is an Instr whose op is "fused" and whose `attrs["body"]` is a Program of
its own: the instructions it replaced, with the kernel's inputs as that Program's inputs.
"""
import dataclasses
import itertools
import math

_ids = itertools.count()

ROLES = ("forward", "backward", "optimizer")
KINDS = ("input", "param", "const", "value")


@dataclasses.dataclass(eq=False)
class Value:
    """One SSA value: shape (ints, or str symbols for dynamic dims) and dtype."""
    shape: tuple
    dtype: object            # a tinytensor DType
    kind: str = "value"      # "input" (argument), "param" (leaf the step reads or updates),
    #                          "const" (array baked in), "value" (defined by an Instr)
    name: str = ""           # a readable name: argument or parameter name, else empty
    id: int = dataclasses.field(default_factory=lambda: next(_ids))

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"ir.Value: kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        label = self.name or f"v{self.id}"
        return f"%{label}[{', '.join(map(str, self.shape))}] {self.dtype.name}"


def nbytes(v):
    """Bytes of a Value's array; 0 where a dim is symbolic (its size is not known yet)."""
    return math.prod(v.shape) * v.dtype.itemsize if all(isinstance(d, int) for d in v.shape) else 0


@dataclasses.dataclass(eq=False)
class Instr:
    """One op application: `outputs = fn(*inputs, **attrs)`."""
    op: str
    fn: object               # the Function subclass (None for "fused": see attrs["body"])
    inputs: list
    outputs: list
    attrs: dict = dataclasses.field(default_factory=dict)
    scope: str = ""          # module path, e.g. "h.0.attn"
    role: str = "forward"
    saved: tuple = ()        # positions in what forward passed to ctx.save_for_backward whose
    #                          arrays are outputs too, after forward's own: an array computed on
    #                          the side (layer norm's rstd) that the captured backward reads
    attr_inputs: tuple = ()  # paths into attrs (("key", 0): attrs["key"][0]) of arrays that are
    #                          values of the program (a tensor index): the last len(attr_inputs)
    #                          inputs fill them at run time; attrs hold None there

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"ir.Instr {self.op}: role must be one of {ROLES}, got {self.role!r}")


@dataclasses.dataclass(eq=False)
class Program:
    """inputs (arguments and parameters, in call order), constants (Value -> array),
    instructions in a valid execution order, and outputs."""
    inputs: list
    instrs: list
    outputs: list
    consts: dict = dataclasses.field(default_factory=dict)
    # the memory plan of its intermediates, set by the C backend's last stage (passes/plan.py
    # `run`): a plan.MemoryPlan, plan.AT_SIZES for symbolic sizes, None before it ran
    memory: object = None

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def defined(self):
        """Every Value defined in this program: inputs, constants, instruction outputs."""
        out = list(self.inputs) + list(self.consts)
        for ins in self.instrs:
            out.extend(ins.outputs)
        return out

    def verify(self):
        """Raise ValueError unless every Value is defined once, before its first use, and
        every output is defined. Passes call this in tests after every rewrite."""
        seen = set()
        for v in list(self.inputs) + list(self.consts):
            if v.id in seen:
                raise ValueError(f"ir: {v!r} is defined twice")
            seen.add(v.id)
        for k, ins in enumerate(self.instrs):
            for v in ins.inputs:
                if v.id not in seen:
                    raise ValueError(f"ir: instruction {k} ({ins.op}) uses {v!r} before it is defined")
            for v in ins.outputs:
                if v.id in seen:
                    raise ValueError(f"ir: {v!r} is defined twice (instruction {k}, {ins.op})")
                seen.add(v.id)
        for v in self.outputs:
            if v.id not in seen:
                raise ValueError(f"ir: output {v!r} is never defined")
        return self

    def text(self):
        """The program as readable text, one instruction per line."""
        lines = ["inputs: " + ", ".join(map(repr, self.inputs))]
        for v in self.consts:
            lines.append(f"const {v!r}")
        for ins in self.instrs:
            attrs = "".join(f", {k}={_short(a)}" for k, a in ins.attrs.items() if k != "body")
            if ins.op == "fused":
                attrs += f", body={len(ins.attrs['body'].instrs)} ops"
            args = ", ".join(repr(v) for v in ins.inputs)
            outs = ", ".join(repr(v) for v in ins.outputs)
            where = f"   @ {ins.scope}" if ins.scope else ""
            lines.append(f"{outs} = {ins.op}({args}{attrs})   [{ins.role}]{where}")
        lines.append("outputs: " + ", ".join(map(repr, self.outputs)))
        return "\n".join(lines)


def _short(a):
    text = repr(a)
    return text if len(text) <= 40 else text[:37] + "..."
