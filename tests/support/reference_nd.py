"""The float64 reference for 1-D and 3-D (any rank) convolution, its gradients, the transposed
convolution and the padding modes.

Written for obviousness, not speed, the way ``reference.py`` is in 2-D: an explicit Python
loop over groups and kernel taps (every index tuple of the kernel), and for each tap one
einsum over a strided window of the padded input.  Each pass is written on its own (the data
gradient scatters, the transposed convolution scatters, its data gradient gathers), never by
calling another pass, and nothing here imports cconv.

Padding modes are ``numpy.pad``'s: the forward pass and the weight gradient read the input
padded by ``numpy.pad`` (mode "reflect", "symmetric", "edge" for "replicate", "wrap" for
"circular", "constant"); the data gradient of the padded input is folded back through the
index image ``numpy.pad(arange(size), mode)`` (which input pixel each padded pixel copies).

Conventions (channels first, float64):

* ``x``       (N, C, *spatial)
* ``w``       (K, C // groups, *kernel)       -- transposed: (C_in, K // groups, *kernel)
* ``pads``    one (begin, end) pair per spatial axis
* ``stride``, ``dilation``: an int or one int per axis
* forward:    y[n, k, i...] = b[k] + sum_{c, t...} xpad[n, g*Cg + c, i*s + t*d ...] * w[k, c, t...]
"""

import itertools
import math

import numpy as np

__all__ = [
    "NUMPY_MODES",
    "as_tuple",
    "resolve_padding",
    "conv_output_sizes",
    "transpose_output_sizes",
    "ref_pad",
    "ref_fold",
    "ref_conv",
    "ref_backward_data",
    "ref_backward_weight",
    "ref_backward_bias",
    "ref_conv_transpose",
    "ref_conv_transpose_backward_data",
    "ref_conv_transpose_backward_weight",
    "to_channels_last",
    "from_channels_last",
    "weight_to_last",
    "weight_from_last",
]

NUMPY_MODES = {"zeros": "constant", "constant": "constant", "reflect": "reflect",
               "symmetric": "symmetric", "replicate": "edge", "circular": "wrap"}


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------

def as_tuple(v, rank):
    """int -> (v,) * rank; a sequence -> tuple of ints."""
    if isinstance(v, (int, np.integer)):
        return (int(v),) * rank
    return tuple(int(a) for a in v)


def resolve_padding(padding, spatial, kernel, stride=1, dilation=1):
    """Any forward padding form as one (begin, end) pair per axis, by the README's rules.

    "same": total = max((ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0), the odd pixel
    at the END ("same_lower": at the START); "full": (k - 1) * d on each side.
    """
    rank = len(spatial)
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * rank
        if padding == "full":
            return tuple(((k - 1) * d, (k - 1) * d) for k, d in zip(kernel, dilation))
        out = []
        for size, k, s, d in zip(spatial, kernel, stride, dilation):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            out.append((big, small) if padding == "same_lower" else (small, big))
        return tuple(out)
    if isinstance(padding, (int, np.integer)):
        return ((int(padding), int(padding)),) * rank
    if rank == 1 and len(padding) == 2 and all(isinstance(p, (int, np.integer)) for p in padding):
        return ((int(padding[0]), int(padding[1])),)
    return tuple((int(p), int(p)) if isinstance(p, (int, np.integer)) else (int(p[0]), int(p[1]))
                 for p in padding)


def conv_output_sizes(spatial, kernel, stride, pads, dilation):
    """Output sizes of a forward convolution."""
    rank = len(spatial)
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    return tuple((size + lo + hi - (k - 1) * d - 1) // s + 1 for size, k, s, (lo, hi), d
                 in zip(spatial, kernel, stride, pads, dilation))


def transpose_output_sizes(spatial, kernel, stride, pads, dilation, output_padding=0):
    """Output sizes of a transposed convolution (PyTorch's formula)."""
    rank = len(spatial)
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    op = as_tuple(output_padding, rank)
    return tuple((size - 1) * s - lo - hi + (k - 1) * d + 1 + o for size, k, s, (lo, hi), d, o
                 in zip(spatial, kernel, stride, pads, dilation, op))


def to_channels_last(a):
    """(N, C, *spatial) -> (N, *spatial, C), contiguous."""
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def from_channels_last(a):
    """(N, *spatial, C) -> (N, C, *spatial) (a view)."""
    return np.moveaxis(a, -1, 1)


def weight_to_last(w):
    """(O, I, *kernel) -> (*kernel, I, O), contiguous."""
    return np.ascontiguousarray(np.transpose(w, (*range(2, w.ndim), 1, 0)))


def weight_from_last(w):
    """(*kernel, I, O) -> (O, I, *kernel) (a view)."""
    return np.transpose(w, (w.ndim - 1, w.ndim - 2, *range(w.ndim - 2)))


def _window(a, taps, out_sizes, stride, dilation):
    """a[:, :, t*d + i*s ...] for i < out along each spatial axis (a strided view)."""
    index = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                  for t, o, s, d in zip(taps, out_sizes, stride, dilation))
    return a[(slice(None), slice(None)) + index]


