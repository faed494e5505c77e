"""The weight initialisation the HuggingFace ports share (BART, BERT, GPT-2, Llama): every
parameter read by name in registration order, so the same seed draws the same numbers."""
import tinytensor as tt


def normal_init(model, std, is_norm, pad_rows=()):
    """Norm weights 1 and norm biases 0 (is_norm(name)), other biases 0, every other
    parameter N(0, std) (std a number, or a function of the name); then the padding row
    of each (weight, pad index) of pad_rows set to 0 (a None index: no row)."""
    std_of = std if callable(std) else (lambda name: std)
    with tt.no_grad():
        for name, p in model.named_parameters():
            if is_norm(name):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(tt.randn(*p.shape) * std_of(name))
        for weight, pad in pad_rows:
            if pad is not None:
                weight[pad] = 0.0
