#!/usr/bin/env python
"""Float32 error of Winograd F(4x4, 3x3) against F(2x2, 3x3): a NumPy prototype and cconv.

F(4x4, 3x3) takes 36 elementwise products per 16 output pixels, against 16 per 4 for
F(2x2, 3x3); its accuracy: both transforms in float32 on the same arrays (Lavin & Gray's
matrices, F(4x4) with the points 0, +-1, +-2 and infinity; the products summed over the
channels in float32), cconv's Winograd kernels with each tile size (F(4x4) forced where
the schedule would keep a layer on F(2x2)) and its direct kernel, each against the
float64 reference.  Prints max |error| / max |output| per layer; the bar is 1e-4 at 512
channels.

    python bench/winograd_f4x4_error.py
"""

import os
import sys

import numpy as np

try:
    import cconv  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cconv
from cconv import _reference
from cconv.algorithms import base as algorithm_base
from cconv.algorithms import winograd_schedule

F4 = (np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
      np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
      np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]]), 4)
F2 = (np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
      np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]),
      np.array([[1, 1, 1, 0], [0, 1, -1, -1]]), 2)
# (N, C, K, H = W), 3x3 padding 1: ResNet-50's res5 / res4 / res3 / res2 sizes
LAYERS = [(1, 512, 64, 7), (1, 512, 64, 14), (1, 256, 64, 28), (2, 64, 32, 56)]


def winograd(x, w, transforms):
    """F(m x m, 3x3) of ``x`` (N, C, H, W) with ``w`` (K, C, 3, 3), padding 1, every step
    in ``x``'s dtype."""
    bt, g, at, m = (t.astype(x.dtype) if isinstance(t, np.ndarray) else t for t in transforms)
    n, c, h, wd = x.shape
    a = m + 2
    th, tw = -(-h // m), -(-wd // m)
    xp = np.zeros((n, c, th * m + 2, tw * m + 2), x.dtype)
    xp[:, :, 1:h + 1, 1:wd + 1] = x
    u = np.einsum("ij,kcjl,ml->kcim", g, w, g).astype(x.dtype)
    tiles = np.lib.stride_tricks.sliding_window_view(xp, (a, a), axis=(2, 3))[:, :, ::m, ::m]
    v = np.einsum("ij,nctujl,ml->nctuim", bt, tiles, bt).astype(x.dtype)
    prod = np.einsum("kcim,nctuim->nktuim", u, v, dtype=x.dtype)
    y = np.einsum("ij,nktujl,ml->nktuim", at, prod, at).astype(x.dtype)
    return y.transpose(0, 1, 2, 4, 3, 5).reshape(n, -1, th * m, tw * m)[:, :, :h, :wd]


def cconv_winograd(x: np.ndarray, w: np.ndarray, f4: bool) -> np.ndarray:
    """cconv's Winograd forward with 4x4 tiles (wherever the channel blocks allow) or 2x2."""
    saved = (winograd_schedule.F4_ENABLED, winograd_schedule.F4_MIN_TILES,
             winograd_schedule.F4_MAX_PRODUCTS)
    winograd_schedule.F4_ENABLED, winograd_schedule.F4_MIN_TILES = f4, 1
    winograd_schedule.F4_MAX_PRODUCTS = 100.0
    algorithm_base._instance.cache_clear()   # instances are cached per geometry
    try:
        return cconv.conv2d(x, w, padding=1, algo="winograd")
    finally:
        (winograd_schedule.F4_ENABLED, winograd_schedule.F4_MIN_TILES,
         winograd_schedule.F4_MAX_PRODUCTS) = saved
        algorithm_base._instance.cache_clear()


def main() -> None:
    rng = np.random.default_rng(0)
    print("| N x C -> K, HxW | F(4x4) | F(2x2) | cconv F(4x4) | cconv F(2x2) | cconv direct |")
    print("|---|---:|---:|---:|---:|---:|")
    for n, c, k, h in LAYERS:
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        ref = _reference.forward(x, w, stride=(1, 1), pads=((1, 1), (1, 1)),
                                 dilation=(1, 1), groups=1)
        scale = np.abs(ref).max()
        errors = [winograd(x, w, F4), winograd(x, w, F2), cconv_winograd(x, w, True),
                  cconv_winograd(x, w, False), cconv.conv2d(x, w, padding=1, algo="direct")]
        print(f"| {n}x{c} -> {k}, {h}x{h} | "
              + " | ".join(f"{np.abs(e - ref).max() / scale:.2e}" for e in errors) + " |")


if __name__ == "__main__":
    main()
