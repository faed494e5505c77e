"""Imports go one way: down the stack that docs/ARCHITECTURE.md draws ("The stack").

The layer list is read from that document (its first code block under "## The stack"), so
the picture a reader sees is the rule the tree is held to. Every module of tinytensor/, nn/,
models/ and tools/ is parsed with `ast` and every import in it counts, at any depth: the
ones at the top, the deferred ones inside functions (a deferred import still ties the two
modules together, it only hides the circle from Python), and `importlib.import_module` of a
literal name. An edge from a module to one of a higher layer fails, naming both lines.
"""
import ast
import functools
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
# the folders that install inside tinytensor (pyproject.toml's package-dir)
INSTALLED = {"tinytensor": "tinytensor", "nn": "tinytensor.nn", "models": "tinytensor.models",
             "tools": "tinytensor.tools"}

# Upward edges not removed yet, each with whose file it is: the test fails when one is gone,
# so this list only shrinks. (importer, imported)
PENDING = {}   # known upward edges awaiting a fix (each with its owner): none


def stack():
    """The layers, lowest first: each a list of path entries ("tinytensor/core/",
    "tinytensor/amp.py", "nn/")."""
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## The stack", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    layers = []
    for line in block.splitlines():
        entries = []
        for token in line.replace(",", " ").split():
            if not (token.endswith("/") or token.endswith(".py")):
                break   # the rest of the line is its description
            entries.append(token.rstrip("/"))
        if entries:
            layers.append(entries)
    return layers[::-1]


def modules():
    """{dotted name: path relative to ROOT} for every module of the installed tree."""
    found = {}
    for folder, package in INSTALLED.items():
        for d, subdirs, files in os.walk(os.path.join(ROOT, folder)):
            subdirs[:] = [s for s in subdirs if s != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(d, f), ROOT)
                    parts = os.path.relpath(os.path.join(d, f), os.path.join(ROOT, folder))[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    found[".".join([package] + parts)] = rel.replace(os.sep, "/")
    return found


def layer_of(path, layers):
    """The index of the layer whose longest entry covers `path`, or None."""
    best, at = -1, None
    for k, entries in enumerate(layers):
        for e in entries:
            if (path == e or path == e + ".py" or path.startswith(e + "/")) and len(e) > best:
                best, at = len(e), k
    return at


_LITERAL_IMPORT = re.compile(r"import_module\(\s*[\"']([\w.]+)[\"']")


def _statements(body):
    """Every statement, at any depth (inside functions, classes, if/try/with/match), without
    visiting expressions: imports are statements, and this walk is several times faster."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if inner:
                yield from _statements(inner)


def imports(name, path, mods, root=ROOT):
    """(line, imported module) for every import in the module, at any depth, and every
    `importlib.import_module` of a written name."""
    source = open(os.path.join(root, path), encoding="utf-8").read()
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = []
    for node in _statements(ast.parse(source, path).body):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    for m in _LITERAL_IMPORT.finditer(source):
        found.append((source.count("\n", 0, m.start()) + 1, m.group(1)))
    for line, t in found:
        while t and t not in mods:   # `from x import name`: the module x, or x.name if a module
            t = t.rpartition(".")[0]
        if t and t != name:
            yield line, t


@functools.lru_cache(maxsize=1)
def upward_edges():
    layers, mods = stack(), modules()
    unplaced = sorted(p for p in mods.values() if layer_of(p, layers) is None)
    edges = {}
    for name, path in mods.items():
        mine = layer_of(path, layers)
        for line, target in imports(name, path, mods):
            theirs = layer_of(mods[target], layers)
            if mine is not None and theirs is not None and theirs > mine:
                edges.setdefault((path, mods[target]), line)
    return unplaced, edges


def test_the_stack_is_read_from_the_document():
    layers = stack()
    flat = [e for entries in layers for e in entries]
    assert len(layers) >= 8 and "tinytensor/core" in flat and "nn" in flat and "tools" in flat
    assert layer_of("tinytensor/core/tensor.py", layers) < layer_of("tinytensor/ops/reduce.py", layers) \
        < layer_of("tinytensor/compiler/ir.py", layers) < layer_of("nn/module.py", layers) \
        < layer_of("models/gpt.py", layers) < layer_of("tools/train.py", layers)


def test_every_module_has_a_layer():
    unplaced, _ = upward_edges()
    assert not unplaced, f"modules the stack in docs/ARCHITECTURE.md does not place: {unplaced}"


def test_imports_only_go_down():
    _, edges = upward_edges()
    found = {k for k in edges if k not in PENDING}
    assert not found, "imports that go up the stack of docs/ARCHITECTURE.md:\n" + "\n".join(
        f"  {a}:{edges[(a, b)]} imports {b}" for a, b in sorted(found))
    gone = sorted(set(PENDING) - set(edges))
    assert not gone, f"PENDING lists edges that are gone (remove them): {gone}"


def test_a_deferred_upward_import_is_caught(tmp_path):
    # the walk sees imports inside functions and relative ones: a fake core module
    src = "def f():\n    if True:\n        from ..ops import reduce\n    return reduce\n"
    path = tmp_path / "m.py"
    path.write_text(src)
    mods = {"tinytensor.core.m": str(path), "tinytensor.ops.reduce": "tinytensor/ops/reduce.py"}
    assert list(imports("tinytensor.core.m", str(path), mods, root="")) == [(3, "tinytensor.ops.reduce")]
