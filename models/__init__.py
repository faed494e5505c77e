"""models: the Transformer family on tinytensor, weight-compatible with HuggingFace."""
from .gpt import GPT, GPTConfig
from .llama import Llama, LlamaConfig
from .bert import BERT, BertConfig, mask_tokens
from .bart import BART, BartConfig, Marian, MarianConfig
from .t5 import T5, T5Config
from .lstm_lm import LSTMLanguageModel
from .transformer import Transformer, TransformerConfig, paper_optimizer
from .generation import generate
from .seq2seq import Seq2SeqCache, generate_seq2seq, shift_tokens_right
from .hf import from_hf, save_hf
from .text import Tokenizer
from .resnet import ResNet, resnet18, resnet34, resnet50
from .unet import UNet
# each registers its architectures' HuggingFace layouts with from_hf / save_hf
from . import gpt_hf, llama_hf, bert_hf, bart_hf, marian_hf, t5_hf  # noqa: F401
