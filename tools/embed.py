"""Sentence embeddings from a HuggingFace encoder directory (e.g. sentence-transformers'
all-MiniLM-L6-v2): pooled as its 1_Pooling/config.json says, L2-normalised when its
modules.json has a Normalize module (or with --normalize).

    python tools/embed.py path/to/all-MiniLM-L6-v2 "A man is eating food." "A man eats." --similarity

Prints one line per sentence (the sentence, a tab, the embedding) and, with --similarity,
the matrix of cosine similarities.
"""
import argparse

import numpy as np

from tinytensor.tools.lib import text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", help="an HF directory: config.json, weights, tokenizer.json, 1_Pooling/")
    p.add_argument("sentences", nargs="+", help="the sentences to embed")
    p.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                   help="L2-normalise (default: as the directory's modules.json says)")
    p.add_argument("--similarity", action="store_true", help="also print cosine similarities")
    p.add_argument("--device", default=None, help="cpu (default) or cuda[:i]")
    args = p.parse_args(argv)
    for i, sentence in enumerate(args.sentences):
        text.argv_text(p, f"sentence {i + 1}", sentence)
    model, tok = text.load_for("embed", args.directory, device=args.device)
    config = text.pooling_config(args.directory)
    if args.normalize is not None:
        config["normalize"] = args.normalize
    e = text.embed(model, tok, args.sentences, **config).float().cpu().numpy()
    for s, v in zip(args.sentences, e):
        print(s + "\t" + " ".join(f"{x:.6f}" for x in v))
    if args.similarity:
        unit = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
        print("cosine similarity")
        for i, row in enumerate(unit @ unit.T):
            print(f"[{i + 1}] " + " ".join(f"{x:.4f}" for x in row))


if __name__ == "__main__":
    main()
