"""models: the Transformer family on tinytensor, weight-compatible with HuggingFace."""
from .gpt import GPT, GPTConfig
from .generation import generate
from .hf import from_hf
from . import gpt_hf  # noqa: F401  (registers GPT-1/GPT-2 with from_hf and adds GPT.save_hf)
from .llama import Llama, LlamaConfig
from . import llama_hf  # noqa: F401  (registers LLaMA with from_hf and adds Llama.save_hf)
from .bert_hf import BERT, BertConfig, mask_tokens  # noqa: F401  (bert_hf also registers BERT with from_hf and adds BERT.save_hf)
from .bart import BART, BartConfig, Marian, MarianConfig
from . import bart_hf  # noqa: F401  (registers BART with from_hf and adds BART.save_hf)
from . import marian_hf  # noqa: F401  (registers Marian with from_hf and adds Marian.save_hf)
from .transformer import Transformer, TransformerConfig, paper_optimizer
from .t5 import T5, T5Config
from . import t5_hf  # noqa: F401  (registers T5 with from_hf and adds T5.save_hf)
from .seq2seq import Seq2SeqCache, generate_seq2seq