def _sub(spec, rank):
    """An einsum spec with ``_`` spelled out as one letter per spatial axis."""
    return spec.replace("_", "xyzuvw"[:rank])


def _taps(kernel):
    return itertools.product(*(range(k) for k in kernel))


def ref_pad(x, pads, mode="zeros", value=0.0):
    """``x`` padded along its spatial axes by numpy.pad in ``mode``."""
    widths = ((0, 0), (0, 0)) + tuple(tuple(p) for p in pads)
    if NUMPY_MODES[mode] == "constant":
        return np.pad(x, widths, mode="constant",
                      constant_values=value if mode == "constant" else 0.0)
    return np.pad(x, widths, mode=NUMPY_MODES[mode])


def ref_fold(grad_padded, spatial, pads, mode="zeros"):
    """The adjoint of ``ref_pad`` (value 0): each padded pixel's gradient added to the input
    pixel it copies, found through the index image numpy.pad(arange)."""
    widths = tuple(tuple(p) for p in pads)
    if NUMPY_MODES[mode] == "constant":  # nothing copied: the padding is cropped
        return grad_padded[(slice(None), slice(None)) + tuple(
            slice(lo, lo + size) for (lo, _), size in zip(widths, spatial))].copy()
    index = np.arange(math.prod(spatial)).reshape(spatial)
    if NUMPY_MODES[mode] == "constant":
        padded_index = np.pad(index, widths, mode="constant", constant_values=-1)
    else:
        padded_index = np.pad(index, widths, mode=NUMPY_MODES[mode])
    keep = padded_index >= 0
    n, c = grad_padded.shape[:2]
    out = np.zeros((n, c, math.prod(spatial)))
    for i in range(n):
        for j in range(c):
            np.add.at(out[i, j], padded_index[keep], grad_padded[i, j][keep])
    return out.reshape((n, c) + tuple(spatial))


# --------------------------------------------------------------------------------------------
# convolution and its gradients
# --------------------------------------------------------------------------------------------

def ref_conv(x, w, b=None, stride=1, pads=None, dilation=1, groups=1, mode="zeros", value=0.0):
    """Forward cross-correlation, (N, C, *S) x (K, C/g, *k) -> (N, K, *O), float64."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    rank = x.ndim - 2
    pads = ((0, 0),) * rank if pads is None else pads
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    n, c = x.shape[:2]
    k, cg = w.shape[:2]
    kernel = w.shape[2:]
    assert c == cg * groups and k % groups == 0, (x.shape, w.shape, groups)
    kg = k // groups
    out = conv_output_sizes(x.shape[2:], kernel, stride, pads, dilation)
    assert min(out) >= 1, "kernel larger than padded input"
    xp = ref_pad(x, pads, mode, value)
    y = np.zeros((n, k) + out)
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        for taps in _taps(kernel):
            patch = _window(xg, taps, out, stride, dilation)
            wt = w[(slice(g * kg, (g + 1) * kg), slice(None)) + taps]
            y[:, g * kg:(g + 1) * kg] += np.einsum(_sub("nc_,kc->nk_", rank), patch, wt)
    if b is not None:
        y += np.asarray(b, dtype=np.float64).reshape((1, k) + (1,) * rank)
    return y


def ref_backward_data(gy, w, input_shape, stride=1, pads=None, dilation=1, groups=1,
                      mode="zeros"):
    """d(loss)/dx: scatter-add gy * w into the padded input, then fold (crop for zeros)."""
    gy = np.asarray(gy, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    rank = len(input_shape) - 2
    pads = ((0, 0),) * rank if pads is None else pads
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    n, c = input_shape[:2]
    spatial = tuple(input_shape[2:])
    k, cg = w.shape[:2]
    kernel = w.shape[2:]
    kg = k // groups
    out = conv_output_sizes(spatial, kernel, stride, pads, dilation)
    assert gy.shape == (n, k) + out, (gy.shape, (n, k) + out)
    dxp = np.zeros((n, c) + tuple(size + lo + hi for size, (lo, hi) in zip(spatial, pads)))
    for g in range(groups):
        gg = gy[:, g * kg:(g + 1) * kg]
        dg = dxp[:, g * cg:(g + 1) * cg]
        for taps in _taps(kernel):
            view = _window(dg, taps, out, stride, dilation)  # writes through
            view += np.einsum(_sub("nk_,kc->nc_", rank), gg,
                              w[(slice(g * kg, (g + 1) * kg), slice(None)) + taps])
    return ref_fold(dxp, spatial, pads, mode)


def ref_backward_weight(gy, x, weight_shape, stride=1, pads=None, dilation=1, groups=1,
                        mode="zeros", value=0.0):
    """d(loss)/dw: per tap, correlate gy with the matching window of the padded input."""
    gy = np.asarray(gy, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    rank = x.ndim - 2
    pads = ((0, 0),) * rank if pads is None else pads
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    c = x.shape[1]
    k = weight_shape[0]
    kernel = tuple(weight_shape[2:])
    cg, kg = c // groups, k // groups
    out = conv_output_sizes(x.shape[2:], kernel, stride, pads, dilation)
    assert gy.shape == (x.shape[0], k) + out, (gy.shape, out)
    xp = ref_pad(x, pads, mode, value)
    dw = np.zeros(weight_shape)
    for g in range(groups):
        gg = gy[:, g * kg:(g + 1) * kg]
        xg = xp[:, g * cg:(g + 1) * cg]
        for taps in _taps(kernel):
            patch = _window(xg, taps, out, stride, dilation)
            dw[(slice(g * kg, (g + 1) * kg), slice(None)) + taps] = np.einsum(
                _sub("nk_,nc_->kc", rank), gg, patch)
    return dw


def ref_backward_bias(gy):
    """d(loss)/db for channels-first gy: sum over every axis but the channels."""
    gy = np.asarray(gy, dtype=np.float64)
    return gy.sum(axis=(0,) + tuple(range(2, gy.ndim)))


# --------------------------------------------------------------------------------------------
# transposed convolution (PyTorch semantics; the adjoint of the padded convolution)
# --------------------------------------------------------------------------------------------

def ref_conv_transpose(x, w, b=None, stride=1, pads=None, output_padding=0, dilation=1,
                       groups=1, mode="zeros"):
    """Transposed conv, x (N, C_in, *S), w (C_in, K/g, *k) -> (N, K, *O).

    Every input pixel scatters x[n, c, i...] * w[c, k, t...] to full[n, k, i*s + t*d ...];
    the full image (extended by output_padding at the end) is then folded onto the output
    by ``mode`` (for zeros: cropped by the pads).
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    rank = x.ndim - 2
    pads = ((0, 0),) * rank if pads is None else pads
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    n, cin = x.shape[:2]
    spatial = x.shape[2:]
    cin_w, kg = w.shape[:2]
    kernel = w.shape[2:]
    assert cin == cin_w and cin % groups == 0
    cg = cin // groups
    k = kg * groups
    out = transpose_output_sizes(spatial, kernel, stride, pads, dilation, output_padding)
    assert min(out) >= 1
    full = np.zeros((n, k) + tuple(o + lo + hi for o, (lo, hi) in zip(out, pads)))
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        fg = full[:, g * kg:(g + 1) * kg]
        for taps in _taps(kernel):
            view = _window(fg, taps, spatial, stride, dilation)
            view += np.einsum(_sub("nc_,ck->nk_", rank), xg,
                              w[(slice(g * cg, (g + 1) * cg), slice(None)) + taps])
    y = ref_fold(full, out, pads, "zeros" if mode == "constant" else mode)
    if b is not None:
        y += np.asarray(b, dtype=np.float64).reshape((1, k) + (1,) * rank)
    return y


