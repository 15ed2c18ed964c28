"""Comparing a cconv result with the float64 reference."""

import numpy as np

# Relative tolerance per result dtype (float16 results are computed in float32 and rounded).
RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def rtol_for(dtype):
    return RTOL[np.dtype(dtype)]


def assert_close(actual, ref, dtype=None, rtol=None, what=""):
    """max |actual - ref| <= rtol * max |ref|  (rtol from the result dtype unless given).

    The scale has a floor of 1e-3 so an all-zero reference (an output window that only saw
    padding) still has to come out (almost) zero.
    """
    actual = np.asarray(actual)
    ref = np.asarray(ref, dtype=np.float64)
    assert actual.shape == ref.shape, f"{what}: shape {actual.shape} != reference {ref.shape}"
    if dtype is None:
        dtype = actual.dtype
    if rtol is None:
        rtol = rtol_for(dtype)
    a64 = actual.astype(np.float64)
    assert np.all(np.isfinite(a64)), f"{what}: non-finite values in result"
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-3)
    err = float(np.abs(a64 - ref).max()) if ref.size else 0.0
    if err > rtol * scale:
        idx = np.unravel_index(np.argmax(np.abs(a64 - ref)), ref.shape)
        raise AssertionError(
            f"{what}: max abs error {err:.3e} > {rtol:.0e} * max|ref| ({scale:.3e}); "
            f"worst at {idx}: got {a64[idx]!r}, reference {ref[idx]!r}")


def rel_err(got, ref):
    """max |got - ref| / max |ref| (the measure the Winograd accuracy figures use)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300))
