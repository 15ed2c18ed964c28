"""The float64 reference for 2-D convolution, its gradients and the transposed convolution.

This is the only reference in the test suite; tests/test_reference.py checks every function
here against PyTorch (forward, both gradients, transposed and its gradients; stride,
dilation, asymmetric padding, groups) and checks that the gradients are the adjoints of the
forward passes.

Everything is written for obviousness, not speed: an explicit Python loop over groups and
kernel taps (r, s), and for each tap one einsum over a strided window of the zero-padded
input.  The backward passes are written on their own (scatter-add / correlate per tap), never
by calling the forward, so a mistake shared by forward and backward in the library cannot
hide behind the same mistake in the reference.  NaN and Inf propagate as the definition
says (the padding is real zeros: 0 * Inf = NaN where a non-finite weight meets the padding).

Conventions (all NCHW / OIHW, float64):

* ``x``       (N, C, H, W)
* ``w``       (K, C // groups, R, S)     -- transposed: (C_in, K // groups, R, S)
* ``pads``    ((top, bottom), (left, right))
* ``stride``  (sh, sw) or an int; ``dilation`` (dh, dw) or an int
* forward:    y[n, k, i, j] = b[k] + sum_{c, r, s} xpad[n, g*Cg + c, i*sh + r*dh, j*sw + s*dw]
                                                    * w[k, c, r, s]       (k in group g)
"""

import math

import numpy as np

__all__ = [
    "pair",
    "resolve_padding",
    "resolve_transpose_padding",
    "conv_output_size",
    "transpose_output_size",
    "ref_conv2d",
    "ref_backward_data",
    "ref_backward_weight",
    "ref_backward_bias",
    "ref_conv_transpose2d",
    "ref_conv_transpose2d_backward_data",
    "ref_conv_transpose2d_backward_weight",
    "nchw_to_nhwc",
    "nhwc_to_nchw",
    "oihw_to_hwio",
    "hwio_to_oihw",
]

NO_PADS = ((0, 0), (0, 0))


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------

def pair(v):
    """int -> (v, v); a 2-sequence -> tuple."""
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    a, b = v
    return (int(a), int(b))


def _is_per_side(padding):
    return (
        isinstance(padding, (tuple, list))
        and len(padding) == 2
        and all(isinstance(p, (tuple, list)) for p in padding)
    )


def resolve_padding(padding, in_hw, kernel_hw, stride=1, dilation=1):
    """Any forward padding form as ((top, bottom), (left, right)), by the README's rules.

    "same" / "same_upper": total = max((ceil(H/s) - 1) * s + (R - 1) * d + 1 - H, 0),
    the odd extra pixel at the END; "same_lower": the extra pixel at the START; "valid": zeros.
    """
    stride = pair(stride)
    dilation = pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            return NO_PADS
        if padding not in ("same", "same_upper", "same_lower"):
            raise ValueError(f"unknown padding {padding!r}")
        out = []
        for size, k, s, d in zip(in_hw, kernel_hw, stride, dilation):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            out.append((small, big) if padding != "same_lower" else (big, small))
        return tuple(out)
    if isinstance(padding, (int, np.integer)):
        p = int(padding)
        return ((p, p), (p, p))
    if _is_per_side(padding):
        (top, bottom), (left, right) = padding
        return ((int(top), int(bottom)), (int(left), int(right)))
    ph, pw = padding
    return ((int(ph), int(ph)), (int(pw), int(pw)))


def resolve_transpose_padding(padding):
    """conv_transpose2d padding: int / pair / per-side pairs / "valid"."""
    if isinstance(padding, str):
        if padding != "valid":
            raise ValueError(f"bad transpose padding {padding!r}")
        return NO_PADS
    return resolve_padding(padding, (1, 1), (1, 1))


