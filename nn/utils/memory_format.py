"""convert_conv2d/3d_weight_memory_format: lay out every (transposed) convolution weight of
a module in `memory_format` (e.g. tt.channels_last), keeping each Parameter object (an
optimizer holding it sees the same tensor); values do not change."""
import tinytensor as tt

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, classes):
    for m in module.modules():
        if type(m).__name__ in classes:
            with tt.no_grad():
                w = m.weight.detach().contiguous(memory_format=memory_format)
            m.weight.data = w.data
            m.weight._version[0] += 1
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    return _convert(module, memory_format, ("Conv2d", "ConvTranspose2d"))


def convert_conv3d_weight_memory_format(module, memory_format):
    return _convert(module, memory_format, ("Conv3d", "ConvTranspose3d"))
