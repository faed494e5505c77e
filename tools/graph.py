"""Draw the autograd graph of a model's forward (and backward) pass with tinytensor.viz.

    python tools/graph.py --model gpt2 --layers 2 --out gpt2.svg
    python tools/graph.py --model gpt2 --preset gpt2 --collapse --out docs/gpt2_graph.svg
    python tools/graph.py --model mlp --backward 2 --out mlp.svg        # 1st and 2nd order
    python tools/graph.py --model llama --loss --backward 1 --collapse --max-depth 2 --out llama.pdf
    python tools/graph.py --model attention --no-group --edge-labels all --out attn.png

Models: the architectures of models/ (gpt2, gpt1, llama, bert, t5, bart, transformer) at
small sizes (or --preset gpt2 for GPT-2 small itself), an MLP and a causal attention
block. The format follows the suffix (.svg, .png, .pdf, .dot); without the Graphviz
program the DOT file is written instead, with a one-line hint on installing Graphviz.
"""
import argparse
import time

import tinytensor as tt
from tinytensor.tools.lib.graph_models import MODELS, PRESETS, trace


def make_graph(args):
    sizes = dict(PRESETS[args.preset])
    for k in SIZE_FLAGS:
        v = getattr(args, k)
        if v is not None:
            sizes[k] = v
    with tt.kernels.use_fusion(args.fusion):
        tape, out, names = trace(args.model, loss=args.loss, **sizes)
    dims = ", ".join(f"{k}={v}" for k, v in sizes.items())
    title = args.title or f"{args.model} ({dims})"
    return tt.viz.graph(tape, out, names=names, group_by_module=args.group,
                        max_depth=args.max_depth, collapse=args.collapse, backward=args.backward,
                        annotate=args.annotate, edge_labels=args.edge_labels, legend=args.legend,
                        title=title, rankdir=args.rankdir)


SIZE_FLAGS = {"layers": "blocks (encoder and decoder each for t5, bart, transformer) or MLP layers",
              "d_model": "model width", "heads": "attention heads", "vocab": "vocabulary size",
              "seq_len": "tokens per sequence", "batch": "batch size"}


def parser():
    p = argparse.ArgumentParser(prog="graph.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt2", choices=list(MODELS),
                   help="what to draw (default: %(default)s)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                   help="model sizes: tiny, or gpt2 (GPT-2 small: 12 layers, d=768, T=1024); "
                        "the size flags below override single sizes (default: %(default)s)")
    for name, what in SIZE_FLAGS.items():
        tiny = PRESETS["tiny"][name]
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=None,
                       help=f"{what} (default: the preset's; tiny: {tiny})")
    p.add_argument("--loss", action="store_true",
                   help="end in the loss (cross-entropy for LMs) instead of the output")
    p.add_argument("--no-fusion", dest="fusion", action="store_false",
                   help="trace the reference ops instead of the fused kernels (attention's "
                        "(B, nh, T, T) scores then show as tensors)")
    p.add_argument("--backward", type=int, default=0, metavar="N",
                   help="draw N orders of the gradient graph (2 = create_graph=True; "
                        "default: %(default)s, the forward only)")
    p.add_argument("--no-group", dest="group", action="store_false",
                   help="no module clusters; op labels carry the module path instead")
    p.add_argument("--max-depth", type=int, default=None, metavar="N",
                   help="fold modules nested deeper than N into boxes (default: no folding)")
    p.add_argument("--collapse", action="store_true", help="draw identical repeated blocks once")
    p.add_argument("--edge-labels", default="auto", choices=["auto", "all", "none"],
                   help="tensor shapes on edges: where they help (module boundaries, boxes, "
                        "multi-output ops), everywhere, or nowhere (default: %(default)s)")
    p.add_argument("--no-annotate", dest="annotate", action="store_false",
                   help="no FLOPs / bytes on ops and modules")
    p.add_argument("--no-legend", dest="legend", action="store_false",
                   help="no legend of what the colours and shapes mean")
    p.add_argument("--rankdir", default="TB", choices=["TB", "LR"],
                   help="layout direction: top to bottom or left to right (default: %(default)s)")
    p.add_argument("--title", default=None, help="graph title (default: the model and its sizes)")
    p.add_argument("--out", default="graph.svg",
                   help="file to write: .svg, .png, .pdf or .dot (default: %(default)s)")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    g = make_graph(args)
    t1 = time.perf_counter()
    path = g.render(args.out)
    t2 = time.perf_counter()
    n_ops = sum(v.kind == "op" for v in g.graph.vertices.values())
    print(f"wrote {path}: {len(g.graph.vertices)} vertices ({n_ops} ops), {len(g.graph.edges)} "
          f"edges; traced+exported in {t1 - t0:.2f} s, rendered in {t2 - t1:.2f} s")
    return path


if __name__ == "__main__":
    main()
