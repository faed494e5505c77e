"""Code generation's modules import one way (issue 28): no module of codegen/ reaches itself
through the others, deferred imports (inside functions) included. Read off the source with
ast, so a cycle hidden in a function body, which Python would tolerate, fails here too."""
import ast
import pathlib

import tinytensor.compiler.codegen as codegen

HERE = pathlib.Path(codegen.__file__).parent


def _edges():
    """{module: modules of codegen/ it imports}, by file stem."""
    names = {p.stem for p in HERE.glob("*.py")}
    edges = {}
    for p in HERE.glob("*.py"):
        out = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:   # from . import x / from .x import y
                if node.module is None:
                    out |= {a.name for a in node.names if a.name in names}
                elif node.module.split(".")[0] in names:
                    out.add(node.module.split(".")[0])
        edges[p.stem] = out - {p.stem}
    return edges


def _cycle(edges):
    """One cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        state[m] = "done"
        stack.pop()
        return None
    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_codegen_modules_import_one_way():
    edges = _edges()
    assert {"c", "runner", "emit", "toolchain"} <= set(edges)   # the walk sees the package
    assert _cycle(edges) is None, " -> ".join(_cycle(edges))


def test_the_cycle_finder_finds_a_ring():
    assert _cycle({"c": {"runner"}, "runner": {"c_index"}, "c_index": {"c"}}) == ["c", "runner", "c_index", "c"]
    assert _cycle({"c": {"runner"}, "runner": set()}) is None
