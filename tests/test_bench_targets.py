"""The benchmark's ceilings (GEMM peak, copy bandwidth), layer classes, shares of the
ceilings and the target report.  No timing is asserted: the arithmetic on given times is."""

import math

import numpy as np
import pytest

from cconv import benchmark
from cconv.benchmark import machine, targets
from cconv.benchmark.layers import LAYERS

TINY = benchmark.Layer("tiny.3x3", 2, 3, 4, 9, 7, 3, 3, 1, 1, 1, 1)


def _by_name(name):
    (layer,) = [la for la in LAYERS if la.name == name]
    return layer


@pytest.mark.parametrize("name, cls", [
    ("resnet50.conv1", "few-channel"),
    ("resnet50.res2.1x1_64-256", "1x1"),
    ("resnet50.res3.3x3", "3x3"),
    ("resnet50.res3.3x3s2", "strided"),
    ("mobilenetv2.dw144", "depthwise"),
    ("mobilenetv2.dw384s2", "depthwise"),
    ("dilated.64.d2", "dilated"),
    ("filter.1-16.5x5", "few-channel"),
    ("rgb.3-32.3x3", "few-channel"),
    ("batch1.256.3x3", "3x3"),
])
def test_layer_class(name, cls):
    assert targets.layer_class(_by_name(name)) == cls


def test_every_suite_layer_has_a_named_class():
    assert all(targets.layer_class(la) != "other" for la in LAYERS)
    grouped = benchmark.Layer("g", 1, 8, 8, 5, 5, 3, 3, 1, 1, 1, 2)  # 4 channels per group
    assert targets.layer_class(grouped) == "few-channel"
    five = benchmark.Layer("g", 1, 8, 8, 9, 9, 5, 5, 1, 2, 1, 1)
    assert targets.layer_class(five) == "other"


def test_min_bytes_counts_each_operand_once():
    la = benchmark.Layer("t", 2, 3, 5, 8, 6, 3, 3, 2, 1, 1, 1)  # output 4x3
    x, w, y = 2 * 3 * 8 * 6, 5 * 3 * 3 * 3, 2 * 5 * 4 * 3
    assert la.output_hw == (4, 3)
    assert targets.min_bytes(la, 2, "forward", 4) == 4 * (x + w + y)
    assert targets.min_bytes(la, 2, "backward_data", 4) == 4 * (y + w + x)
    assert targets.min_bytes(la, 2, "backward_weight", 8) == 8 * (y + x + w)
    dw = benchmark.Layer("d", 1, 6, 6, 4, 4, 3, 3, 1, 1, 1, 6)
    assert targets.min_bytes(dw, 1, "forward", 4) == 4 * (96 + 6 * 9 + 96)


def _row(layer="a", pss="forward", threads=2, algo="auto", ratio=1.0, cls="3x3", median=1.0,
         n=8, **extra):
    row = {"layer": layer, "pass": pss, "threads": threads, "algo": algo, "ratio": ratio,
           "class": cls, "N": n, "cconv": {"status": "ok", "median_s": median}}
    row.update(extra)
    return row


def test_geometric_means_per_threads_and_pass_in_pass_order():
    rows = [_row(pss="backward_weight", ratio=2.0), _row(pss="forward", ratio=2.0),
            _row(pss="forward", ratio=0.5), _row(pss="forward", ratio=None),
            _row(pss="forward", threads=1, ratio=3.0)]
    means = targets.geometric_means(rows)
    assert list(means) == [(1, "forward"), (2, "forward"), (2, "backward_weight")]
    assert means[(2, "forward")] == (pytest.approx(1.0), 2)
    assert means[(1, "forward")] == (pytest.approx(3.0), 1)


def test_thread_scaling_is_one_thread_time_over_the_larger_count():
    rows = [_row(threads=1, median=3.0), _row(threads=2, median=1.5),
            _row(layer="b", threads=2, median=1.0)]  # no 1-thread run: not reported
    (s,) = targets.thread_scaling(rows)
    assert (s["layer"], s["threads"], s["N"]) == ("a", 2, 8)
    assert s["speedup"] == pytest.approx(2.0)


