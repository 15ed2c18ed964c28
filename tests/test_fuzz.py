"""Hypothesis fuzzing of every public function with random and hostile arguments.

Contract under test (the README's "Rules worth knowing"): every call either returns a result
equal to the float64 reference (support.reference, itself checked against PyTorch) or raises
ValueError / TypeError whose message names an argument. Anything else -- another exception type,
a wrong result, a crash -- fails. A drawn case is a small *valid* problem (random shapes,
groups, stride, dilation, padding spec, layouts, dtypes incl. float16 and big-endian '>f4',
memory forms: C, Fortran, negative-stride view, zero-stride broadcast view, sliced view; N = 0
sometimes) plus, most of the time, one hostile mutation (bad dtype, wrong ndim / channel count /
zero-size channel or spatial dim, bad keyword, bad ``out``, ...). A mutation states which
exception types are acceptable and which argument names the message may name.

Sizes whose products overflow 64 bits run in a subprocess so that a crash fails the test
instead of killing pytest.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cconv
from support.reference import (
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    ref_conv_transpose2d,
    ref_conv_transpose2d_backward_data,
    ref_conv_transpose2d_backward_weight,
    resolve_padding,
)
from support.strategies import shape_in_layout, weight_shape_in_layout

_SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True, scope="module")
def _find_cache_dir(tmp_path_factory):
    """algo="find" writes its cache to a scratch directory, never to ~/.cache."""
    old = os.environ.get("CCONV_CACHE_DIR")
    os.environ["CCONV_CACHE_DIR"] = str(tmp_path_factory.mktemp("find-cache"))
    yield
    if old is None:
        os.environ.pop("CCONV_CACHE_DIR", None)
    else:
        os.environ["CCONV_CACHE_DIR"] = old


# --------------------------------------------------------------------------------------------
# arrays in a layout: views (not copies), so a zero-stride broadcast stays one
# --------------------------------------------------------------------------------------------

def layout_view(a, layout):
    return a if layout == "NCHW" else a.transpose(0, 2, 3, 1)


def weight_layout_view(w, wl):
    return w if wl == "OIHW" else w.transpose(2, 3, 1, 0)


# --------------------------------------------------------------------------------------------
# drawing valid problems
# --------------------------------------------------------------------------------------------

FLOATS = ["float32", "float64", "float16", ">f4"]
FORMS = ["C", "C", "F", "neg", "bcast", "sliced"]
BAD_DTYPES = ["int32", "int64", "uint8", "bool", "complex64", "complex128", "object",
              "longdouble"]


def _tol(dtype):
    return {2: 2e-2, 4: 2e-4, 8: 1e-10}[np.dtype(dtype).itemsize]


def make_array(data, shape, layout_fn, dtype, form, rng):
    """Random values and the array handed to cconv (in layout order, dtype, memory form).

    Returns (values as float64 in logical order, exactly as cconv sees them; the array)."""
    vals = rng.standard_normal(shape).astype(dtype)
    if form == "bcast" and 0 not in shape:
        axis = data.draw(st.integers(0, 3), label="bcast axis")
        base = vals.take([0], axis=axis)
        return (np.broadcast_to(base.astype(np.float64), shape),
                layout_fn(np.broadcast_to(base, shape)))   # a zero-stride view
    arranged = layout_fn(vals)
    if form == "F":
        arr = np.asfortranarray(arranged)
    elif form == "neg":
        flip = (slice(None, None, -1),) * arranged.ndim
        arr = np.ascontiguousarray(arranged[flip])[flip]
    elif form == "sliced":
        big = np.zeros(arranged.shape[:-1] + (2 * arranged.shape[-1],), arranged.dtype)
        big[..., ::2] = arranged
        arr = big[..., ::2]
    else:
        arr = np.ascontiguousarray(arranged)
    return vals.astype(np.float64), arr


@st.composite
def conv_problems(draw, transposed=False, empty_batch=True):
    """A valid (forward-view) convolution problem, as a dict of plain values (a batch of 0
    among the batch sizes when ``empty_batch``).

    Valid by construction, not by filtering (too many rejected draws fail Hypothesis's
    health check): the geometry and the padding are drawn first, then each spatial size
    from the smallest that has an output."""
    groups = draw(st.integers(1, 3))
    cg = draw(st.integers(1, 3))
    kg = draw(st.integers(1, 3))
    n = draw(st.sampled_from([0, 1, 1, 2] if empty_batch else [1, 1, 2]))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    smallest, largest = 1, 7
    if draw(st.integers(0, 3)) == 0:  # a shape every algorithm can run (Winograd F(2x2,3x3))
        r = s = 3
        stride, dil = (1, 1), (1, 1)
        smallest, largest = 3, 9
    forms = ["int", "pair", "per_side", "valid"] + ([] if transposed else
                                                    ["same", "same_upper", "same_lower"])
    form = draw(st.sampled_from(forms))
    if form == "int":
        p = draw(st.integers(0, 2))
        spec, pads = p, ((p, p), (p, p))
    elif form == "pair":
        ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        spec, pads = draw(st.sampled_from([(ph, pw), [ph, pw]])), ((ph, ph), (pw, pw))
    elif form == "per_side":
        pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2))
        spec = pads
    elif form == "valid":
        spec, pads = "valid", ((0, 0), (0, 0))
    else:
        spec, pads = form, None  # "same*": an output at any size, the pads follow from it
    if transposed:
        # H, W are the transposed conv's input; output_padding < max(stride, dilation)
        op = tuple(draw(st.integers(0, max(sv, dv) - 1)) for sv, dv in zip(stride, dil))
        # an output: (size - 1) * stride - pads + dil * (kernel - 1) + 1 + op >= 1
        least = [1 - (dv * (k - 1) + o - sum(pv)) // sv
                 for k, sv, dv, pv, o in zip((r, s), stride, dil, pads, op)]
    else:
        # an output: size + pads >= dil * (kernel - 1) + 1
        least = [1] * 2 if pads is None else [dv * (k - 1) + 1 - sum(pv)
                                              for k, dv, pv in zip((r, s), dil, pads)]
    h, w = (draw(st.integers(max(smallest, v), largest)) for v in least)
    if pads is None:
        pads = resolve_padding(form, (h, w), (r, s), stride, dil)
    p = dict(N=n, groups=groups, Cg=cg, Kg=kg, R=r, S=s, stride=stride, dil=dil, H=h, W=w,
             padding=spec, pads=pads,
             stride_spec=draw(st.sampled_from([stride, list(stride)])) if stride[0] != stride[1]
             else draw(st.sampled_from([stride[0], stride, np.int64(stride[0])])),
             dil_spec=dil if dil[0] != dil[1] else draw(st.sampled_from([dil[0], dil])),
             layout=draw(st.sampled_from(["NCHW", "NHWC"])),
             wlayout=draw(st.sampled_from(["OIHW", "HWIO"])),
             xdtype=draw(st.sampled_from(FLOATS)), wdtype=draw(st.sampled_from(FLOATS)),
             xform=draw(st.sampled_from(FORMS)), wform=draw(st.sampled_from(FORMS)),
             gform=draw(st.sampled_from(FORMS)),
             algo=draw(st.sampled_from(("auto", "find") + tuple(cconv.ALGORITHMS))),
             num_threads=draw(st.sampled_from([None, 1, 2])),
             seed=draw(st.integers(0, 2**32 - 1)))
    if transposed:
        oh = (h - 1) * stride[0] - sum(pads[0]) + dil[0] * (r - 1) + 1 + op[0]
        ow = (w - 1) * stride[1] - sum(pads[1]) + dil[1] * (s - 1) + 1 + op[1]
        p.update(op=op, OH=oh, OW=ow,
                 use_output_shape=draw(st.booleans()))
    else:
        oh = (h + sum(pads[0]) - dil[0] * (r - 1) - 1) // stride[0] + 1
        ow = (w + sum(pads[1]) - dil[1] * (s - 1) - 1) // stride[1] + 1
        p.update(OH=oh, OW=ow)
    assert oh >= 1 and ow >= 1
    return p


# --------------------------------------------------------------------------------------------
# building calls: every argument by parameter name, plus the expected result
# --------------------------------------------------------------------------------------------

class Call:
    def __init__(self, fn, args, expect, arrays, rtype):
        self.fn = fn
        self.args = args          # parameter name -> value
        self.expect = expect      # () -> expected float64 result (or tuple), logical layout
        self.arrays = arrays      # names of array arguments
        self.rtype = rtype        # expected result dtype

    def invoke(self):
        params = inspect.signature(self.fn).parameters
        pos = [self.args[n] for n, prm in params.items()
               if prm.kind == prm.POSITIONAL_OR_KEYWORD and n in self.args]
        kw = {n: v for n, v in self.args.items()
              if n in params and params[n].kind == params[n].KEYWORD_ONLY}
        return self.fn(*pos, **kw)


def _common_kw(p, transposed=False):
    kw = dict(stride=p["stride_spec"], padding=p["padding"], dilation=p["dil_spec"],
              groups=p["groups"], layout=p["layout"], weight_layout=p["wlayout"], algo=p["algo"],
              num_threads=p["num_threads"])
    if transposed:
        if p["use_output_shape"]:
            k = p["Kg"] * p["groups"]
            kw["output_shape"] = shape_in_layout((p["N"], k, p["OH"], p["OW"]), p["layout"])
        else:
            kw["output_padding"] = p["op"] if p["op"][0] != p["op"][1] else p["op"][0]
    return kw


def _rtype(*dtypes):
    return np.result_type(*[np.dtype(d) for d in dtypes])


def build_call(name, p, data):
    """The call of public function ``name`` on problem ``p`` and its expected result."""
    rng = np.random.default_rng(p["seed"])
    g, cg, kg = p["groups"], p["Cg"], p["Kg"]
    c, k = g * cg, g * kg
    n, lay, wl = p["N"], p["layout"], p["wlayout"]
    geo = (p["stride"], p["pads"], p["dil"], g)   # stride, pads, dilation, groups
    lay_fn = lambda a: layout_view(a, lay)  # noqa: E731
    wl_fn = lambda a: weight_layout_view(a, wl)  # noqa: E731
    transposed = name.startswith("conv_transpose2d")
    if not transposed:
        xv, x = make_array(data, (n, c, p["H"], p["W"]), lay_fn, p["xdtype"], p["xform"], rng)
        wv, w = make_array(data, (k, cg, p["R"], p["S"]), wl_fn, p["wdtype"], p["wform"], rng)
        gv, gy = make_array(data, (n, k, p["OH"], p["OW"]), lay_fn, p["xdtype"], p["gform"], rng)
        fwd = lambda: ref_conv2d(xv, wv, None, *geo)  # noqa: E731
        bwd_d = lambda: ref_backward_data(gv, wv, xv.shape, *geo)  # noqa: E731
        bwd_w = lambda: ref_backward_weight(gv, xv, wv.shape, *geo)  # noqa: E731
        kw = _common_kw(p)
        x_shape, w_shape = x.shape, w.shape
    else:
        # transposed: x (N, Cin=c, H, W), weight (Cin, K/groups, R, S), output (N, K, OH, OW)
        xv, x = make_array(data, (n, c, p["H"], p["W"]), lay_fn, p["xdtype"], p["xform"], rng)
        wv, w = make_array(data, (c, kg, p["R"], p["S"]), wl_fn, p["wdtype"], p["wform"], rng)
        gv, gy = make_array(data, (n, k, p["OH"], p["OW"]), lay_fn, p["xdtype"], p["gform"], rng)
        stride, pads, dil, _ = geo
        fwd = lambda: ref_conv_transpose2d(xv, wv, None, stride, pads, p["op"], dil,  # noqa: E731
                                           g)
        bwd_d = lambda: ref_conv_transpose2d_backward_data(gv, wv, xv.shape, *geo)  # noqa: E731
        bwd_w = lambda: ref_conv_transpose2d_backward_weight(gv, xv, wv.shape,  # noqa: E731
                                                             *geo)
        kw = _common_kw(p, transposed=True)
        x_shape, w_shape = x.shape, w.shape
    bias_v = rng.standard_normal(k if not transposed else k)
    bias_dtype = data.draw(st.sampled_from(["float32", "float64", "float16"]), label="bias dtype")
    bias_v = bias_v.astype(bias_dtype).astype(np.float64)
    with_bias = data.draw(st.booleans(), label="bias")
    bias_arg = (data.draw(st.sampled_from(["array", "list"]), label="bias form")
                if with_bias else None)
    bias = None if not with_bias else (bias_v.astype(bias_dtype) if bias_arg == "array"
                                       else bias_v.tolist())
    badd = (lambda y: y + bias_v.reshape(1, -1, 1, 1)) if with_bias else (lambda y: y)
    fwd_rtype = _rtype(x.dtype, w.dtype)
    grad_rtype_w = _rtype(gy.dtype, x.dtype)
    grad_rtype_d = _rtype(gy.dtype, w.dtype)
    lay_out = lambda f: (lambda: layout_view(f(), lay))  # noqa: E731
    w_out = lambda f: (lambda: weight_layout_view(f(), wl))  # noqa: E731

    if name == "conv2d":
        return Call(cconv.conv2d, dict(x=x, weight=w, bias=bias, **kw),
                    lay_out(lambda: badd(fwd())), ["x", "weight", "bias"], fwd_rtype)
    if name == "conv2d_backward_data":
        return Call(cconv.conv2d_backward_data,
                    dict(grad_out=gy, weight=w, input_shape=x_shape, **kw),
                    lay_out(bwd_d), ["grad_out", "weight"], grad_rtype_d)
    if name == "conv2d_backward_weight":
        return Call(cconv.conv2d_backward_weight,
                    dict(grad_out=gy, x=x, weight_shape=w_shape, **kw),
                    w_out(bwd_w), ["grad_out", "x"], grad_rtype_w)
    if name == "conv2d_backward_bias":
        return Call(cconv.conv2d_backward_bias, dict(grad_out=gy, layout=lay),
                    lambda: gv.sum(axis=(0, 2, 3)), ["grad_out"], gy.dtype)
    if name == "conv_transpose2d":
        return Call(cconv.conv_transpose2d, dict(x=x, weight=w, bias=bias, **kw),
                    lay_out(lambda: badd(fwd())), ["x", "weight", "bias"], fwd_rtype)
    if name == "conv_transpose2d_backward_data":
        return Call(cconv.conv_transpose2d_backward_data,
                    dict(grad_out=gy, weight=w, input_shape=x_shape, **kw),
                    lay_out(bwd_d), ["grad_out", "weight"], grad_rtype_d)
    if name == "conv_transpose2d_backward_weight":
        return Call(cconv.conv_transpose2d_backward_weight,
                    dict(grad_out=gy, x=x, weight_shape=w_shape, **kw),
                    w_out(bwd_w), ["grad_out", "x"], grad_rtype_w)
    if name in ("conv2d_backward", "conv_transpose2d_backward"):
        need = data.draw(st.sampled_from([("data", "weight", "bias"), ("data",), ["weight"],
                                          "bias", ("bias", "data"), ()]), label="need")
        need_t = (need,) if isinstance(need, str) else tuple(need)
        fn = cconv.conv2d_backward if name == "conv2d_backward" else cconv.conv_transpose2d_backward
        kw.pop("algo")
        kw["algo"] = p["algo"]

        def expect():
            return (layout_view(bwd_d(), lay) if "data" in need_t else None,
                    weight_layout_view(bwd_w(), wl) if "weight" in need_t else None,
                    gv.sum(axis=(0, 2, 3)) if "bias" in need_t else None)
        return Call(fn, dict(grad_out=gy, x=x, weight=w, need=need, **kw), expect,
                    ["grad_out", "x", "weight"], (grad_rtype_d, grad_rtype_w, gy.dtype))
    raise AssertionError(name)


# --------------------------------------------------------------------------------------------
# hostile mutations: (description, mutate(call, data) -> None, exception types, names)
# --------------------------------------------------------------------------------------------

def _mut_kw(key, values, exc):
    def mutate(call, data):
        call.args[key] = data.draw(st.sampled_from(values), label=key)
    return (f"bad {key}", key, mutate, exc, {key})


KW_MUTATIONS = [
    _mut_kw("stride", [0, -1, (1, 0), (2, -3), 1.5, "2", (1, 2, 3), None, [1.0, 1], True],
            (ValueError, TypeError)),
    _mut_kw("dilation", [0, -2, (0, 1), 2.0, "x", (1,), None, False], (ValueError, TypeError)),
    _mut_kw("padding", [-1, (-1, 0), ((0, -1), (0, 0)), 1.5, "bogus", (1, 2, 3), ((1,), (2, 2)),
                        ((1, 2, 3), (0, 0)), None, ("a", "b"), [[0, 1.5], [0, 0]]],
            (ValueError, TypeError)),
    _mut_kw("groups", [0, -1, 1.5, "1", None], (ValueError, TypeError)),
    _mut_kw("layout", ["NCWH", "nchw", "", None, 3], (ValueError, TypeError)),
    _mut_kw("weight_layout", ["IOHW", "", None, 1], (ValueError, TypeError)),
    _mut_kw("algo", ["bogus", "", None, 0, "AUTO", "fft"], (ValueError, TypeError)),
    _mut_kw("num_threads", [0, -1, 1.5, "2", 2.0], (ValueError, TypeError)),
    _mut_kw("alpha", ["1", None, 1j, [1.0]], (TypeError, ValueError)),
    _mut_kw("beta", ["0", 1j, (0,)], (TypeError, ValueError)),
    _mut_kw("need", [("data", "bogus"), "everything", (None,)], (ValueError, TypeError)),
    # (1.5 is a known bug: test_hardening.py::test_output_padding_float_names_argument)
    _mut_kw("output_padding", [-1, (0, -1), (1, 2, 3), 99, "1"], (ValueError, TypeError)),
    _mut_kw("input_shape", [(1, 2, 3), (1, 2, 3, 4, 5), (-1, 1, 4, 4), 7, None],
            (ValueError, TypeError)),
    _mut_kw("weight_shape", [(1, 2, 3), (-1, 1, 1, 1), 7, None], (ValueError, TypeError)),
]
# keys that may be named instead of the mutated one (the message may blame the counterpart)
ALSO = {"input_shape": {"grad_out", "weight"}, "weight_shape": {"grad_out", "x"},
        "output_padding": {"output_shape"}, "groups": set(), "padding": set()}


def _bad_dtype(call, data, key):
    arr = call.args[key]
    dt = data.draw(st.sampled_from(BAD_DTYPES), label="bad dtype")
    if arr is None:
        arr = np.zeros(3)
    arr = np.asarray(arr)
    if dt == "object":
        call.args[key] = arr.astype(object)
    else:
        with np.errstate(all="ignore"):
            call.args[key] = arr.astype(dt)


def _ragged(call, data, key):
    call.args[key] = [[1.0, 2.0], [3.0]]


def _wrong_ndim(call, data, key):
    arr = np.asarray(call.args[key])
    # ravel keeps a 1-D array (bias) as it is: no mutation, so only for ndim > 1
    choices = ["drop", "add", "scalar"] + (["flat"] if arr.ndim > 1 else [])
    how = data.draw(st.sampled_from(choices), label="ndim")
    if how == "drop":
        call.args[key] = arr.sum(axis=0)
    elif how == "add":
        call.args[key] = arr[None]
    elif how == "scalar":
        call.args[key] = np.asarray(arr.dtype.type(1))
    else:
        call.args[key] = arr.ravel()


def _zero_dim(call, data, key):
    """Zero channels or zero spatial size (N = 0 is valid, so never axis 0 of activations)."""
    arr = np.asarray(call.args[key])
    is_weight = key == "weight"
    axis = data.draw(st.integers(0 if is_weight else 1, 3), label="zero axis")
    shape = list(arr.shape)
    shape[axis] = 0
    call.args[key] = np.zeros(shape, arr.dtype)


def _channel_mismatch(call, data, key):
    arr = np.asarray(call.args[key])
    lay = call.args.get("layout", "NCHW")
    if key == "weight":
        wl = call.args.get("weight_layout", "OIHW")
        axis = 1 if wl == "OIHW" else 2   # in-channels per group (out-channels of transposed)
        if call.fn in (cconv.conv_transpose2d,):
            axis = 0 if wl == "OIHW" else 3
    else:
        axis = 1 if lay == "NCHW" else 3
    shape = list(arr.shape)
    shape[axis] += data.draw(st.sampled_from([1, 7]), label="extra channels")
    call.args[key] = np.zeros(shape, arr.dtype)


ARRAY_MUTATIONS = [
    ("bad dtype", _bad_dtype, (TypeError,)),
    ("ragged", _ragged, (TypeError, ValueError)),
    ("wrong ndim", _wrong_ndim, (ValueError,)),
    ("zero-size dim", _zero_dim, (ValueError,)),
    ("channel mismatch", _channel_mismatch, (ValueError,)),
]


def _bad_out(call, data, result):
    """out of the wrong shape / dtype / read-only / not an ndarray."""
    how = data.draw(st.sampled_from(["shape", "dtype", "readonly", "list", "bcast"]), label="out")
    res = result[0] if isinstance(result, tuple) else result
    if how == "shape":
        out = np.zeros(res.shape + (1,), res.dtype)
    elif how == "dtype":
        other = data.draw(st.sampled_from(
            [d for d in ["float16", "float32", "float64", "int32", "complex128"]
             if np.dtype(d) != res.dtype]), label="out dtype")
        out = np.zeros(res.shape, other)
    elif how == "readonly":
        out = np.zeros(res.shape, res.dtype)
        out.flags.writeable = False
    elif how == "bcast":
        out = np.broadcast_to(np.zeros((1,) * res.ndim, res.dtype), res.shape)
        if res.size == 0 or res.shape == (1,) * res.ndim:
            out = np.zeros(res.shape, res.dtype)
            out.flags.writeable = False
    else:
        out = np.zeros(res.shape, res.dtype).tolist()
    call.args["out"] = out


# --------------------------------------------------------------------------------------------
# checking
# --------------------------------------------------------------------------------------------

def _names_in(message, names):
    return any(re.search(rf"(?<![A-Za-z_]){re.escape(nm)}(?![A-Za-z_])", message) for nm in names)


def check_result(actual, expected, rtype, what):
    """``actual`` is an ndarray of ``rtype``'s width within 4x the dtype's tolerance of the
    reference (scale floor 1: the fuzzed values are standard normal)."""
    assert isinstance(actual, np.ndarray), f"{what}: got {type(actual)}"
    assert actual.dtype.kind == "f" and actual.dtype.itemsize == np.dtype(rtype).itemsize, \
        f"{what}: dtype {actual.dtype}, expected {np.dtype(rtype)}"
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if expected.size == 0:
        return
    a = actual.astype(np.float64)
    assert np.all(np.isfinite(a)), f"{what}: non-finite values"
    scale = max(float(np.abs(expected).max()), 1.0)
    err = float(np.abs(a - expected).max())
    assert err <= _tol(rtype) * scale * 4, f"{what}: max error {err:.3g} (scale {scale:.3g})"


def _algo_refused(call, exc):
    """A named algorithm may refuse a shape it cannot run, with a ValueError naming algo."""
    return (isinstance(exc, ValueError) and call.args.get("algo") not in ("auto", "find", "direct")
            and _names_in(str(exc), {"algo"}))


def check_call(call, data, allow_mutation=True, tag=""):
    """Maybe mutate ``call``, run it, and check the outcome."""
    params = set(inspect.signature(call.fn).parameters)
    choices = ["none", "none", "kw", "array", "out", "outvalid"] if allow_mutation else ["none"]
    need = call.args.get("need", ("data",))
    need = (need,) if isinstance(need, str) else tuple(need)
    if not {"data", "weight"} & set(need):
        choices = ["none"]  # known bug: keywords unvalidated, test_hardening.py::test_need_*
    kind = data.draw(st.sampled_from(choices), label="mutation kind")
    expect_exc, names = None, None
    out_valid = None
    if kind == "kw":
        options = [m for m in KW_MUTATIONS if m[1] in params and m[1] in call.args or
                   (m[1] in params and m[1] in ("alpha", "beta", "output_padding"))]
        # known bug: test_hardening.py::test_transpose_bad_weight_layout
        if "output_padding" in params:
            options = [m for m in options if m[1] != "weight_layout"]
        if options:
            desc, key, mutate, exc, nm = data.draw(st.sampled_from(options), label="kw mutation")
            if key == "output_padding" and "output_shape" in call.args:
                call.args.pop("output_shape")
            mutate(call, data)
            if key == "groups" and call.args.get("need") == () :
                pass
            expect_exc, names = exc, nm | ALSO.get(key, set())
    elif kind == "array":
        key = data.draw(st.sampled_from(call.arrays), label="array")
        mutators = ARRAY_MUTATIONS if key != "bias" else ARRAY_MUTATIONS[:3]
        if key == "bias" and call.args.get("bias") is None:
            call.args["bias"] = np.zeros(17)  # wrong shape (K <= 9)
            mutators = [("bias shape", lambda c, d, k: None, (ValueError,))]
        if key in ("grad_out", "x") and call.fn is cconv.conv2d_backward_bias:
            mutators = ARRAY_MUTATIONS[:3]
        desc, mutate, exc = data.draw(st.sampled_from(mutators), label="array mutation")
        mutate(call, data, key)
        # a mismatch may be blamed on the counterpart of the mutated array
        names = {key} | {"x", "weight", "grad_out", "input_shape", "weight_shape", "groups",
                         "output_shape", "padding"} if desc in ("channel mismatch",
                                                                "zero-size dim") else {key}
        if desc == "zero-size dim" and call.fn is cconv.conv2d_backward_bias:
            exc = None  # sums over an empty axis are fine there; checked below
        expect_exc = exc
    if "out" in params and kind in ("out", "outvalid"):
        try:
            result = call.invoke()
        except (ValueError, TypeError) as e:  # noqa: F841
            if _algo_refused(call, e):
                return
            raise AssertionError(f"valid call raised {type(e).__name__}: {e}")
        if isinstance(result, tuple):
            kind = "none"
        elif kind == "out":
            _bad_out(call, data, result)
            expect_exc, names = (ValueError, TypeError), {"out"}
        else:
            out0 = np.random.default_rng(1).standard_normal(result.shape).astype(result.dtype)
            alpha = data.draw(st.sampled_from([1.0, 0.5, -2.0, 0, np.float32(1.5), 3]),
                              label="alpha")
            beta = data.draw(st.sampled_from([0.0, 1.0, -0.5, 0, np.float64(2.0)]), label="beta")
            if beta == 0 and data.draw(st.booleans(), label="nan out"):
                out0[...] = np.nan  # beta == 0 never reads out
            out_valid = (out0.copy(), alpha, beta)
            call.args.update(out=out0, alpha=alpha, beta=beta)

    if expect_exc is None:
        try:
            result = call.invoke()
        except (ValueError, TypeError) as e:
            if kind == "array" and call.fn is cconv.conv2d_backward_bias:
                return  # zero-size grad_out for the bias gradient: either answer is fine
            if _algo_refused(call, e):
                return
            raise AssertionError(f"{tag}: valid call raised {type(e).__name__}: {e}")
        expected = call.expect()
        if kind == "array" and call.fn is cconv.conv2d_backward_bias:
            return
        if isinstance(expected, tuple):
            assert isinstance(result, tuple) and len(result) == 3, result
            for r, e, rt, nm in zip(result, expected, call.rtype, ("dx", "dw", "db")):
                if e is None:
                    assert r is None, f"{nm} not in need but returned"
                else:
                    check_result(r, e, rt, f"{tag} {nm}")
            return
        if out_valid is not None:
            out0, alpha, beta = out_valid
            assert result is call.args["out"], "out was not returned"
            want = alpha * expected + (beta * out0.astype(np.float64) if beta != 0 else 0)
            check_result(result, want, call.rtype, f"{tag} out alpha={alpha} beta={beta}")
        else:
            check_result(result, expected, call.rtype, tag)
        return
    try:
        call.invoke()
    except expect_exc as e:
        msg = str(e)
        assert _names_in(msg, names), f"{tag}: message {msg!r} names none of {sorted(names)}"
        return
    except (ValueError, TypeError) as e:
        raise AssertionError(f"{tag}: raised {type(e).__name__}, expected one of {expect_exc}: {e}")
    raise AssertionError(f"{tag}: accepted hostile input ({kind}, expected {expect_exc}, "
                         f"naming {sorted(names)})")


FUNCS = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "conv2d_backward_bias",
         "conv2d_backward", "conv_transpose2d", "conv_transpose2d_backward_data",
         "conv_transpose2d_backward_weight", "conv_transpose2d_backward"]


@pytest.mark.parametrize("name", FUNCS)
@_SETTINGS
@given(data=st.data())
def test_fuzz_public_function(name, data):
    p = data.draw(conv_problems(transposed=name.startswith("conv_transpose2d")), label="problem")
    if p["N"] == 0 and p["algo"] == "find" and ("weight" in name or name.endswith("backward")):
        p["algo"] = "auto"  # known bug, see test_hardening.py::test_find_with_empty_batch
    call = build_call(name, p, data)
    if name in ("conv2d_backward", "conv_transpose2d_backward"):
        call.args.pop("num_threads", None) if call.args.get("num_threads") is None else None
    check_call(call, data, tag=name)


# --------------------------------------------------------------------------------------------
# planning and Find
# --------------------------------------------------------------------------------------------

@_SETTINGS
@given(data=st.data())
def test_fuzz_plan_conv2d(data):
    p = data.draw(conv_problems(), label="problem")
    fwd = build_call("conv2d", p, data)
    x, w = fwd.args["x"], fwd.args["weight"]
    kw = dict(stride=p["stride_spec"], padding=p["padding"], dilation=p["dil_spec"],
              groups=p["groups"], layout=p["layout"], weight_layout=p["wlayout"],
              dtype=data.draw(st.sampled_from(["float32", "float64", "float16", np.float32, ">f4",
                                               "f8"]), label="dtype"),
              algo=p["algo"] if p["algo"] != "find" or p["N"] > 0 else "auto")
    x_shape = data.draw(st.sampled_from([x.shape, list(x.shape),
                                         tuple(np.int64(v) for v in x.shape)]), label="x_shape")
    bad = data.draw(st.sampled_from([None, None, "x_shape", "weight_shape", "dtype", "stride",
                                     "padding", "algo", "layout", "groups"]), label="bad")
    if bad is None:
        try:
            plan = cconv.plan_conv2d(x_shape, w.shape, **kw)
        except ValueError as exc:
            if kw["algo"] not in ("auto", "find", "direct") and _names_in(str(exc), {"algo"}):
                return
            raise
        assert plan.algorithm in cconv.ALGORITHMS
        out_nchw = (p["N"], p["Kg"] * p["groups"], p["OH"], p["OW"])
        assert tuple(plan.output_shape) == shape_in_layout(out_nchw, p["layout"])
        assert isinstance(plan.workspace_bytes, int) and plan.workspace_bytes >= 0
        if p["N"] > 0 and p["xdtype"] == p["wdtype"] == "float64":
            y = plan.forward(x, w, fwd.args["bias"])
            check_result(y, fwd.expect(), np.float64, "plan.forward")
            gy = build_call("conv2d_backward_data", p, data)
            dx = plan.backward_data(gy.args["grad_out"], w)
            assert dx.shape == x.shape
        return
    values = {"x_shape": [(1, 2, 3), (1, -1, 4, 4), None, (1, 0, 4, 4)],
              "weight_shape": [(1, 2), (0, 1, 1, 1), (1, 1, -1, 1), None],
              "dtype": ["int32", "bool", "complex64", object, "longdouble", "not-a-dtype"],
              "stride": [0, -1, 1.5], "padding": [-1, "nope", (1, 2, 3)],
              "algo": ["nope", None], "layout": ["CHWN", None], "groups": [0, -2, 1.5]}[bad]
    v = data.draw(st.sampled_from(values), label="bad value")
    if bad == "x_shape":
        x_shape = v
    elif bad == "weight_shape":
        w_shape = v
    else:
        kw[bad] = v
    w_shape = v if bad == "weight_shape" else w.shape
    with pytest.raises((ValueError, TypeError)) as info:
        cconv.plan_conv2d(x_shape, w_shape, **kw)
    assert _names_in(str(info.value), {bad}), str(info.value)


@settings(deadline=None, max_examples=15, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_find_algorithms(data):
    p = data.draw(conv_problems(empty_batch=False), label="problem")
    xs = shape_in_layout((p["N"], p["Cg"] * p["groups"], p["H"], p["W"]), p["layout"])
    ws = weight_shape_in_layout((p["Kg"] * p["groups"], p["Cg"], p["R"], p["S"]), p["wlayout"])
    kw = dict(stride=p["stride_spec"], padding=p["padding"], dilation=p["dil_spec"],
              groups=p["groups"], layout=p["layout"], weight_layout=p["wlayout"],
              dtype=data.draw(st.sampled_from(["float32", "float64", "float16"]), label="dtype"),
              num_threads=p["num_threads"])
    op = data.draw(st.sampled_from(["forward", "backward_data", "backward_weight", "bogus",
                                    None, "Forward"]), label="op")
    bad = data.draw(st.sampled_from([None, None, "num_threads", "dtype", "x_shape"]), label="bad")
    if bad == "num_threads":
        kw["num_threads"] = data.draw(st.sampled_from([0, -1, 1.5]))
    elif bad == "dtype":
        kw["dtype"] = "int8"
    elif bad == "x_shape":
        xs = (1, 2)
    if op in ("forward", "backward_data", "backward_weight") and bad is None:
        res = cconv.find_algorithms(xs, ws, op=op, **kw)
        assert len(res) >= 1
        assert [r.time_ms for r in res] == sorted(r.time_ms for r in res)
        for r in res:
            algo, t, ws_bytes = r
            assert algo in cconv.ALGORITHMS and t >= 0 and isinstance(ws_bytes, int)
        return
    names = {"op"} if op not in ("forward", "backward_data", "backward_weight") else {bad}
    if bad is not None and op not in ("forward", "backward_data", "backward_weight"):
        names = {"op", bad}
    with pytest.raises((ValueError, TypeError)) as info:
        cconv.find_algorithms(xs, ws, op=op, **kw)
    assert _names_in(str(info.value), names), str(info.value)


# --------------------------------------------------------------------------------------------
# sizes whose products overflow 64 bits: in a subprocess, each must raise ValueError
# --------------------------------------------------------------------------------------------

_OVERFLOW_SCRIPT = textwrap.dedent(r"""
    import json, os, resource, sys
    import numpy as np
    # never let a bug here take the machine's memory: 6 GiB of address space at most
    # (not under ASan, whose shadow memory needs terabytes of address space)
    if "asan" not in os.environ.get("LD_PRELOAD", ""):
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    import cconv

    def huge(shape, dtype=np.float32):
        # a read-only zero-stride view: no memory however large the shape
        return np.broadcast_to(np.zeros((1,) * len(shape), dtype), shape)

    # numpy accepts views of up to 2**63 - 1 bytes, so float32 views of 2**60 elements exist;
    # cconv bounds every size product at 8 bytes per element (2**63 > int64 max): ValueError.
    E = 2**20
    T = 2**62
    w1 = np.zeros((1, 1, 1, 1), np.float32)
    w3 = np.zeros((1, 1, 3, 3), np.float32)
    x4 = np.zeros((1, 1, 4, 4), np.float32)
    g4 = np.zeros((1, 1, 4, 4), np.float32)
    big_x = huge((E, 1, E, E))                       # 2**60 elements
    cases = {
        # (call, names any of which the message must contain)
        "conv2d x": (lambda: cconv.conv2d(big_x, w1), {"x"}),
        "conv2d x float16": (
            lambda: cconv.conv2d(huge((2 * E, 1, E, E), np.float16), w1), {"x"}),
        "conv2d x nhwc": (
            lambda: cconv.conv2d(huge((E, E, E, 1)), w1, layout="NHWC"), {"x"}),
        "conv2d weight": (
            lambda: cconv.conv2d(huge((1, 2**30, 1, 1)), huge((2**30, 2**30, 1, 1))),
            {"weight"}),
        "conv2d weight hwio": (
            lambda: cconv.conv2d(huge((1, 1, E, E)), huge((E, E, 1, E)), weight_layout="HWIO"),
            {"weight"}),
        "conv2d output K": (
            lambda: cconv.conv2d(huge((2**28, 1, 2**15, 2**15)), huge((16, 1, 1, 1))),
            {"output", "out"}),
        "conv2d output padding": (
            lambda: cconv.conv2d(huge((1, 1, 2**29, 2**29)), w1, padding=2**30),
            {"output", "padding"}),
        "conv2d padding": (lambda: cconv.conv2d(x4, w1, padding=T), {"padding"}),
        "conv2d padding per side": (
            lambda: cconv.conv2d(x4, w1, padding=((0, 2**64), (0, 0))), {"padding"}),
        "conv2d padding 2**63": (lambda: cconv.conv2d(x4, w1, padding=2**63), {"padding"}),
        "conv2d dilation": (
            lambda: cconv.conv2d(x4, w3, dilation=T, padding=T), {"padding", "dilation"}),
        "conv2d dilation 2**70": (
            lambda: cconv.conv2d(x4, w3, dilation=2**70), {"padding", "dilation"}),
        "conv2d groups 2**64": (lambda: cconv.conv2d(x4, w1, groups=2**64), {"groups"}),
        "conv2d bias": (lambda: cconv.conv2d(x4, w1, bias=huge((2**60,))), {"bias"}),
        "backward_data input_shape": (
            lambda: cconv.conv2d_backward_data(g4, w1, (2**31, 1, 2**31, 4)),
            {"input_shape"}),
        "backward_data input_shape 2**64": (
            lambda: cconv.conv2d_backward_data(g4, w1, (2**64, 1, 4, 4)), {"input_shape"}),
        "backward_data input_shape 2**63": (
            lambda: cconv.conv2d_backward_data(g4, w1, (1, 1, 2**63, 4)), {"input_shape"}),
        "backward_data grad_out": (
            lambda: cconv.conv2d_backward_data(big_x, w1, (E, 1, E, E)),
            {"input_shape", "grad_out"}),
        "backward_data padding": (
            lambda: cconv.conv2d_backward_data(g4, w1, (1, 1, 4, 4), padding=T), {"padding"}),
        "backward_weight weight_shape": (
            lambda: cconv.conv2d_backward_weight(g4, x4, (2**31, 1, 2**31, 1)),
            {"weight_shape"}),
        "backward_weight weight_shape 2**64": (
            lambda: cconv.conv2d_backward_weight(g4, x4, (1, 1, 2**64, 1)), {"weight_shape"}),
        "backward_weight x": (
            lambda: cconv.conv2d_backward_weight(big_x, big_x, (1, 1, 1, 1)), {"x"}),
        # conv2d_backward's message says input_shape (the x it got is passed on as one)
        "backward": (lambda: cconv.conv2d_backward(big_x, big_x, w1), {"x", "input_shape"}),
        "transpose x": (lambda: cconv.conv_transpose2d(big_x, w1), {"x", "output_shape"}),
        "transpose output": (
            lambda: cconv.conv_transpose2d(huge((2**28, 1, 2**15, 2**15)), w1, stride=4),
            {"output_shape", "output"}),
        "transpose dilation": (
            lambda: cconv.conv_transpose2d(x4, w3, dilation=T),
            {"output_shape", "dilation", "padding"}),
        "transpose padding": (lambda: cconv.conv_transpose2d(x4, w1, padding=T), {"padding"}),
        "transpose output_shape": (
            lambda: cconv.conv_transpose2d(x4, w1, stride=2, output_shape=(1, 1, T, T)),
            {"output_shape"}),
        "transpose bd input_shape": (
            lambda: cconv.conv_transpose2d_backward_data(g4, w1, (2**31, 1, 2**31, 1)),
            {"input_shape", "output_shape", "grad_out"}),
        "transpose bw weight_shape": (
            lambda: cconv.conv_transpose2d_backward_weight(g4, x4, (1, 2**31, 2**31, 1)),
            {"weight_shape", "weight", "output_shape"}),
        "plan x_shape": (
            lambda: cconv.plan_conv2d((2**31, 1, 2**31, 1), (1, 1, 1, 1)), {"x_shape"}),
        "plan x_shape 2**64": (
            lambda: cconv.plan_conv2d((2**64, 1, 1, 1), (1, 1, 1, 1)), {"x_shape"}),
        "plan weight_shape": (
            lambda: cconv.plan_conv2d((1, 2**31, 1, 1), (2**31, 2**31, 1, 1)),
            {"weight_shape"}),
        "plan output": (
            lambda: cconv.plan_conv2d((2**28, 1, 2**15, 2**15), (2**10, 1, 1, 1)), {"output"}),
        "plan padding": (
            lambda: cconv.plan_conv2d((1, 1, 4, 4), (1, 1, 1, 1), padding=T), {"padding"}),
        "plan dilation": (
            lambda: cconv.plan_conv2d((1, 1, 4, 4), (1, 1, 2, 2), dilation=T, padding=T),
            {"padding", "dilation"}),
        "find x_shape": (
            lambda: cconv.find_algorithms((2**31, 1, 2**31, 1), (1, 1, 1, 1)), {"x_shape"}),
        "find padding": (
            lambda: cconv.find_algorithms((1, 1, 4, 4), (1, 1, 1, 1), padding=2**62),
            {"padding"}),
    }
    one = np.ones((1, 1, 1, 1), np.float32)
    HUGE_STRIDE = {
        # valid problems (a 1x1 output) or a ValueError naming stride; never a hang or an
        # OverflowError
        f"{fn} stride={s}": (call, {"stride"})
        for s in ("2**20", "2**40", "2**62", "2**64")
        for fn, call in (
            ("conv2d", lambda s=s: cconv.conv2d(x4, w1, stride=eval(s))),
            ("backward_data", lambda s=s: cconv.conv2d_backward_data(
                one, w1, (1, 1, 4, 4), stride=eval(s))),
            ("backward_weight", lambda s=s: cconv.conv2d_backward_weight(
                one, x4, (1, 1, 1, 1), stride=eval(s))),
            ("transpose", lambda s=s: cconv.conv_transpose2d(one, w1, stride=eval(s))),
            ("plan", lambda s=s: cconv.plan_conv2d(
                (1, 1, 4, 4), (1, 1, 1, 1), stride=eval(s)).workspace_bytes),
        )
    }
    table = HUGE_STRIDE if sys.argv[1:] == ["huge-stride"] else cases
    for name, (fn, names) in table.items():
        try:
            r = fn()
            res = ("returned", repr(np.asarray(r).ravel()[:4].tolist()))
        except ValueError as e:
            res = ("ValueError", str(e)[:300])
        except Exception as e:  # noqa: BLE001
            res = (type(e).__name__, str(e)[:300])
        print(json.dumps({name: [res[0], res[1], sorted(names)]}), flush=True)
