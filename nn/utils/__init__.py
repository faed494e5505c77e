"""nn.utils, as torch.nn.utils: `rnn` (padding and packing variable-length sequences)."""
from . import rnn
