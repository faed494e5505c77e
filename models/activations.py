"""HuggingFace's activation names (transformers' ACT2FN) as tinytensor functions: the one
table the models read their config's activation from."""
import tinytensor.functional as F


def _gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


ACT2FN = {
    "gelu": F.gelu,                  # exact (erf)
    "gelu_new": _gelu_tanh,          # the tanh approximation (GPT-2's)
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
    "tanh": F.tanh,
}


def activation(name, model, field):
    """ACT2FN[name], or a ValueError naming the model and the config field it came from."""
    if not isinstance(name, str) or name not in ACT2FN:
        raise ValueError(f"{model}: unsupported {field} {name!r}; expected one of {sorted(ACT2FN)}")
    return ACT2FN[name]
