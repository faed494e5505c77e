"""What tools/generate.py and tools/embed.py do: load an HF directory with its tokenizer,
stream a continuation of a prompt, pool sentence embeddings as sentence-transformers does."""
import inspect
import os

from tinytensor import models
import tinytensor as tt
from tinytensor.models.hf_json import ConfigError, optional_int, problem, read_json
from tinytensor.models.seq2seq import Seq2SeqGenerateMixin


def load(directory, device=None):
    return models.from_hf(directory, device=device), models.Tokenizer.from_dir(directory)


def is_encoder_decoder(model):
    return isinstance(model, Seq2SeqGenerateMixin)


def load_for(tool, directory, device=None):
    """load(), for a command-line tool: a missing `tokenizers` package, or a model of a kind
    the tool cannot use, ends the program with one line that says what to do instead."""
    try:
        tok = models.Tokenizer.from_dir(directory)  # first: it fails fast without tokenizers
    except ImportError as e:
        raise SystemExit(f"{tool}: {e}") from None
    model = models.from_hf(directory, device=device)
    kind = type(model).__name__
    if tool == "embed" and not isinstance(model, models.BERT):
        other = " (for text, use tools/generate.py)" if hasattr(model, "generate") else ""
        raise SystemExit(f"embed: {directory} holds a {kind} model; embed pools the hidden states "
                         "of an encoder: give it a BERT directory, e.g. a sentence-transformers "
                         f"model such as all-MiniLM-L6-v2{other}")
    if tool == "generate" and not (hasattr(model, "new_cache") or is_encoder_decoder(model)):
        raise SystemExit(f"generate: {directory} holds a {kind} model, which does not generate "
                         "text; give it a decoder (GPT-2, Llama) or an encoder-decoder (T5, BART, "
                         "Marian) directory (for sentence embeddings, use tools/embed.py)")
    return model, tok


# ------------------------------------------------------------------ generation
def generate_text(model, tok, prompt, max_new_tokens=40, temperature=None, top_p=None, num_beams=1,
                  seed=None, on_text=None):
    """The continuation of `prompt` (greedy, or sampled when a temperature or top_p is given);
    `on_text(piece)` gets each piece of text as soon as its token is chosen. With num_beams > 1
    it is the best beam-search hypothesis (beam sampling with a temperature or top_p), passed
    to on_text whole when the search ends: until then no beam is known to be the best."""
    kw = dict(do_sample=bool(temperature) or top_p is not None, temperature=temperature or 1.0,
              top_p=top_p, seed=seed, eos_token_id=tok.eos_token_id)
    if is_encoder_decoder(model):  # T5, BART, Marian: the prompt is the input, not a prefix
        return _generate_seq2seq(model, tok, prompt, max_new_tokens, num_beams, on_text, kw)
    if not hasattr(model, "new_cache"):
        raise TypeError(f"generate_text: {type(model).__name__} is not a language model (a "
                        "decoder such as GPT or Llama, or an encoder-decoder such as T5 or BART)")
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    if ids.shape[1] == 0:  # as transformers' generate without input_ids: start from BOS
        ids = tt.tensor([[_bos_token_id(model, tok)]], dtype=tt.int64)
    stream = TextStream(tok, on_text)
    if num_beams != 1:
        out = models.generate(model, ids, max_new_tokens, num_beams=num_beams, **kw)
        stream.tokens = out[0, ids.shape[1]:].tolist()
        return stream.close()
    out = models.generate(_Watched(model, stream.push), ids, max_new_tokens, **kw)
    for token in out[0, ids.shape[1] + len(stream.tokens):].tolist():  # the last step's token
        stream.push(token)
    return stream.close()


def _bos_token_id(model, tok):
    bos = tok.bos_token_id
    if bos is None:
        bos = getattr(model.config, "bos_token_id", None)
    if not isinstance(bos, int) or isinstance(bos, bool):
        raise ValueError("generate_text: the prompt is empty (no tokens), and neither "
                         "tokenizer_config.json nor config.json names a bos_token to start from "
                         "(transformers' generate refuses this too); give a prompt")
    return bos


