"""Rank-generic checks of cconv's 1-D / 3-D functions against ``reference_nd``.

The functions to check come in as a module argument (``cconv.functional_nd``), looked up by
rank (``conv1d``, ``conv3d_backward_data``, ...): this package must not import cconv (see
``support/__init__.py``).
"""

from dataclasses import replace

import numpy as np

from .checks import assert_close
from .reference_nd import (ref_backward_bias, ref_backward_data, ref_backward_weight, ref_conv,
                           ref_conv_transpose, ref_conv_transpose_backward_data,
                           ref_conv_transpose_backward_weight)
from .strategies_nd import shape_in_layout, weight_shape_in_layout

PASSES = ("forward", "backward_data", "backward_weight")


def fn(ops, rank, name, transposed=False):
    """``ops.conv{rank}d{name}`` or ``ops.conv_transpose{rank}d{name}``."""
    return getattr(ops, f"conv{'_transpose' if transposed else ''}{rank}d{name}")


def conv_reference(case, pss):
    """The float64 channels-first reference of one pass of a forward case."""
    kw = dict(stride=case.stride, pads=case.pads, dilation=case.dilation, groups=case.groups)
    if pss == "forward":
        return ref_conv(case.x, case.w, case.b, mode=case.mode, value=case.value, **kw)
    if pss == "backward_data":
        return ref_backward_data(case.gy, case.w, case.x.shape, mode=case.mode, **kw)
    return ref_backward_weight(case.gy, case.x, case.w.shape, mode=case.mode, value=case.value,
                               **kw)


def conv_call(ops, case, pss, **extra):
    """cconv's result of one pass of a forward case (in cconv's layouts)."""
    a, kw = case.arrays, dict(case.kwargs, **extra)
    if pss == "forward":
        return fn(ops, case.rank, "")(a["x"], a["w"], a["b"], **kw)
    if pss == "backward_data":
        return fn(ops, case.rank, "_backward_data")(
            a["gy"], a["w"], shape_in_layout(case.x.shape, case.layout), **kw)
    return fn(ops, case.rank, "_backward_weight")(
        a["gy"], a["x"], weight_shape_in_layout(case.w.shape, case.weight_layout), **kw)


def transpose_reference(case, pss):
    """The float64 reference of one pass of a transposed case."""
    kw = dict(stride=case.stride, pads=case.pads, dilation=case.dilation, groups=case.groups,
              mode=case.mode)
    if pss == "forward":
        return ref_conv_transpose(case.x, case.w, case.b, output_padding=case.output_padding,
                                  **kw)
    if pss == "backward_data":
        return ref_conv_transpose_backward_data(case.gy, case.w, case.x.shape, **kw)
    return ref_conv_transpose_backward_weight(case.gy, case.x, case.w.shape, **kw)


def transpose_call(ops, case, pss, **extra):
    """cconv's result of one pass of a transposed case."""
    a, kw = case.arrays, dict(case.kwargs, **extra)
    if pss == "forward":
        return fn(ops, case.rank, "", True)(a["x"], a["w"], a["b"], **kw)
    if pss == "backward_data":
        return fn(ops, case.rank, "_backward_data", True)(
            a["gy"], a["w"], shape_in_layout(case.x.shape, case.layout), **kw)
    return fn(ops, case.rank, "_backward_weight", True)(
        a["gy"], a["x"], weight_shape_in_layout(case.w.shape, case.weight_layout), **kw)


def as_reference(case, pss, result):
    """A cconv result of pass ``pss`` in the reference's channels-first / OI order."""
    return case.weight_to_cconv(result) if pss == "backward_weight" else case.to_cconv(result)


def magnitudes(case):
    """``case`` with every operand replaced by its absolute value: its reference gives, per
    element, the sum of the magnitudes of the terms the result adds up (see ``assert_close``)."""
    return replace(case, x=np.abs(case.x), w=np.abs(case.w), b=np.abs(case.b),
                   gy=np.abs(case.gy), value=abs(case.value))


def check_case(ops, case, transposed=False):
    """Every pass (and the bias gradient) of ``case`` against the reference."""
    call = transpose_call if transposed else conv_call
    reference = transpose_reference if transposed else conv_reference
    for pss in PASSES:
        got = call(ops, case, pss)
        assert got.dtype == case.result_dtype, (pss, got.dtype)
        assert_close(as_reference(case, pss, got), reference(case, pss), dtype=case.dtype,
                     what=pss, terms=reference(magnitudes(case), pss))
    if not transposed:
        db = fn(ops, case.rank, "_backward_bias")(case.arrays["gy"], layout=case.layout)
        assert_close(db, ref_backward_bias(case.gy), dtype=case.dtype, what="backward_bias")


def check_out_alpha_beta(ops, case, pss, alpha, beta, out_form, transposed=False):
    """``out = alpha * result + beta * out`` for one pass: same object returned, the given
    ``out`` (C-contiguous or a strided view) updated, never read when ``beta == 0``."""
    call = transpose_call if transposed else conv_call
    reference = transpose_reference if transposed else conv_reference
    expected_shape = call(ops, case, pss).shape
    rng = np.random.default_rng(7)
    start = rng.standard_normal(expected_shape).astype(case.result_dtype)
    if out_form == "strided":
        holder = np.zeros(expected_shape[:-1] + (2 * expected_shape[-1],), case.result_dtype)
        out = holder[..., ::2]
    else:
        out = np.empty(expected_shape, case.result_dtype)
    out[...] = start if beta != 0 else np.nan
    got = call(ops, case, pss, out=out, alpha=alpha, beta=beta)
    assert got is out
    ref = alpha * reference(case, pss)
    terms = abs(alpha) * reference(magnitudes(case), pss)
    if beta != 0:
        start_ref = as_reference(case, pss, start.astype(np.float64))
        ref = ref + beta * start_ref
        terms = terms + abs(beta) * np.abs(start_ref)
    assert_close(as_reference(case, pss, out), ref, dtype=case.dtype, what=f"{pss} out=",
                 terms=terms)
