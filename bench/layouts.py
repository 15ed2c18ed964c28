"""cconv in both activation layouts against PyTorch in both memory formats, per suite layer.

The layer suite (``cconv bench``) times cconv on NCHW arrays against PyTorch's faster memory
format.  A channels-last user hands cconv NHWC activations and HWIO weights instead; this
script times every pass of the chosen suite layers four ways in one process (cconv NCHW /
NHWC, PyTorch NCHW / channels_last), the four interleaved round by round, and prints the
median times and both cconv layouts' ratios to PyTorch's faster format (> 1: cconv faster).

Usage::

    python bench/layouts.py --layers res5,rgb,dw384 --threads 1,2 --repeats 5
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, List

import numpy as np

import cconv
from cconv.benchmark.contenders import import_torch, make_data, torch_call
from cconv.benchmark.layers import LAYERS

PASSES = ("forward", "backward_data", "backward_weight")


def _median_time(call: Callable[[], Any], calls: int) -> float:
    call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _cconv_calls(layer: Any, x: Any, w: Any, gy: Any, threads: int) -> List[Callable[[], Any]]:
    """Per pass, the NCHW and the NHWC call (channels-last copies made here, untimed)."""
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    wh = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    gyh = np.ascontiguousarray(gy.transpose(0, 2, 3, 1))
    kw = dict(stride=layer.stride, padding=layer.padding, dilation=layer.dilation,
              groups=layer.groups, num_threads=threads)
    cl = dict(kw, layout="NHWC", weight_layout="HWIO")
    return [
        lambda: cconv.conv2d(x, w, **kw), lambda: cconv.conv2d(xh, wh, **cl),
        lambda: cconv.conv2d_backward_data(gy, w, x.shape, **kw),
        lambda: cconv.conv2d_backward_data(gyh, wh, xh.shape, **cl),
        lambda: cconv.conv2d_backward_weight(gy, x, w.shape, **kw),
        lambda: cconv.conv2d_backward_weight(gyh, xh, wh.shape, **cl),
    ]


def main() -> None:
    """Parse the arguments and print one line per layer, thread count and pass."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="", help="comma-separated name substrings")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per round")
    args = parser.parse_args()
    torch = import_torch()
    if torch is None:
        raise SystemExit("PyTorch is not installed: nothing to compare with")
    wanted = [s for s in args.layers.split(",") if s]
    rng = np.random.default_rng(0)
    print("ms, medians; ratio = PyTorch's faster format's time / cconv's (> 1: cconv faster)")
    for layer in LAYERS:
        if wanted and not any(s in layer.name for s in wanted):
            continue
        x, w, gy = make_data(layer, layer.N, "float32", rng)
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            calls = _cconv_calls(layer, x, w, gy, threads)
            for i, pss in enumerate(PASSES):
                contenders = [calls[2 * i], calls[2 * i + 1],
                              torch_call(torch, layer, pss, x, w, gy),
                              torch_call(torch, layer, pss, x, w, gy, channels_last=True)]
                rounds: List[List[float]] = [[] for _ in contenders]
                for _ in range(args.repeats):
                    for times, call in zip(rounds, contenders):
                        times.append(_median_time(call, args.calls))
                nchw, nhwc, t_nchw, t_cl = (float(np.median(r)) * 1e3 for r in rounds)
                best = min(t_nchw, t_cl)
                print(f"{layer.name:26s} {threads}t {pss:15s} cconv NCHW {nchw:8.2f} "
                      f"NHWC {nhwc:8.2f} | torch NCHW {t_nchw:8.2f} cl {t_cl:8.2f} | "
                      f"ratio NCHW {best / nchw:.2f} NHWC {best / nhwc:.2f}", flush=True)


if __name__ == "__main__":
    main()
