"""Convolution and its gradients computed by PyTorch in float64 (torch.nn.functional +
autograd).  Import this module only after ``pytest.importorskip("torch")``."""

import numpy as np
import torch

F = torch.nn.functional


def as_tensor(a, grad=False):
    """A float64 tensor of ``a`` (contiguous copy), optionally requiring grad."""
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))
    return t.requires_grad_(grad)


def torch_conv2d(x, w, b, stride, pads, dilation, groups, g=None):
    """float64 torch forward (+ autograd gradients when g is given); asymmetric pads via F.pad.

    Returns y, or (y, dx, dw, db) when ``g`` (the output gradient) is given."""
    xt, wt = as_tensor(x, True), as_tensor(w, True)
    bt = None if b is None else as_tensor(b, True)
    (top, bottom), (left, right) = pads
    y = F.conv2d(F.pad(xt, (left, right, top, bottom)), wt, bt, tuple(stride), 0,
                 tuple(dilation), groups)
    if g is None:
        return y.detach().numpy()
    gt = as_tensor(g)
    dx, dw = torch.autograd.grad(y, (xt, wt), gt)
    db = gt.sum(dim=(0, 2, 3)).numpy()
    return y.detach().numpy(), dx.numpy(), dw.numpy(), db


def torch_conv_transpose2d(x, w, b, stride, pads, output_padding, dilation, groups, g=None):
    """float64 torch transposed conv; per-side pads by cropping the padding-0 result.

    Returns y, or (y, dx, dw) when ``g`` (the output gradient) is given."""
    xt, wt = as_tensor(x, True), as_tensor(w, True)
    bt = None if b is None else as_tensor(b, True)
    (top, bottom), (left, right) = pads
    full = F.conv_transpose2d(xt, wt, bt, tuple(stride), 0, tuple(output_padding), groups,
                              tuple(dilation))
    y = full[:, :, top:full.shape[2] - bottom, left:full.shape[3] - right]
    if g is None:
        return y.detach().numpy()
    dx, dw = torch.autograd.grad(y, (xt, wt), as_tensor(g))
    return y.detach().numpy(), dx.numpy(), dw.numpy()
