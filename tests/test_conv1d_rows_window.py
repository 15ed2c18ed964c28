"""The 1-D row kernels' tiles on signals whose channel planes are a multiple of 4 KiB apart:
with enough output channels they copy their input window into their buffer (as the edge
tiles do) instead of reading it in place, where every channel's columns would share a few
L1 sets.  The numbers must be the reference's and the bits those of the in-place reads."""

import numpy as np
import pytest

import cconv
from cconv import _simd
from support.reference_nd import ref_conv

rows = _simd.rows


# the row kernels take every one-row pass here (see conftest.one_row_kernels_only)
pytestmark = pytest.mark.usefixtures("one_row_kernels_only")


def _counting(monkeypatch):
    calls = []
    real = rows.correlate

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(rows, "correlate", counting)
    return calls


@pytest.mark.parametrize("length, groups, channels, dilation, padding", [
    (4096, 1, 128, 1, 0), (4096, 1, 128, 300, (3, 5)), (4096, 2, 256, 7, 1),
    (2048, 1, 160, 64, (0, 9)), (4100, 1, 128, 300, 1),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copied_windows_match_reference_and_in_place_reads(monkeypatch, length, groups,
                                                           channels, dilation, padding,
                                                           dtype):
    rng = np.random.default_rng(length + channels + dilation)
    x = rng.standard_normal((2, channels, length)).astype(dtype)
    w = (rng.standard_normal((channels, channels // groups, 2)) / 16).astype(dtype)
    b = rng.standard_normal(channels).astype(dtype)
    kw = dict(dilation=dilation, padding=padding, groups=groups, algo="direct")
    calls = _counting(monkeypatch)
    got = cconv.conv1d(x, w, b, **kw)
    assert calls, "the row kernel did not run"
    pads = ((padding, padding),) if isinstance(padding, int) else (padding,)
    want = ref_conv(x, w, pads=pads, dilation=dilation, groups=groups) + b[None, :, None]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max())
    monkeypatch.setattr(rows, "COPIED_WINDOW_FROM_CHANNELS", 1 << 30)  # read in place
    np.testing.assert_array_equal(cconv.conv1d(x, w, b, **kw), got)
    start = rng.standard_normal(got.shape).astype(dtype)
    out = start.copy()
    monkeypatch.setattr(rows, "COPIED_WINDOW_FROM_CHANNELS", 1)  # copied, any channels
    cconv.conv1d(x, w, b, out=out, alpha=0.5, beta=-1.0, **kw)
    assert np.abs(out - (0.5 * want - start)).max() <= tol * max(1.0, np.abs(want).max())