def conv_output_size(in_hw, kernel_hw, stride, pads, dilation):
    """(Ho, Wo) of a forward convolution."""
    stride, dilation = pair(stride), pair(dilation)
    out = []
    for size, k, s, (pa, pb), d in zip(in_hw, kernel_hw, stride, pads, dilation):
        eff = (k - 1) * d + 1
        out.append((size + pa + pb - eff) // s + 1)
    return tuple(out)


def transpose_output_size(in_hw, kernel_hw, stride, pads, dilation, output_padding=0):
    """(Ho, Wo) of a transposed convolution (PyTorch's formula)."""
    stride, dilation, output_padding = pair(stride), pair(dilation), pair(output_padding)
    out = []
    for size, k, s, (pa, pb), d, op in zip(in_hw, kernel_hw, stride, pads, dilation,
                                           output_padding):
        out.append((size - 1) * s - pa - pb + (k - 1) * d + 1 + op)
    return tuple(out)


def nchw_to_nhwc(a):
    return np.transpose(a, (0, 2, 3, 1))


def nhwc_to_nchw(a):
    return np.transpose(a, (0, 3, 1, 2))


def oihw_to_hwio(w):
    return np.transpose(w, (2, 3, 1, 0))


def hwio_to_oihw(w):
    return np.transpose(w, (3, 2, 0, 1))


def _pad(x, pads):
    (top, bottom), (left, right) = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))


def _window(a, r, s, out_hw, stride, dilation):
    """a[:, :, r*dh + i*sh, s*dw + j*sw] for i < Ho, j < Wo (a strided view)."""
    (sh, sw), (dh, dw) = stride, dilation
    ho, wo = out_hw
    return a[:, :, r * dh: r * dh + (ho - 1) * sh + 1: sh,
             s * dw: s * dw + (wo - 1) * sw + 1: sw]


# --------------------------------------------------------------------------------------------
# convolution and its gradients
# --------------------------------------------------------------------------------------------