def ref_conv_transpose_backward_data(gy, w, input_shape, stride=1, pads=None, dilation=1,
                                     groups=1, mode="zeros"):
    """d(loss)/dx of the transposed conv: gather the padded gy at every tap."""
    gy = np.asarray(gy, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    rank = len(input_shape) - 2
    pads = ((0, 0),) * rank if pads is None else pads
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    n, cin = input_shape[:2]
    spatial = tuple(input_shape[2:])
    kg = w.shape[1]
    kernel = w.shape[2:]
    cg = cin // groups
    gp = ref_pad(gy, pads, "zeros" if mode == "constant" else mode)
    dx = np.zeros((n, cin) + spatial)
    for g in range(groups):
        fg = gp[:, g * kg:(g + 1) * kg]
        for taps in _taps(kernel):
            patch = _window(fg, taps, spatial, stride, dilation)
            wt = w[(slice(g * cg, (g + 1) * cg), slice(None)) + taps]
            dx[:, g * cg:(g + 1) * cg] += np.einsum(_sub("nk_,ck->nc_", rank), patch, wt)
    return dx


def ref_conv_transpose_backward_weight(gy, x, weight_shape, stride=1, pads=None, dilation=1,
                                       groups=1, mode="zeros"):
    """d(loss)/dw of the transposed conv, w (C_in, K/g, *k)."""
    gy = np.asarray(gy, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    rank = x.ndim - 2
    pads = ((0, 0),) * rank if pads is None else pads
    stride, dilation = as_tuple(stride, rank), as_tuple(dilation, rank)
    cin = x.shape[1]
    spatial = x.shape[2:]
    kg = weight_shape[1]
    kernel = tuple(weight_shape[2:])
    cg = cin // groups
    gp = ref_pad(gy, pads, "zeros" if mode == "constant" else mode)
    dw = np.zeros(weight_shape)
    for g in range(groups):
        fg = gp[:, g * kg:(g + 1) * kg]
        xg = x[:, g * cg:(g + 1) * cg]
        for taps in _taps(kernel):
            patch = _window(fg, taps, spatial, stride, dilation)
            dw[(slice(g * cg, (g + 1) * cg), slice(None)) + taps] = np.einsum(
                _sub("nc_,nk_->ck", rank), xg, patch)
    return dw
