"""How many of torch.nn's public names tinytensor's `nn` has, and which are missing.

    python -m tests.nn.coverage            # counts by group
    python -m tests.nn.coverage --missing  # and every missing name

What is counted (torch's names, read from the installed torch):
  modules  every public class in `torch.nn` that subclasses `torch.nn.Module`, except
           the Lazy* modules (shape inference at the first call), DataParallel (a
           multi-GPU wrapper), abstract bases (RNNBase, RNNCellBase), deprecated or legacy
           names (Container, NLLLoss2d, CrossMapLRN2d); found as `nn.<Name>`.
  init     the public functions of `torch.nn.init` ending in `_` plus `calculate_gain` (the
           non-underscore spellings are deprecated aliases); found as `nn.init.<name>`.
  utils    the functions in `torch.nn.utils.__all__` (not the deprecated `clip_grad_norm`),
           `torch.nn.utils.rnn`'s public functions, `torch.nn.utils.parametrizations`'s
           (orthogonal, weight_norm, spectral_norm) and `torch.nn.utils.parametrize`'s
           register/remove/is_parametrized/cached; found under the same path in `nn.utils`.
Quantized, fused (`torch.ao`, `torch.nn.intrinsic`) and other private namespaces are not
looked at. The issue's own count (161) used a rule it did not write down; this one is the
rule from here on.
"""
import importlib
import inspect

from tests.coverage_report import report

_NOT_COUNTED = {"DataParallel", "RNNBase", "RNNCellBase", "Container", "NLLLoss2d", "CrossMapLRN2d"}
_RNN_UTILS = ("pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence",
              "unpad_sequence", "unpack_sequence")
_PARAMETRIZE = ("register_parametrization", "remove_parametrizations", "is_parametrized", "cached")


def torch_names():
    """{group: [dotted names under nn]} as torch spells them."""
    import torch.nn as tnn
    mods = sorted(n for n in dir(tnn) if not n.startswith("_") and not n.startswith("Lazy")
                  and n not in _NOT_COUNTED and inspect.isclass(getattr(tnn, n))
                  and issubclass(getattr(tnn, n), tnn.Module))
    init = sorted(n for n in tnn.init.__all__ if n.endswith("_") or n == "calculate_gain")
    utils = sorted(n for n in tnn.utils.__all__ if inspect.isfunction(getattr(tnn.utils, n))
                   and n != "clip_grad_norm")
    utils += [f"rnn.{n}" for n in _RNN_UTILS]
    utils += [f"parametrizations.{n}" for n in ("orthogonal", "weight_norm", "spectral_norm")]
    utils += [f"parametrize.{n}" for n in _PARAMETRIZE]
    return {"modules": mods, "init": [f"init.{n}" for n in init],
            "utils": [f"utils.{n}" for n in utils]}


def has(name):
    """Whether `nn.<name>` resolves (submodules are imported on the way)."""
    obj = importlib.import_module("tinytensor.nn")
    path = "tinytensor.nn"
    for part in name.split("."):
        if not hasattr(obj, part):
            try:
                obj = importlib.import_module(f"{path}.{part}")
            except ImportError:
                return False
        else:
            obj = getattr(obj, part)
        path = f"{path}.{part}"
    return True


def coverage():
    """{group: (have, missing)}."""
    return {g: ([n for n in names if has(n)], [n for n in names if not has(n)])
            for g, names in torch_names().items()}


def main():
    report(__doc__, coverage, lambda have, total: f"tinytensor's nn has {have} of torch.nn's {total} "
                                                   f"counted names ({total - have} missing)")

if __name__ == "__main__":
    main()