def ref_conv2d(x, w, b=None, stride=1, pads=NO_PADS, dilation=1, groups=1):
    """Forward cross-correlation, NCHW x OIHW -> NCHW, float64."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    stride, dilation = pair(stride), pair(dilation)
    n, c, h, wd = x.shape
    k, cg, r_, s_ = w.shape
    assert c == cg * groups and k % groups == 0, (x.shape, w.shape, groups)
    kg = k // groups
    ho, wo = conv_output_size((h, wd), (r_, s_), stride, pads, dilation)
    assert ho >= 1 and wo >= 1, "kernel larger than padded input"
    xp = _pad(x, pads)
    y = np.zeros((n, k, ho, wo), dtype=np.float64)
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        for r in range(r_):
            for s in range(s_):
                patch = _window(xg, r, s, (ho, wo), stride, dilation)      # (N, Cg, Ho, Wo)
                y[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", patch, w[g * kg:(g + 1) * kg, :, r, s])
    if b is not None:
        y += np.asarray(b, dtype=np.float64).reshape(1, k, 1, 1)
    return y


def ref_backward_data(gy, w, input_shape, stride=1, pads=NO_PADS, dilation=1, groups=1):
    """d(loss)/dx given gy = d(loss)/dy: scatter-add gy * w into the padded input, then crop."""
    gy = np.asarray(gy, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    stride, dilation = pair(stride), pair(dilation)
    n, c, h, wd = input_shape
    k, cg, r_, s_ = w.shape
    kg = k // groups
    ho, wo = conv_output_size((h, wd), (r_, s_), stride, pads, dilation)
    assert gy.shape == (n, k, ho, wo), (gy.shape, (n, k, ho, wo))
    (top, bottom), (left, right) = pads
    dxp = np.zeros((n, c, h + top + bottom, wd + left + right), dtype=np.float64)
    for g in range(groups):
        gg = gy[:, g * kg:(g + 1) * kg]
        dg = dxp[:, g * cg:(g + 1) * cg]
        for r in range(r_):
            for s in range(s_):
                view = _window(dg, r, s, (ho, wo), stride, dilation)       # writes through
                view += np.einsum("nkhw,kc->nchw", gg, w[g * kg:(g + 1) * kg, :, r, s])
    return dxp[:, :, top:top + h, left:left + wd].copy()


def ref_backward_weight(gy, x, weight_shape, stride=1, pads=NO_PADS, dilation=1, groups=1):
    """d(loss)/dw: per tap, correlate gy with the matching window of the padded input."""
    gy = np.asarray(gy, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    stride, dilation = pair(stride), pair(dilation)
    n, c, h, wd = x.shape
    k, cg, r_, s_ = weight_shape
    kg = k // groups
    ho, wo = conv_output_size((h, wd), (r_, s_), stride, pads, dilation)
    assert gy.shape == (n, k, ho, wo), (gy.shape, (n, k, ho, wo))
    xp = _pad(x, pads)
    dw = np.zeros(weight_shape, dtype=np.float64)
    for g in range(groups):
        gg = gy[:, g * kg:(g + 1) * kg]
        xg = xp[:, g * cg:(g + 1) * cg]
        for r in range(r_):
            for s in range(s_):
                patch = _window(xg, r, s, (ho, wo), stride, dilation)
                dw[g * kg:(g + 1) * kg, :, r, s] = np.einsum("nkhw,nchw->kc", gg, patch)
    return dw


def ref_backward_bias(gy):
    """d(loss)/db for NCHW gy: sum over N, H, W."""
    return np.asarray(gy, dtype=np.float64).sum(axis=(0, 2, 3))


# --------------------------------------------------------------------------------------------
# transposed convolution (PyTorch semantics) and its gradients
# --------------------------------------------------------------------------------------------

def ref_conv_transpose2d(x, w, b=None, stride=1, pads=NO_PADS, output_padding=0, dilation=1,
                         groups=1):
    """Transposed conv, x (N, C_in, H, W), w (C_in, K/groups, R, S) -> (N, K, Ho, Wo).

    Every input pixel scatters x[n, c, i, j] * w[c, k, r, s] to full[n, k, i*sh + r*dh,
    j*sw + s*dw]; the full image (extended by output_padding at the bottom / right) is then
    cropped by pads: out = full[top : top + Ho, left : left + Wo].
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    stride, dilation, op = pair(stride), pair(dilation), pair(output_padding)
    n, cin, h, wd = x.shape
    cin_w, kg, r_, s_ = w.shape
    assert cin == cin_w and cin % groups == 0
    cg = cin // groups
    k = kg * groups
    (sh, sw), (dh, dw) = stride, dilation
    full_h = (h - 1) * sh + (r_ - 1) * dh + 1 + op[0]
    full_w = (wd - 1) * sw + (s_ - 1) * dw + 1 + op[1]
    full = np.zeros((n, k, full_h, full_w), dtype=np.float64)
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        fg = full[:, g * kg:(g + 1) * kg]
        for r in range(r_):
            for s in range(s_):
                view = _window(fg, r, s, (h, wd), stride, dilation)
                view += np.einsum("nchw,ck->nkhw", xg, w[g * cg:(g + 1) * cg, :, r, s])
    ho, wo = transpose_output_size((h, wd), (r_, s_), stride, pads, dilation, op)
    assert ho >= 1 and wo >= 1
    (top, _), (left, _) = pads
    y = full[:, :, top:top + ho, left:left + wo].copy()
    if b is not None:
        y += np.asarray(b, dtype=np.float64).reshape(1, k, 1, 1)
    return y


def _transpose_full(gy, in_hw, kernel_hw, stride, pads, dilation):
    """Embed gy (the cropped transposed-conv output gradient) back into the full image."""
    (sh, sw), (dh, dw) = stride, dilation
    h, wd = in_hw
    r_, s_ = kernel_hw
    n, k, ho, wo = gy.shape
    (top, _), (left, _) = pads
    full_h = max((h - 1) * sh + (r_ - 1) * dh + 1, top + ho)
    full_w = max((wd - 1) * sw + (s_ - 1) * dw + 1, left + wo)
    full = np.zeros((n, k, full_h, full_w), dtype=np.float64)
    full[:, :, top:top + ho, left:left + wo] = gy
    return full


