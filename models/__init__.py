"""models: the Transformer family on tinytensor, weight-compatible with HuggingFace."""
from .gpt import GPT, GPTConfig
from .generation import generate
from .hf import from_hf
from . import gpt_hf  # noqa: F401  (registers GPT-1/GPT-2 with from_hf and adds GPT.save_hf)
