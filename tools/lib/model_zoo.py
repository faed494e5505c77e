"""The small models tools/train.py builds, by --model name, sized by its flags."""
from tinytensor import models

DECODERS = ("gpt2", "gpt1", "llama")
ENCODERS = ("bert",)
SEQ2SEQ = ("transformer", "t5", "bart")
NAMES = DECODERS + ENCODERS + SEQ2SEQ


def task_kind(name):
    return "lm" if name in DECODERS else "mlm" if name in ENCODERS else "seq2seq"


def build(name, vocab, context, d, layers, heads, dropout, special=None):
    """A freshly initialised model; `special` = (pad, start, eos) ids for seq2seq models."""
    if name in ("gpt2", "gpt1"):
        return models.GPT(models.GPTConfig(
            vocab_size=vocab, n_positions=context, n_embd=d, n_layer=layers, n_head=heads,
            model_type="gpt2" if name == "gpt2" else "openai-gpt",
            resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout))
    if name == "llama":
        return models.Llama(models.LlamaConfig(
            vocab_size=vocab, hidden_size=d, intermediate_size=(8 * d // 3 + 63) // 64 * 64,
            num_hidden_layers=layers, num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2), max_position_embeddings=context,
            attention_dropout=dropout, tie_word_embeddings=True))
    if name == "bert":
        return models.BERT(models.BertConfig(
            vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=4 * d, max_position_embeddings=context, hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout, pad_token_id=0), head="mlm")
    pad, start, eos = special
    if name == "transformer":
        return models.Transformer(models.TransformerConfig(
            vocab_size=vocab, d_model=d, encoder_layers=layers, decoder_layers=layers,
            encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
            decoder_ffn_dim=4 * d, max_position_embeddings=context, dropout=dropout,
            label_smoothing=0.0, pad_token_id=pad, bos_token_id=start, eos_token_id=eos,
            decoder_start_token_id=start))
    if name == "bart":
        return models.BART(models.BartConfig(
            vocab_size=vocab, d_model=d, encoder_layers=layers, decoder_layers=layers,
            encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=4 * d,
            decoder_ffn_dim=4 * d, max_position_embeddings=context, dropout=dropout,
            pad_token_id=pad, bos_token_id=start, eos_token_id=eos, decoder_start_token_id=start,
            forced_eos_token_id=None))
    if name == "t5":
        return models.T5(models.T5Config(
            vocab_size=vocab, d_model=d, d_kv=d // heads, d_ff=4 * d, num_layers=layers,
            num_decoder_layers=layers, num_heads=heads, dropout_rate=dropout,
            pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=start))
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(NAMES)}")
