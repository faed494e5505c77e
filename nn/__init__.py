"""nn: modules, Transformer building blocks, losses, optimizers, schedules, checkpoints."""
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential
from .layers import GELU, Dropout, Embedding, Identity, LayerNorm, Linear, ReLU, RMSNorm, SiLU