def ref_conv_transpose2d_backward_data(gy, w, input_shape, stride=1, pads=NO_PADS, dilation=1,
                                       groups=1):
    """d(loss)/dx of conv_transpose2d: gather gy at every tap (a forward conv of gy)."""
    gy = np.asarray(gy, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    stride, dilation = pair(stride), pair(dilation)
    n, cin, h, wd = input_shape
    _, kg, r_, s_ = w.shape
    cg = cin // groups
    full = _transpose_full(gy, (h, wd), (r_, s_), stride, pads, dilation)
    dx = np.zeros((n, cin, h, wd), dtype=np.float64)
    for g in range(groups):
        fg = full[:, g * kg:(g + 1) * kg]
        for r in range(r_):
            for s in range(s_):
                patch = _window(fg, r, s, (h, wd), stride, dilation)      # (N, Kg, H, W)
                dx[:, g * cg:(g + 1) * cg] += np.einsum(
                    "nkhw,ck->nchw", patch, w[g * cg:(g + 1) * cg, :, r, s])
    return dx


def ref_conv_transpose2d_backward_weight(gy, x, weight_shape, stride=1, pads=NO_PADS,
                                         dilation=1, groups=1):
    """d(loss)/dw of conv_transpose2d, w (C_in, K/groups, R, S)."""
    gy = np.asarray(gy, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    stride, dilation = pair(stride), pair(dilation)
    n, cin, h, wd = x.shape
    cin_w, kg, r_, s_ = weight_shape
    assert cin == cin_w
    cg = cin // groups
    full = _transpose_full(gy, (h, wd), (r_, s_), stride, pads, dilation)
    dw = np.zeros(weight_shape, dtype=np.float64)
    for g in range(groups):
        fg = full[:, g * kg:(g + 1) * kg]
        xg = x[:, g * cg:(g + 1) * cg]
        for r in range(r_):
            for s in range(s_):
                patch = _window(fg, r, s, (h, wd), stride, dilation)
                dw[g * cg:(g + 1) * cg, :, r, s] = np.einsum("nchw,nkhw->ck", xg, patch)
    return dw


def fold_reference(grad_padded, hw, pads, mode):
    """The adjoint of padding in ``mode`` (cconv's names; a constant's value does not enter)
    applied to an NCHW gradient of the padded input: each padded pixel's gradient added onto
    the pixel it copies."""
    h, w = hw
    index = np.arange(h * w).reshape(h, w)
    numpy_mode = {"reflect": "reflect", "symmetric": "symmetric", "replicate": "edge",
                  "circular": "wrap"}.get(mode, "constant")
    if numpy_mode == "constant":
        padded_index = np.pad(index, pads, mode="constant", constant_values=-1)
    else:
        padded_index = np.pad(index, pads, mode=numpy_mode)
    keep = padded_index >= 0
    n, c = grad_padded.shape[:2]
    out = np.zeros((n, c, h * w))
    for i in range(n):
        for j in range(c):
            np.add.at(out[i, j], padded_index[keep], grad_padded[i, j][keep])
    return out.reshape(n, c, h, w)


# cconv's padding modes as numpy.pad modes (a constant's value passed separately)
NUMPY_MODE = {"reflect": "reflect", "symmetric": "symmetric", "replicate": "edge",
              "circular": "wrap", "constant": "constant", "zeros": "constant"}


def np_pad(x, pads, mode, value=0.0):
    """NCHW ``x`` padded by numpy.pad in ``mode`` (``value`` for ``"constant"``)."""
    kw = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, ((0, 0), (0, 0)) + tuple(pads), mode=NUMPY_MODE[mode], **kw)


def mode_limit_ok(mode, pads, hw):
    """True when ``mode`` can pad axes of sizes ``hw`` by ``pads`` (reflect needs padding
    smaller than the axis, circular at most the axis)."""
    for (lo, hi), size in zip(pads, hw):
        if mode == "reflect" and max(lo, hi) >= size:
            return False
        if mode == "circular" and max(lo, hi) > size:
            return False
    return True