def test_targets_name_every_miss_and_only_misses():
    rows = [
        _row(layer="fast", ratio=1.4),
        _row(layer="slow", ratio=0.8),
        _row(layer="slow", pss="backward_weight", ratio=0.9),
        _row(layer="one", cls="1x1", ratio=1.2, pct_peak=90.0),
        _row(layer="one", cls="1x1", pss="backward_data", ratio=1.2, pct_peak=60.0),
        _row(layer="dw", cls="depthwise", ratio=2.0, ratio_channels_last=1.2,
             pct_bandwidth=75.0),
        _row(layer="few", cls="few-channel", pss="backward_data", ratio=1.5),
        _row(layer="s", cls="strided", ratio=1.1, threads=1, median=2.0, pct_peak=85.0),
        _row(layer="s", cls="strided", ratio=1.1, threads=2, median=1.25, pct_peak=79.0),
        _row(layer="d3", algo="direct", ratio=0.5, pct_peak=80.0),  # not auto: not a 1.0x miss
    ]
    got = {t.text: t for t in targets.check_targets(rows)}
    every = got["every layer and pass at least 1.0x PyTorch's faster layout"]
    assert every.checked == 9 and len(every.misses) == 2
    assert all(m.startswith("slow ") for m in every.misses)
    one = got["1x1 layers: every pass at least 85% of the GEMM peak"]
    assert one.checked == 2 and one.misses == ["one backward_data (2t, auto): 60%"]
    assert got['algo="direct" on 3x3 layers at least 85% of the GEMM peak'].misses == [
        "d3 forward (2t, direct): 80%"]
    dw_ratio = got["depthwise: at least 1.5x PyTorch channels_last on every pass"]
    assert dw_ratio.misses == ["dw forward (2t, auto): 1.20"]
    assert got["depthwise: at least 70% of the copy bandwidth"].misses == []
    assert got["few input channels: backward-data at least 2x PyTorch"].misses == [
        "few backward_data (2t, auto): 1.50"]
    assert got["few input channels: forward at least 1.0x PyTorch"].checked == 0
    assert got["backward-weight at least 1.0x PyTorch on every layer"].misses == [
        "slow backward_weight (2t, auto): 0.90"]
    assert got["stride-2 and dilated layers at least 80% of the GEMM peak"].misses == [
        "s forward (2t, auto): 79%"]
    scaling = got["2 threads at least 1.85x one thread on every N=8 layer"]
    assert scaling.checked == 1 and scaling.misses == ["s forward: 1.60x"]
    text = "\n".join(targets.describe_target(t) for t in got.values())
    assert "**met**" in text and "**missed** by 2 of 9" in text
    assert "not measured in this run" in text


def test_gemm_peak_is_flops_over_the_median(monkeypatch):
    ticks = iter([0.0, 0.5, 1.0, 3.0, 10.0, 10.25])
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(ticks))
    res = machine.gemm_peak(n=16, repeats=3, threads=1)
    assert res["median_s"] == 0.5 and res["threads"] == 1
    assert res["gflops"] == pytest.approx(2 * 16**3 / 0.5 / 1e9)


@pytest.mark.parametrize("threads", [1, 3])
def test_copy_bandwidth_counts_a_read_and_a_write(monkeypatch, threads):
    copied = []
    real_copyto = np.copyto

    def spy(dst, src):
        copied.append(src.size)
        real_copyto(dst, src)
    monkeypatch.setattr(machine.np, "copyto", spy)
    res = machine.copy_bandwidth(nbytes=8 * 1000, repeats=2, threads=threads)
    # one untimed and two timed copies, each split in one slice per thread
    assert len(copied) == 3 * threads and sum(copied) == 3 * 1000
    assert res["bytes"] == 2 * 8 * 1000 and res["threads"] == threads
    assert res["gb_s"] == pytest.approx(res["bytes"] / res["median_s"] / 1e9)


def test_suite_rows_carry_class_bytes_and_shares():
    res = benchmark.run_suite(layers=[TINY], passes="forward,backward_weight", repeats=1,
                              warmup=1, torch=False, onnxruntime=False, threads="1,2",
                              quick=True)
    meta = res["meta"]
    assert meta["threads"] == [1, 2] and [c["threads"] for c in meta["ceilings"]] == [1, 2]
    ceilings = {c["threads"]: c for c in meta["ceilings"]}
    rows = res["results"]
    assert [(r["threads"], r["pass"]) for r in rows] == [
        (1, "forward"), (1, "backward_weight"), (2, "forward"), (2, "backward_weight")]
    for r in rows:
        c, ceil = r["cconv"], ceilings[r["threads"]]
        assert r["class"] == "few-channel"
        assert r["bytes"] == targets.min_bytes(TINY, 1, r["pass"], 4)
        assert r["pct_peak"] == pytest.approx(100 * c["gflops"] / ceil["gemm"]["gflops"])
        assert r["pct_fma"] == pytest.approx(100 * c["gflops"] / ceil["fma"]["gflops"])
        gb_s = r["bytes"] / c["median_s"] / 1e9
        assert r["pct_bandwidth"] == pytest.approx(100 * gb_s / ceil["copy"]["gb_s"])
    text = benchmark.format_markdown(res)
    assert "machine ceilings, 2 thread(s): float32 GEMM peak" in text
    assert "Thread scaling" in text and "Performance targets" in text
    none = benchmark.run_suite(layers=[TINY], passes="forward", repeats=1, torch=False,
                               onnxruntime=False, peaks=False)
    assert none["meta"]["ceilings"] == [] and none["results"][0]["pct_peak"] is None