def argv_text(parser, name, value):
    """`value` from the command line, checked: bytes that are not UTF-8 reach Python as lone
    surrogates (surrogateescape), which the tokenizer cannot take; refused naming the byte."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(value)
        try:
            raw.decode("utf-8")
            where = ""
        except UnicodeDecodeError as e:
            where = f": byte 0x{raw[e.start]:02x} at offset {e.start}"
        parser.error(f"{name} is not valid UTF-8{where}; pass UTF-8 text (re-encode it, e.g. "
                     "with iconv -t UTF-8)")
    return value


def _generate_seq2seq(model, tok, prompt, max_new_tokens, num_beams, on_text, kw):
    """The decoder's text for `prompt` (encoded with the tokenizer's special tokens, e.g.
    T5's closing </s>, as transformers' pipelines do), passed to on_text whole at the end."""
    enc = tok(prompt)
    out = model.generate(enc["input_ids"], max_new_tokens, attention_mask=enc["attention_mask"],
                         num_beams=num_beams, **kw)
    stream = TextStream(tok, on_text)
    stream.tokens = out[0, 1:].tolist()  # after decoder_start_token_id
    return stream.close()


class TextStream:
    """Token ids in, text pieces out: each push decodes the tokens so far and passes on what
    is new, holding back a character whose UTF-8 bytes have not all arrived (byte-level BPE
    splits them across tokens). close() flushes and returns the whole text."""

    def __init__(self, tok, on_text=None):
        self.tok, self.on_text, self.tokens, self.shown = tok, on_text, [], ""

    def push(self, token):
        self.tokens.append(token)
        text = self.tok.decode(self.tokens, skip_special_tokens=True)
        if not text.endswith("\ufffd"):
            self._emit(text)

    def close(self):
        text = self.tok.decode(self.tokens, skip_special_tokens=True)
        self._emit(text)
        return text

    def _emit(self, text):
        if self.on_text is not None and text != self.shown:
            self.on_text(text[len(self.shown):])
        self.shown = text


class _Watched:
    """`model` as models.generate sees it, reporting each chosen token: generate feeds every
    step the ids so far (with the KV cache only the new one), so the last column of each call
    after the first is the token the previous step chose."""

    def __init__(self, model, on_token):
        self.model, self.on_token, self.calls = model, on_token, 0
        self.config, self.new_cache, self.evaluating = model.config, model.new_cache, model.evaluating

        def forward(*args, **kwargs):
            return self(*args, **kwargs)
        forward.__signature__ = inspect.signature(model.forward)  # generate reads it
        self.forward = forward

    def __call__(self, input_ids, **kwargs):
        if self.calls:
            self.on_token(int(input_ids[0, -1].item()))
        self.calls += 1
        return self.model(input_ids, **kwargs)


# ------------------------------------------------------------------ embeddings
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len")  # sentence-transformers' concatenation order


def pooling_config(directory):
    """{"modes", "normalize", "max_length"} from a sentence-transformers directory: 1_Pooling's
    pooling_mode_* flags (mean without the file), a Normalize module in modules.json, and
    sentence_bert_config.json's max_seq_length (else the model's max_position_embeddings)."""
    path = os.path.join(directory, "1_Pooling", "config.json")
    pooling = read_json(path, "embed") or {"pooling_mode_mean_tokens": True}
    modes = [m for m in POOLING_MODES if _flag(pooling, f"pooling_mode_{m}_tokens" if m != "cls" else
                                               "pooling_mode_cls_token", path)]
    if not modes:
        raise ConfigError(f"embed: {path} enables none of the pooling modes tinytensor has "
                          "(cls_token, max_tokens, mean_tokens, mean_sqrt_len_tokens)")
    normalize = any(_module_type(m, i, directory).endswith(".Normalize")
                    for i, m in enumerate(read_json(os.path.join(directory, "modules.json"), "embed",
                                                    expect=list) or []))
    path = os.path.join(directory, "sentence_bert_config.json")
    max_length = optional_int(read_json(path, "embed") or {}, "max_seq_length", "embed", path)
    if max_length is None:
        path = os.path.join(directory, "config.json")
        max_length = optional_int(read_json(path, "embed") or {}, "max_position_embeddings", "embed",
                                  path)
    return {"modes": modes, "normalize": normalize, "max_length": max_length}


def _flag(config, field, path):
    value = config.get(field, False)
    if not isinstance(value, bool):
        raise problem("embed", path, field, value, "true or false")
    return value


def _module_type(module, i, directory):
    """The class path of entry `i` of modules.json ({"type": "sentence_transformers...."})."""
    kind = module.get("type", "") if isinstance(module, dict) else None
    if not isinstance(kind, str):
        raise problem("embed", os.path.join(directory, "modules.json"), f"[{i}]", module,
                      'an object with a string "type"')
    return kind


def embed(model, tok, sentences, modes=("mean",), normalize=False, max_length=None):
    """(len(sentences), width * len(modes)) embeddings of an encoder (BERT): the pooled last
    hidden states, padding excluded, L2-normalised if asked."""
    enc = tok(list(sentences), truncation=max_length is not None, max_length=max_length)
    with tt.no_grad():
        h = model(enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state  # (B, T, H)
        mask = enc["attention_mask"].to(h.dtype).unsqueeze(-1)                              # (B, T, 1)
        count = mask.sum(1).clamp(min=1e-9)                                                 # (B, 1)
        pooled = {"cls": lambda: h[:, 0],
                  "max": lambda: tt.where(mask > 0, h, tt.full_like(h, -1e9)).amax(1),
                  "mean": lambda: (h * mask).sum(1) / count,
                  "mean_sqrt_len": lambda: (h * mask).sum(1) / count.sqrt()}
        out = tt.cat([pooled[m]() for m in modes], dim=-1)
        if normalize:  # torch.nn.functional.normalize, as sentence-transformers' Normalize
            out = out / out.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    return out


