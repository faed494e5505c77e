"""A translation unit of generated kernels: shared by the C and the CUDA backends."""


def translation_unit(program, head, kernel_source):
    """`head` (a list of lines), then `kernel_source(instr, name)` for every fused
    instruction; shared by the C and the CUDA backends. Returns (source, {index: name})."""
    parts = list(head)
    names = {}
    for k, ins in enumerate(program.instrs):
        if ins.op == "fused":
            names[k] = f"{ins.attrs['name']}_{k}"
            parts.append(kernel_source(ins, names[k]))
            parts.append("")
    return "\n".join(parts), names
