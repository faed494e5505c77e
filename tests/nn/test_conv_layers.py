"""Conv and pooling modules against torch.nn with copied weights, in float64: outputs, input
and parameter gradients; torch's init bounds, parameter names and shapes; reprs; errors."""
import math

import numpy as np
import pytest
import torch

import tinytensor as tt
from tinytensor import nn

RNG = np.random.default_rng(0)


def _run(ours, theirs, x, *extra):
    theirs = theirs.double()
    ours.to(tt.float64)
    ours.load_state_dict({k: tt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    xt, xr = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours(xt, *extra), theirs(xr, *extra)
    out, ref = (out[0], ref[0]) if isinstance(ref, tuple) else (out, ref)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.standard_normal(tuple(ref.shape))
    out.backward(tt.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-10, atol=1e-12)
    ours_p, theirs_p = dict(ours.named_parameters()), dict(theirs.named_parameters())
    assert list(ours_p) == list(theirs_p)
    for name, p in theirs_p.items():
        np.testing.assert_allclose(ours_p[name].grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


def _x(*shape):
    return RNG.standard_normal(shape)


def both(name, *args, **kw):
    return lambda: getattr(nn, name)(*args, **kw), lambda: getattr(torch.nn, name)(*args, **kw)


CASES = [
    ("conv1d", both("Conv1d", 3, 4, 3, stride=2, padding=1), _x(2, 3, 9)),
    ("conv1d same no bias", both("Conv1d", 4, 2, 4, padding="same", bias=False, dilation=2), _x(2, 4, 9)),
    ("conv2d", both("Conv2d", 3, 8, 3, padding=1), _x(2, 3, 6, 5)),
    ("conv2d groups dilation", both("Conv2d", 4, 6, (3, 2), stride=(2, 1), padding=(2, 1), dilation=2, groups=2),
     _x(2, 4, 9, 7)),
    ("conv2d valid", both("Conv2d", 2, 3, 2, padding="valid"), _x(1, 2, 5, 5)),
    ("conv2d unbatched", both("Conv2d", 3, 2, 3), _x(3, 5, 5)),
    ("conv3d", both("Conv3d", 2, 3, (2, 3, 2), stride=(1, 2, 1), padding=1), _x(1, 2, 4, 5, 4)),
    ("convtranspose1d", both("ConvTranspose1d", 3, 4, 3, stride=2, padding=1, output_padding=1), _x(2, 3, 5)),
    ("convtranspose2d", both("ConvTranspose2d", 4, 6, 3, stride=2, groups=2, dilation=(1, 2)), _x(2, 4, 4, 3)),
    ("convtranspose2d no bias", both("ConvTranspose2d", 2, 3, 2, bias=False), _x(1, 2, 3, 3)),
    ("convtranspose3d", both("ConvTranspose3d", 2, 2, 2, stride=2, padding=(0, 1, 0)), _x(1, 2, 2, 3, 2)),
    ("maxpool1d", both("MaxPool1d", 3, stride=2, padding=1), _x(2, 3, 8)),
    ("maxpool2d", both("MaxPool2d", 3, stride=2, padding=1, ceil_mode=True), _x(2, 3, 8, 7)),
    ("maxpool2d indices", both("MaxPool2d", 2, return_indices=True), _x(2, 3, 6, 6)),
    ("maxpool3d", both("MaxPool3d", 2, dilation=(1, 1, 2)), _x(1, 2, 4, 4, 6)),
    ("avgpool1d", both("AvgPool1d", 3, stride=2, padding=1, count_include_pad=False), _x(2, 3, 8)),
    ("avgpool2d", both("AvgPool2d", 3, stride=2, padding=1, ceil_mode=True), _x(2, 3, 8, 7)),
    ("avgpool2d divisor", both("AvgPool2d", 2, divisor_override=3), _x(2, 3, 6, 6)),
    ("avgpool3d", both("AvgPool3d", 2, stride=1), _x(1, 2, 3, 4, 4)),
    ("adaptiveavgpool1d", both("AdaptiveAvgPool1d", 3), _x(2, 3, 8)),
    ("adaptiveavgpool2d", both("AdaptiveAvgPool2d", (1, 1)), _x(2, 3, 5, 7)),
    ("adaptiveavgpool3d", both("AdaptiveAvgPool3d", (2, None, 3)), _x(1, 2, 5, 3, 7)),
    ("adaptivemaxpool1d", both("AdaptiveMaxPool1d", 3), _x(2, 3, 8)),
    ("adaptivemaxpool2d", both("AdaptiveMaxPool2d", (2, 3), return_indices=True), _x(2, 3, 5, 7)),
    ("adaptivemaxpool3d", both("AdaptiveMaxPool3d", 2), _x(1, 2, 5, 3, 7)),
]


@pytest.mark.parametrize("name,make,x", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, make, x):
    ours, theirs = make
    _run(ours(), theirs(), x)


def test_conv_transpose_output_size_matches_torch():
    ours = nn.ConvTranspose2d(3, 2, 3, stride=3, padding=1)
    theirs = torch.nn.ConvTranspose2d(3, 2, 3, stride=3, padding=1)
    x = _x(1, 3, 4, 4)
    for size in [(10, 10), (11, 12), (1, 2, 12, 10)]:
        _run(ours, theirs, x, size)
    with pytest.raises(ValueError, match=r"ConvTranspose2d: requested an output size of \(13, 10\), but "
                                         r"valid sizes range from \(10, 10\) to \(12, 12\)"):
        ours(tt.tensor(x), output_size=(13, 10))


def test_unpool_modules_invert_pooling():
    x = _x(2, 3, 7, 6)
    y, i = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    ref = torch.nn.MaxUnpool2d(2)(y, i, output_size=x.shape)
    ours = nn.MaxUnpool2d(2)(tt.tensor(y.numpy()), tt.tensor(i.numpy()), output_size=x.shape)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.parametrize("name,args,fan_in", [
    ("Conv2d", (6, 8, 3), 6 * 9), ("Conv1d", (4, 6, 5, 1, 0, 1, 2), 2 * 5),
    ("Conv3d", (2, 4, (1, 2, 3)), 2 * 6), ("ConvTranspose2d", (6, 4, 3), 4 * 9),
    ("ConvTranspose1d", (4, 6, 2, 1, 0, 0, 2), 3 * 2),
])
def test_parameters_and_default_init_follow_torch(name, args, fan_in):
    tt.manual_seed(0)
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for p in (ours.weight, ours.bias):
        v = p.detach().numpy()
        assert v.min() >= -bound and v.max() <= bound and v.max() - v.min() > bound / 2


def test_reprs_match_torch():
    for name, args, kw in [("Conv2d", (3, 8, 3), {"padding": 1}), ("Conv1d", (4, 2, 3), {"bias": False, "groups": 2}),
                           ("Conv2d", (3, 8, 3), {"padding": "same"}),
                           ("ConvTranspose2d", (4, 2, 3), {"stride": 2, "output_padding": 1, "dilation": 2})]:
        assert repr(getattr(nn, name)(*args, **kw)).split("  #")[0] == repr(getattr(torch.nn, name)(*args, **kw))



@pytest.mark.parametrize("name", ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
                                  "AvgPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"])
def test_pooling_reprs_match_torch(name):
    # the window's part (kernel_size, stride, padding) is written once, in nn.pooling._Window;
    # torch keeps AvgPool1d's and MaxUnpoolNd's window as tuples, (2,), and so do we
    for args, kw in [((2,), {}), ((3, 1, 1), {})] + ([((3,), {"dilation": 2, "ceil_mode": True})]
                                                     if name.startswith("MaxPool") else []):
        ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
        assert repr(ours) == repr(theirs)
        assert (ours.kernel_size, ours.stride, ours.padding) == (theirs.kernel_size, theirs.stride, theirs.padding)

def test_padding_modes_other_than_zeros_are_refused_clearly():
    with pytest.raises(NotImplementedError, match="Conv2d: padding_mode='reflect' is not supported yet"):
        nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
    with pytest.raises(ValueError, match="Conv2d: padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match=r"Conv2d: in_channels \(3\) must be divisible by groups \(2\)"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="ConvTranspose2d: invalid padding string 'same'"):
        nn.ConvTranspose2d(3, 4, 3, padding="same")
