"""ConvPlan.prepare_weight: the transformed / packed weight reused across forward calls."""

import numpy as np
import pytest

import cconv
from cconv.algorithms import winograd
from support.checks import rel_err
from support.reference import ref_conv2d

PAD1 = ((1, 1), (1, 1))


def _case(dtype=np.float32, n=2, layout="NCHW"):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, 24, 9, 7)).astype(dtype)
    w = rng.standard_normal((40, 24, 3, 3)).astype(dtype)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    return x, w


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("algo", ["winograd", "direct"])
def test_prepared_forward_equals_plain_forward_and_reference(algo, dtype, layout):
    x, w = _case(dtype, layout=layout)
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo=algo, dtype=dtype, layout=layout)
    prepared = plan.prepare_weight(w)
    assert prepared.algorithm == algo and prepared.nbytes > 0
    bias = np.linspace(-1, 1, 40).astype(dtype)
    got = plan.forward(x, prepared, bias)
    assert np.array_equal(got, plan.forward(x, w, bias))
    x_nchw = x if layout == "NCHW" else x.transpose(0, 3, 1, 2)
    ref = ref_conv2d(x_nchw, w, bias, 1, PAD1)
    got_nchw = got if layout == "NCHW" else got.transpose(0, 3, 1, 2)
    assert rel_err(got_nchw, ref) < (1e-5 if dtype == np.float32 else 1e-12)


def test_prepared_weight_is_a_snapshot_and_skips_the_transform(monkeypatch):
    x, w = _case()
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo="winograd")
    prepared = plan.prepare_weight(w)
    expect = plan.forward(x, w)
    w[...] = 0  # later changes to the caller's array do not reach the snapshot
    assert not prepared.weight.flags.writeable

    def no_transform(*args, **kwargs):
        raise AssertionError("filter transformed again")

    monkeypatch.setattr(winograd, "transform_filter", no_transform)
    assert np.array_equal(plan.forward(x, prepared), expect)
    # out / alpha / beta through the prepared path
    out = np.ones_like(expect)
    plan.forward(x, prepared, out=out, alpha=2.0, beta=-1.0)
    assert np.allclose(out, 2 * expect - 1, rtol=1e-5, atol=1e-5)


def test_prepared_weight_hwio_layout():
    x, w = _case()
    w_hwio = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    plan = cconv.plan_conv2d(x.shape, w_hwio.shape, padding=1, weight_layout="HWIO",
                             algo="winograd")
    prepared = plan.prepare_weight(w_hwio)
    assert prepared.weight.shape == w_hwio.shape
    assert rel_err(plan.forward(x, prepared), ref_conv2d(x, w, None, 1, PAD1)) < 1e-5


def test_prepared_weight_other_batch_and_backward_data():
    x, w = _case(n=2)
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo="winograd")
    prepared = plan.prepare_weight(w)
    x3, _ = _case(n=3)  # another batch size is another plan's (ValueError naming x) ...
    with pytest.raises(ValueError, match=r"x has shape \(3, 24, 9, 7\)"):
        plan.forward(x3, prepared)
    plan3 = cconv.plan_conv2d(x3.shape, w.shape, padding=1, algo="winograd")
    prepared3 = plan3.prepare_weight(w)  # ... whose own prepared weight gives the right result
    assert rel_err(plan3.forward(x3, prepared3), ref_conv2d(x3, w, None, 1, PAD1)) < 1e-5
    dy = np.random.default_rng(4).standard_normal(plan.output_shape).astype(np.float32)
    assert np.array_equal(plan.backward_data(dy, prepared), plan.backward_data(dy, w))


def test_prepared_weight_checks():
    x, w = _case()
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo="winograd")
    other = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo="winograd")
    with pytest.raises(ValueError, match="another plan"):
        other.forward(x, plan.prepare_weight(w))
    with pytest.raises(ValueError, match="weight"):
        plan.prepare_weight(w[:, :12])
    with pytest.raises(TypeError, match="weight"):
        plan.prepare_weight(w.astype(np.int32))


def test_prepared_nonfinite_weight_matches_plain_call():
    x, w = _case()
    w[3, 5, 1, 1] = np.nan
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo="winograd")
    prepared = plan.prepare_weight(w)
    got, plain = plan.forward(x, prepared), plan.forward(x, w)
    assert np.array_equal(np.isnan(got), np.isnan(plain)) and np.isnan(got).any()
    fin = np.isfinite(plain)
    assert np.array_equal(got[fin], plain[fin])
