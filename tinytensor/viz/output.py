"""Writing the picture: DOT always; SVG/PNG/PDF through the Graphviz `dot` program.

Without `dot` on the PATH, rendering writes the DOT file next to the requested one and
says in one line how to install Graphviz, instead of failing with a cryptic error.
Without the `graphviz` Python package, `graph()` returns a `DotGraph` stand-in with the
same `source` / `render` / `save` / `pipe` calls.
"""
import os
import shutil
import subprocess
import warnings

TEXT_FORMATS = {"dot", "gv"}
IMAGE_FORMATS = {"svg", "png", "pdf", "jpg", "jpeg", "gif", "ps", "eps", "json", "plain", "webp"}
INSTALL_HINT = ("install Graphviz to render it: apt-get install graphviz | brew install graphviz "
                "| conda install graphviz | https://graphviz.org/download/")


class GraphvizNotFoundWarning(UserWarning):
    """The Graphviz `dot` program is not installed; the DOT source was written instead."""


def format_of(path, format=None):
    if format:
        return format.lower()
    ext = os.path.splitext(str(path))[1].lstrip(".").lower()
    return ext if ext in TEXT_FORMATS | IMAGE_FORMATS else None


def write(source, path, format=None):
    """Write `source` as `path` (format from the suffix unless given); returns the path
    written, which is the .dot file when Graphviz is missing."""
    path = os.fspath(path)
    fmt = format_of(path, format) or "dot"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if fmt in TEXT_FORMATS:
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        return path
    dot = shutil.which("dot")
    if dot is None:
        base, ext = os.path.splitext(path)
        dot_path = (base if ext else path) + ".dot"
        with open(dot_path, "w", encoding="utf-8") as f:
            f.write(source)
        warnings.warn(f"Graphviz 'dot' program not found, so {path} was not rendered; wrote the "
                      f"graph to {dot_path}; {INSTALL_HINT}", GraphvizNotFoundWarning, stacklevel=3)
        return dot_path
    r = subprocess.run([dot, f"-T{fmt}", "-o", path], input=source.encode("utf-8"),
                       capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"viz: Graphviz dot -T{fmt} failed for {path}: {_tail(r.stderr)}")
    return path


def pipe(source, format="svg"):
    """Rendered bytes (`dot -T<format>`); raises RuntimeError with the install hint without dot."""
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError(f"viz: Graphviz 'dot' program not found; {INSTALL_HINT}")
    r = subprocess.run([dot, f"-T{format}"], input=source.encode("utf-8"), capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"viz: Graphviz dot -T{format} failed: {_tail(r.stderr)}")
    return r.stdout


def _tail(stderr, n=3):
    lines = stderr.decode(errors="replace").strip().splitlines()
    return " | ".join(lines[-n:]) if lines else "(no message)"


class _Render:
    """render(path) by suffix: .dot/.gv write the source, .svg/.png/.pdf/... render it.
    Tapes and compiled programs (tt.viz.graph of either, tt.compiler.explain) share it."""

    def render(self, filename=None, directory=None, view=False, cleanup=False, format=None, **kwargs):
        if (filename is not None and directory is None and not view and not kwargs
                and format_of(filename, format)):
            path = os.fspath(filename)
            if format and format_of(path) != format.lower():
                # an explicit format the name does not end in: graphviz's convention, the
                # picture at name.format and the DOT source at name unless cleanup
                if not cleanup:
                    write(self.source, path, "dot")
                path = f"{path}.{format.lower()}"
            return write(self.source, path, format)
        if _Digraph is None:
            raise TypeError("render(path): pass a file name ending in .dot, .svg, .png or .pdf")
        return _Digraph.render(self, filename, directory, view=view, cleanup=cleanup,
                               format=format, **kwargs)

    def _repr_svg_(self):
        return pipe(self.source, "svg").decode("utf-8")


class DotGraph(_Render):
    """Stand-in for graphviz.Digraph when the `graphviz` Python package is missing."""

    def __init__(self, name, body):
        self.name, self.body = name, list(body)

    @property
    def source(self):
        return f"digraph {self.name} {{\n" + "".join(self.body) + "}\n"

    def save(self, filename):
        return write(self.source, filename, "dot")

    def pipe(self, format="svg", **kwargs):
        return pipe(self.source, format)

    def __str__(self):
        return self.source


_TapeGraph = None


def _tape_graph_class():
    """graphviz.Digraph subclass, defined on first use so `import tinytensor` stays light."""
    global _TapeGraph, _Digraph
    if _TapeGraph is None:
        try:
            # the graphviz package is optional: loaded when a graph is first drawn
            import graphviz
        except ImportError:  # the graphviz package is optional (pip install graphviz)
            return None
        _Digraph = graphviz.Digraph

        class TapeGraph(_Render, graphviz.Digraph):
            """A graphviz.Digraph whose render(path) picks the format from the suffix and
            falls back to writing DOT when the Graphviz program is missing."""
            _repr_svg_ = _Render._repr_svg_

        _TapeGraph = TapeGraph
    return _TapeGraph


_Digraph = None


def make(name, body, graph, use_graphviz=True):
    """The object graph() returns; `.graph` is the neutral Graph it was drawn from."""
    cls = _tape_graph_class() if use_graphviz else None
    if cls is not None:
        g = cls(name=name, body=body)
    else:
        g = DotGraph(name, body)
    g.graph = graph
    return g