""")


def _run_overflow(*args, timeout=120):
    """Run the case table in a fresh interpreter; returns (returncode or "timeout", results)."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "2")
    try:
        # cwd: `python -c` puts it first on sys.path, so the source tree (no compiled
        # extensions when the package is installed) must not be it.
        proc = subprocess.run([sys.executable, "-c", _OVERFLOW_SCRIPT, *args],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=pkg_root)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    results = {}
    for line in out.splitlines():
        if line.startswith("{"):
            results.update(json.loads(line))
    return rc, results, err


def _problems(results):
    bad = []
    for name, (kind, msg, names) in results.items():
        if kind != "ValueError":
            bad.append(f"{name}: {kind}: {msg}")
        elif not _names_in(msg, names):
            bad.append(f"{name}: ValueError names none of {names}: {msg}")
    return bad


def test_overflowing_sizes_raise_value_error_in_subprocess():
    """Every overflowing size product raises ValueError naming the argument; never a crash."""
    rc, results, err = _run_overflow()
    assert rc == 0, (f"subprocess ended with {rc} after {list(results)[-1:] or 'nothing'}:\n"
                     f"{err[-3000:]}")
    assert len(results) >= 38, sorted(results)
    bad = _problems(results)
    assert not bad, "\n".join(bad)




def test_huge_stride_returns_or_raises_value_error_in_subprocess():
    """A stride far larger than the image is a valid 1x1-output problem: the result, or a
    ValueError naming stride; never a hang, a memory blow-up or an OverflowError."""
    rc, results, err = _run_overflow("huge-stride", timeout=15)
    assert rc == 0, (f"subprocess ended with {rc} after {list(results)[-1:] or 'nothing'}:\n"
                     f"{err[-2000:]}")
    bad = [b for b in _problems(results) if ": returned:" not in b]
    assert not bad, "\n".join(bad)
