"""nn: modules, Transformer building blocks, losses, optimizers, schedules, checkpoints."""
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential
