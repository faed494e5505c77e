"""nn: modules, Transformer building blocks, losses, optimizers, schedules, checkpoints."""
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential
from .containers import ParameterDict, ParameterList
from .layers import GELU, Dropout, Embedding, Identity, LayerNorm, Linear, ReLU, RMSNorm, SiLU, Softsign
from .activations import CELU, ELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, Mish, ReLU6, Softmin
from .activations import LeakyReLU, LogSoftmax, Sigmoid, Softmax, Softmax2d, Softplus, Tanh
from .feedforward import FeedForward
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm)
from .sync_batchnorm import SyncBatchNorm
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .shape_layers import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, Flatten, Fold, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, Unflatten, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .attention import KVCache, MultiHeadAttention, convert_torch_mha_state
from .multihead import MultiheadAttention
from .positions import (LearnedPositionalEmbedding, RelativePositionBias, RotaryEmbedding, SinusoidalPositionalEmbedding, alibi_bias, alibi_slopes, apply_rope, relative_position_bucket, rope_cos_sin, sinusoidal_positions)
from .losses import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from .losses import BCELoss, CosineSimilarity, HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss
from .functional_layers import (GLU, PReLU, RReLU, Hardshrink, Softshrink, Tanhshrink, Threshold, Dropout1d, Dropout2d, Dropout3d, AlphaDropout, FeatureAlphaDropout, PixelShuffle, PixelUnshuffle, ChannelShuffle, FractionalMaxPool2d, FractionalMaxPool3d, LPPool1d, LPPool2d, LPPool3d, Bilinear, EmbeddingBag, PairwiseDistance)
from .losses_more import (NLLLoss, CTCLoss, MarginRankingLoss, HingeEmbeddingLoss, CosineEmbeddingLoss, SoftMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, MultiLabelMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss, PoissonNLLLoss, GaussianNLLLoss, AdaptiveLogSoftmaxWithLoss, LinearCrossEntropyLoss)
from . import functional, init
from . import utils
from . import optim
from . import schedules
from .clip import clip_grad_norm_, clip_grad_value_
from .checkpoint import CheckpointError, load, save
from .transformer import Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer, convert_torch_transformer_state
from . import parallel
from .recompute import recompute
from tinytensor.grad_scaler import GradScaler
