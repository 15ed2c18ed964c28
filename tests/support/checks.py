"""Comparing a cconv result with the float64 reference."""

import numpy as np

# Relative tolerance per result dtype (float16 results are computed in float32 and rounded).
RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


def rtol_for(dtype):
    return RTOL[np.dtype(dtype)]


def assert_close(actual, ref, dtype=None, rtol=None, what="", terms=None):
    """max |actual - ref| <= rtol * max |ref|  (rtol from the result dtype unless given).

    The scale has a floor of 1e-3 so an all-zero reference (an output window that only saw
    padding) still has to come out (almost) zero.

    ``terms``, where given, is the same computation on the absolute values of its operands:
    per element, the sum of the magnitudes of the products that were added up. A rounded sum
    of n products is off by up to about n * eps * that sum however small the sum itself came
    out, so an element whose terms cancel (a result of 1e-3 made of terms near 1) may also be
    off by ``rtol / 10`` of its terms. A wrong or missing term is off by a whole term, far
    beyond that allowance, so the check still catches index errors.
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
    if not ref.size:
        return
    scale = max(float(np.abs(ref).max()), 1e-3)
    error = np.abs(a64 - ref)
    bound = np.full(ref.shape, rtol * scale)
    if terms is not None:
        terms = np.asarray(terms, dtype=np.float64)
        assert terms.shape == ref.shape, f"{what}: terms shape {terms.shape} != {ref.shape}"
        bound += (rtol / 10) * terms
    if np.any(error > bound):
        idx = np.unravel_index(np.argmax(error - bound), ref.shape)
        raise AssertionError(
            f"{what}: error {error[idx]:.3e} > bound {bound[idx]:.3e} ({rtol:.0e} * max|ref| "
            f"{scale:.3e}{'' if terms is None else ' + terms allowance'}); worst at {idx}: "
            f"got {a64[idx]!r}, reference {ref[idx]!r}")


def rel_err(got, ref):
    """max |got - ref| / max |ref| (the measure the Winograd accuracy figures use)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300))