@pytest.mark.parametrize("bad", [0, "1,x", "", [2, -1]])
def test_parse_threads_rejects(bad):
    with pytest.raises(ValueError, match="threads"):
        benchmark.parse_threads(bad)


def test_parse_threads():
    assert benchmark.parse_threads(3) == [3]
    assert benchmark.parse_threads("2, 1,2") == [2, 1]
    assert benchmark.parse_threads(np.int64(4)) == [4]
    assert benchmark.parse_threads(None) == [benchmark.suite.cconv.get_num_threads()]
    assert math.isfinite(benchmark.parse_threads([1])[0])


def test_primed_batched_rounds():
    import time

    from cconv.benchmark.timing import time_interleaved

    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.004)
    clock = iter(float(i) for i in range(1000))  # every timer() call advances one second
    times, _, errors = time_interleaved({"a": slow}, warmup=1, repeats=3,
                                        timer=lambda: next(clock), settle=0.0, prime=1e-9,
                                        batch=0.02)
    assert not errors and len(times["a"]) == 3
    per_round = 1.0 / times["a"][0]  # one fake second over the round's call count
    count = round(per_round)
    assert 1 <= count <= 5 and per_round == pytest.approx(count)
    assert all(t == pytest.approx(1.0 / count) for t in times["a"])
    # one warm-up, then per round one priming call and `count` timed calls
    assert len(calls) == 1 + 3 * (1 + count)
    calls.clear()
    clock = iter(float(i) for i in range(1000))
    time_interleaved({"a": slow}, warmup=1, repeats=2, timer=lambda: next(clock), settle=0.0)
    assert len(calls) == 1 + 2  # no priming, one call per round by default


def test_fma_peak_counts_every_chain_lane_and_thread(monkeypatch):
    from cconv import _simd

    runs = []
    real = _simd.pointwise.fma_peak_float

    def spy(iterations, threads):
        runs.append((iterations, threads))
        return real(10, threads)  # the flop count must come from the arguments, not the run
    monkeypatch.setattr(_simd.pointwise, "fma_peak_float", spy)
    ticks = iter([0.0, 0.01] + [float(i) for i in range(100, 110)])
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(ticks))
    res = machine.fma_peak(threads=2, seconds=0.05, repeats=3)
    # calibration: 100000 rounds took 0.01 s, so 0.05 s is 500000 rounds; one untimed run
    assert runs == [(100_000, 2), (500_000, 2)] + [(500_000, 2)] * 3
    flops = 500_000 * _simd.pointwise.FMA_CHAINS * _simd.pointwise.STRIP["float32"] * 2
    assert res["median_s"] == 1.0 and res["level"] == _simd.LEVEL
    assert res["gflops"] == pytest.approx(flops / 1.0 / 1e9)


def test_fma_kernel_returns_a_finite_sum():
    from cconv import _simd

    for level in _simd.available_levels():
        mod = _simd.load(level).pointwise
        assert mod.FMA_CHAINS >= 8
        assert np.isfinite(mod.fma_peak_float(50, 2)) and np.isfinite(mod.fma_peak_double(50, 1))


@pytest.mark.parametrize("text, want", [
    ("vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n\nvendor_id\t: X\n",
     "AuthenticAMD family 26 model 2 (Zen 5)"),
    ("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n",
     "GenuineIntel family 6 model 143"),
    ("processor\t: 0\n", ""),
])
def test_cpu_family(monkeypatch, text, want):
    import io

    from cconv.benchmark import environment

    monkeypatch.setattr(environment, "open", lambda *a, **k: io.StringIO(text), raising=False)
    assert environment.cpu_family() == want
