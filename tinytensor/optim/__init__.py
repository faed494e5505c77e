"""tt.optim as torch.optim: the optimizers and `tt.optim.lr_scheduler`.

The optimizers are nn.optim's (the same classes: `tt.optim.AdamW is tt.nn.optim.AdamW`),
with torch's signatures, `fused=`/`foreach=` included (accepted and recorded in each group;
there is one implementation of each update here, see nn/optim.py)."""
from tinytensor.nn.optim import SGD, Adam, AdamW, Optimizer

from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
