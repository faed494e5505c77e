"""The models tools/graph.py draws, built small and traced once under tt.record().

Models: the architectures of models/ (gpt2, gpt1, llama, bert, t5, bart, transformer), an
MLP and a causal attention block; PRESETS holds named sizes (tiny, and GPT-2 small itself).
"""
import numpy as np

from tinytensor import nn
import tinytensor as tt

PRESETS = {  # GPT-2 small as published: 12 layers, 768 wide, 12 heads, 50257 tokens, 1024 context
    "tiny": dict(layers=2, d_model=64, heads=4, vocab=256, seq_len=16, batch=2),
    "gpt2": dict(layers=12, d_model=768, heads=12, vocab=50257, seq_len=1024, batch=1),
}


class MLP(nn.Module):
    """Linear -> GELU repeated `layers` times, then a Linear head."""

    def __init__(self, d_in, hidden, d_out, layers):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d_in if i == 0 else hidden, hidden)
                                     for i in range(layers)])
        self.act = nn.GELU()
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x):
        for layer in self.layers:
            x = self.act(layer(x))
        return self.head(x)


class AttentionBlock(nn.Module):
    """The attention half of a pre-LN block: x + attn(ln(x)), causal."""

    def __init__(self, d_model, heads):
        super().__init__()
        self.ln = nn.LayerNorm(d_model)
        self.attn = nn.MultiHeadAttention(d_model, heads)

    def forward(self, x):
        return x + self.attn(self.ln(x), is_causal=True)


def _gpt(s, model_type):
    from tinytensor.models import GPT, GPTConfig
    return GPT(GPTConfig(vocab_size=s["vocab"], n_positions=max(s["seq_len"], 8), n_embd=s["d_model"],
                         n_layer=s["layers"], n_head=s["heads"], model_type=model_type))


def _llama(s):
    from tinytensor.models import Llama, LlamaConfig
    return Llama(LlamaConfig(vocab_size=s["vocab"], hidden_size=s["d_model"],
                             intermediate_size=8 * s["d_model"] // 3, num_hidden_layers=s["layers"],
                             num_attention_heads=s["heads"],
                             num_key_value_heads=max(1, s["heads"] // 2),
                             max_position_embeddings=max(s["seq_len"], 8)))


def _bert(s):
    from tinytensor.models import BERT, BertConfig
    return BERT(BertConfig(vocab_size=s["vocab"], hidden_size=s["d_model"],
                           num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                           intermediate_size=4 * s["d_model"],
                           max_position_embeddings=max(s["seq_len"], 8)), head="mlm")


def _t5(s):
    from tinytensor.models import T5, T5Config
    return T5(T5Config(vocab_size=s["vocab"], d_model=s["d_model"], d_kv=s["d_model"] // s["heads"],
                       d_ff=4 * s["d_model"], num_layers=s["layers"], num_heads=s["heads"]))


def _bart(s):
    from tinytensor.models import BART, BartConfig
    return BART(BartConfig(vocab_size=s["vocab"], max_position_embeddings=max(s["seq_len"], 8),
                           d_model=s["d_model"], encoder_layers=s["layers"], decoder_layers=s["layers"],
                           encoder_attention_heads=s["heads"], decoder_attention_heads=s["heads"],
                           encoder_ffn_dim=4 * s["d_model"], decoder_ffn_dim=4 * s["d_model"]))


def _transformer(s):
    from tinytensor.models import Transformer, TransformerConfig
    return Transformer(TransformerConfig(vocab_size=s["vocab"], d_model=s["d_model"],
                                         encoder_layers=s["layers"], decoder_layers=s["layers"],
                                         encoder_attention_heads=s["heads"],
                                         decoder_attention_heads=s["heads"],
                                         encoder_ffn_dim=4 * s["d_model"],
                                         decoder_ffn_dim=4 * s["d_model"],
                                         max_position_embeddings=max(s["seq_len"], 8)))


# name -> (builder(sizes) -> Module, kind of input: 'features', 'tokens' or 'seq2seq')
MODELS = {
    "mlp": (lambda s: MLP(s["d_model"], 4 * s["d_model"], 10, s["layers"]), "features"),
    "attention": (lambda s: AttentionBlock(s["d_model"], s["heads"]), "sequence"),
    "gpt2": (lambda s: _gpt(s, "gpt2"), "tokens"),
    "gpt1": (lambda s: _gpt(s, "openai-gpt"), "tokens"),
    "llama": (_llama, "tokens"),
    "bert": (_bert, "tokens"),
    "t5": (_t5, "seq2seq"),
    "bart": (_bart, "seq2seq"),
    "transformer": (_transformer, "seq2seq"),
}


def build_model(name, layers=2, d_model=64, heads=4, vocab=256, seq_len=16, batch=2, seed=0):
    """(module in eval mode, call kwargs) for one of MODELS."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    sizes = dict(layers=layers, d_model=d_model, heads=heads, vocab=vocab, seq_len=seq_len)
    tt.manual_seed(seed)
    rng = np.random.default_rng(seed)
    build, kind = MODELS[name]
    model = build(sizes).eval()  # eval: no dropout ops in the picture
    if kind == "features":
        return model, {"x": tt.randn(batch, d_model)}
    if kind == "sequence":
        return model, {"x": tt.randn(batch, seq_len, d_model)}
    ids = lambda: tt.tensor(rng.integers(0, vocab, size=(batch, seq_len)))  # noqa: E731
    if kind == "tokens":
        return model, {"input_ids": ids()}
    return model, {"input_ids": ids(), "decoder_input_ids": ids()}


def trace(name, loss=False, **sizes):
    """Run the model once under tt.record(); returns (tape, output, {name: input tensor})."""
    model, inputs = build_model(name, **sizes)
    kind = MODELS[name][1]
    with tt.record() as tape:
        if kind in ("features", "sequence"):
            out = model(inputs["x"])
            if loss:
                out = (out * out).mean()
        else:
            labels = inputs["decoder_input_ids" if kind == "seq2seq" else "input_ids"]
            res = model(**inputs, labels=labels if loss else None)
            out = res.loss if loss else res.logits
    return tape, out, inputs
