"""Continue a prompt with a HuggingFace decoder (GPT-2, Llama), streaming the text as it is
generated, or answer it with an encoder-decoder (T5, BART, Marian: the decoder's text, printed
when done); the tokenizer is the directory's tokenizer.json (pip install 'tinytensor[text]').

    python tools/generate.py path/to/gpt2 "The meaning of life is" --max-new-tokens 40
    python tools/generate.py path/to/gpt2 "Once upon a time" --temperature 0.8 --top-p 0.95 --seed 0
    python tools/generate.py path/to/gpt2 "The meaning of life is" --num-beams 4

Greedy unless --temperature or --top-p is given. With --num-beams the best beam-search
hypothesis is printed once the search ends (no beam is the best before), not token by token.
"""
import argparse
import sys

from tinytensor.tools.lib import text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", help="an HF directory: config.json, weights, tokenizer.json")
    p.add_argument("prompt", help="the text to continue")
    p.add_argument("--max-new-tokens", type=int, default=40, help="tokens to add (default: 40)")
    p.add_argument("--temperature", type=float, default=None, help="sample at this temperature")
    p.add_argument("--top-p", type=float, default=None, help="sample from the top-p nucleus")
    p.add_argument("--num-beams", type=int, default=1, metavar="N",
                   help="beam search over N beams (default: 1, none); prints the best "
                        "continuation when the search ends, not token by token")
    p.add_argument("--seed", type=int, default=None, help="make sampling reproducible")
    p.add_argument("--device", default=None, help="cpu (default) or cuda[:i]")
    args = p.parse_args(argv)
    text.argv_text(p, "the prompt", args.prompt)
    model, tok = text.load_for("generate", args.directory, device=args.device)

    def show(piece):
        sys.stdout.write(piece)
        sys.stdout.flush()
    if not text.is_encoder_decoder(model):  # a decoder continues the prompt; T5 answers it
        show(args.prompt)
    text.generate_text(model, tok, args.prompt, args.max_new_tokens, args.temperature, args.top_p,
                       args.num_beams, args.seed, on_text=show)
    show("\n")


if __name__ == "__main__":
    main()
