"""Running a validated pass: arrays to the kernels' views, the result to the caller's array.

Everything here trusts its arguments: the public functions (``functional``) and plans
(``_plan``) have validated them into a ``ConvGeometry`` and checked arrays.  This module
turns the operands into what every algorithm takes (compute-dtype logical NCHW views and a
contiguous OIHW weight), runs the algorithm, and writes ``alpha * result + beta * out`` into
``out`` or a new array of the result dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np
import numpy.typing as npt

from . import _relayout, _workspace
from ._threads import threads_for_work

if TYPE_CHECKING:
    from ._boundary import Boundary
    from ._geometry import Pair
    from .algorithms.base import Algorithm, TransformedWeight

Array = npt.NDArray[Any]


def nchw(array: Array, layout: str) -> Array:
    """A logical (N, C, H, W) view of an array in ``layout`` order (no copy)."""
    return array if layout == "NCHW" else array.transpose(0, 3, 1, 2)


def in_layout(array_nchw: Array, layout: str) -> Array:
    """The inverse of :func:`nchw`: a logical NCHW view back in ``layout`` order."""
    return array_nchw if layout == "NCHW" else array_nchw.transpose(0, 2, 3, 1)


def compute_view(value: npt.ArrayLike, dtype: npt.DTypeLike, layout: str) -> Array:
    """``value`` in the compute dtype (no copy when it already is) as a logical NCHW view."""
    if type(value) is np.ndarray and value.dtype == dtype and layout == "NCHW":
        return value  # the usual call, without asarray / astype (a tiny call's 0.3 us)
    return nchw(np.asarray(value).astype(dtype, copy=False), layout)


def weight_oihw(weight: Array, weight_layout: str, dtype: npt.DTypeLike,
                nthreads: int = 1) -> Array:
    """A contiguous (K, C/groups, R, S) weight of the compute dtype."""
    if weight_layout == "OIHW":
        if (type(weight) is np.ndarray and weight.dtype == dtype
                and weight.flags.c_contiguous):
            return weight  # as ascontiguousarray would, without its call (0.3 us)
        return np.ascontiguousarray(weight, dtype=dtype)
    return _relayout.weight_channels_first(np.asarray(weight).astype(dtype, copy=False),
                                           nthreads)


def weight_for(impl: Algorithm, op: str, weight: Array, weight_layout: str,
               dtype: np.dtype[Any], nthreads: int) -> Array:
    """The (K, C/groups, R, S) weight ``impl`` reads in pass ``op``: a view of ``weight`` in
    the compute dtype where the algorithm takes any strides, else :func:`weight_oihw`'s
    copy."""
    if op not in impl.strided_weight_ops:
        return weight_oihw(weight, weight_layout, dtype, nthreads)
    w = np.asarray(weight).astype(dtype, copy=False)
    return w if weight_layout == "OIHW" else w.transpose(3, 2, 0, 1)


def weight_in_layout(grad_oihw: Array, weight_layout: str, nthreads: int = 1) -> Array:
    """A (K, C/groups, R, S) weight gradient in ``weight_layout`` order."""
    if weight_layout == "HWIO":
        return _relayout.weight_channels_last(grad_oihw, nthreads)
    return grad_oihw


def pad_bottom_right(array_nchw: Array, extra: Pair) -> Array:
    """``array_nchw`` with ``extra`` = (rows, cols) of zeros appended at the bottom / right."""
    if extra == (0, 0):
        return array_nchw
    return np.pad(array_nchw, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))


def emit(compute: Callable[[Array, float, float], None], shape: Sequence[int], layout: str,
         dtype: np.dtype[Any], result_dtype: np.dtype[Any], out: Optional[Array], alpha: float,
         beta: float, empty: bool, reads: Sequence[Optional[Array]] = ()) -> Array:
    """Run ``compute(y_nchw, alpha, beta)`` (which writes ``alpha*result + beta*y``) into
    ``out`` or a new array, converting dtypes where the result dtype is not computed natively.

    ``empty``: the batch is empty, so the result is all zeros and nothing is computed.
    ``reads``: the arrays ``compute`` reads; an ``out`` that may share memory with one of them
    gets the result computed apart first (as NumPy's ufuncs do): the kernels write their
    output while they still read their inputs.
    """
    if empty:
        if out is None:
            return np.zeros(shape, result_dtype)
        if beta == 0:
            out[...] = 0
        else:
            out *= beta
        return out
    if out is not None and out.dtype == dtype and not overlaps(out, reads):
        compute(nchw(out, layout), alpha, beta)
        return out
    y = _workspace.empty_result(shape, dtype)
    compute(nchw(y, layout), alpha if out is None else 1.0, 0.0)
    if out is None:
        return y.astype(result_dtype, copy=False)
    if beta == 0:
        out[...] = alpha * y
    else:
        out[...] = alpha * y + beta * out.astype(dtype)
    return out


def overlaps(out: Array, reads: Sequence[Optional[Array]]) -> bool:
    """Whether ``out`` may share memory with one of ``reads`` (None entries skipped): then a
    kernel writing ``out`` while reading them needs the result computed apart.
    ``numpy.may_share_memory`` compares address bounds only (cheap); a false alarm costs a
    copy."""
    return any(a is not None and np.may_share_memory(out, a) for a in reads)


def scaled_into(result: Array, out: Optional[Array], alpha: float, beta: float) -> Array:
    """``alpha * result (+ beta * out)`` for results computed whole (weights, bias)."""
    if out is None:
        return (result * alpha).astype(result.dtype, copy=False) if alpha != 1 else result
    if beta == 0:
        out[...] = alpha * result
    else:
        out[...] = alpha * result + beta * out
    return out


def forward(impl: Algorithm, x: Array, w: Array, bias: Optional[Array], out: Optional[Array],
            alpha: float, beta: float, nthreads: int, result_dtype: np.dtype[Any],
            prepared: Optional[TransformedWeight] = None, extra: Pair = (0, 0),
            boundary: Optional[Boundary] = None) -> Array:
    """Forward pass of ``impl.geom``: ``x`` and ``w`` in the geometry's layouts.

    ``prepared`` (a ``TransformedWeight``) is used only when it was made by this algorithm
    for this geometry; otherwise the weight is transformed as usual.  ``extra``: rows / cols
    of the forward output beyond the result, cropped at the bottom / right (transposed
    convolution's data gradient, whose input lacked them).  ``boundary``: the
    ``cconv._boundary.Boundary`` of a padding mode, which pads ``x`` to ``impl.geom``'s
    input first, unless ``impl`` runs the padding mode itself (``impl.geom`` has it)."""
    g = impl.geom
    if nthreads > 1:
        nthreads = threads_for_work(g.flops, nthreads)
    if boundary is not None and g.N and g.padding_mode == "zeros":
        x = boundary.pad(x, nthreads)
    xv = compute_view(x, g.dtype, g.layout)
    wv = weight_for(impl, "forward", w, g.weight_layout, g.dtype, nthreads)
    if prepared is not None and not prepared.serves(impl, g):
        prepared = None
    rows, cols = g.OH - extra[0], g.OW - extra[1]
    if out is None and extra == (0, 0) and result_dtype == g.dtype and g.N:
        # the usual call, without emit's closure (a tenth of a tiny call's Python time)
        y = _workspace.empty_result(g.output_shape(), g.dtype)
        impl.forward(xv, wv, bias, nchw(y, g.layout), alpha, 0.0, nthreads, prepared)
        return y

    def compute(y: Array, a: float, b: float) -> None:
        if extra == (0, 0):
            impl.forward(xv, wv, bias, y, a, b, nthreads, prepared)
            return
        full = np.empty((g.N, g.K, g.OH, g.OW), g.dtype)
        impl.forward(xv, wv, bias, full, 1.0, 0.0, nthreads, prepared)
        cropped = full[:, :, :rows, :cols]
        y[...] = a * cropped + (b * y if b != 0 else 0)

    shape = (g.N, g.K, rows, cols) if g.layout == "NCHW" else (g.N, rows, cols, g.K)
    return emit(compute, shape, g.layout, g.dtype, result_dtype, out, alpha, beta, g.N == 0,
                (x, w, bias))


def backward_data(impl: Algorithm, dy: Array, w: Array, out: Optional[Array], alpha: float,
                  beta: float, nthreads: int, result_dtype: np.dtype[Any],
                  bias: Optional[Array] = None, extra: Pair = (0, 0),
                  boundary: Optional[Boundary] = None) -> Array:
    """Backward-data of ``impl.geom`` (also transposed convolution's forward, with ``bias``
    and ``extra`` rows / cols its input lacks at the bottom / right).  ``boundary``: the
    ``Boundary`` of a padding mode; the gradient of ``impl.geom``'s (padded) input is then
    folded onto the pixels the padding copied, giving the gradient of ``boundary.geom``'s
    (unless ``impl`` runs the mode itself: ``impl.geom`` has it)."""
    g = impl.geom
    if nthreads > 1:
        nthreads = threads_for_work(g.flops, nthreads)
    dyv = pad_bottom_right(compute_view(dy, g.dtype, g.layout), extra)
    wv = weight_for(impl, "backward_data", w, g.weight_layout, g.dtype, nthreads)
    if boundary is None or g.padding_mode != "zeros":  # no mode, or ``impl`` builds it
        return emit(lambda dx, a, b: impl.backward_data(dyv, wv, dx, a, b, nthreads, bias=bias),
                    g.input_shape(), g.layout, g.dtype, result_dtype, out, alpha, beta,
                    g.N == 0, (dy, w, bias))

    def folded(dx: Array, a: float, b: float) -> None:
        if boundary.fold_split(lambda ring, image, origin: impl.backward_data_split(
                dyv, wv, image, ring, origin, a, b, nthreads, bias=bias), dx, a, nthreads):
            return
        boundary.fold_gradient(lambda padded: impl.backward_data(dyv, wv, padded, 1.0, 0.0,
                                                                 nthreads),
                               dx, a, b, bias, nthreads)

    outer = boundary.geom
    return emit(folded, outer.input_shape(), g.layout, g.dtype, result_dtype, out, alpha, beta,
                g.N == 0, (dy, w, bias))


def backward_weight(impl: Algorithm, dy: Array, x: Array, out: Optional[Array], alpha: float,
                    beta: float, nthreads: int, result_dtype: np.dtype[Any],
                    extra: Pair = (0, 0), boundary: Optional[Boundary] = None) -> Array:
    """Backward-weight of ``impl.geom``, in its ``weight_layout`` (``extra``: as
    :func:`backward_data`, applied to ``dy``, which is transposed convolution's input;
    ``boundary``: as :func:`forward`, padding ``x`` unless ``impl`` builds the mode)."""
    g = impl.geom
    if nthreads > 1:
        nthreads = threads_for_work(g.flops, nthreads)
    if boundary is not None and g.N and g.padding_mode == "zeros":
        x = boundary.pad(x, nthreads)
    if g.N == 0:
        grad = np.zeros((g.K, g.Cg, g.R, g.S), g.dtype)
    else:
        grad = impl.backward_weight(pad_bottom_right(compute_view(dy, g.dtype, g.layout), extra),
                                    compute_view(x, g.dtype, g.layout), nthreads)
    grad = weight_in_layout(grad, g.weight_layout, nthreads)
    return scaled_into(grad.astype(result_dtype, copy=False), out, alpha, beta)
