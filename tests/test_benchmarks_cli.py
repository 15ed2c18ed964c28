"""Fast checks of the benchmark suite and the ``cconv`` command line.

No timing is asserted: only that options parse, that a tiny layer goes through
the runner, and that the reported GFLOP/s is FLOPs / median time.
"""

import json
import statistics
import sys

import pytest

import cconv
from cconv import benchmark
from cconv._cli import build_parser
from cconv._cli import main as cli_main

TINY = benchmark.Layer("tiny.3x3", 2, 3, 4, 9, 7, 3, 3, 1, 1, 1, 1)
TINY_1X1 = benchmark.Layer("tiny.1x1s2", 1, 4, 2, 6, 6, 1, 1, 2, 0, 1, 1)


def test_cli_parses_every_bench_option():
    args = build_parser().parse_args([
        "bench", "--layers", "res3,vgg", "--passes", "forward,backward_weight",
        "--algos", "direct,winograd", "--threads", "2", "--repeats", "7", "--warmup", "2",
        "--min-time", "0.25", "--dtype", "float64", "--quick", "--no-torch", "--no-check",
        "--json", "out.json", "--quiet", "--no-onnxruntime", "--markdown", "out.md",
        "--suite", "layers", "--no-peaks",
    ])
    assert args.command == "bench"
    assert [layer.name for layer in args.layers] == [
        "resnet50.res3.3x3", "resnet50.res3.3x3s2", "vgg16.conv1_2", "vgg16.conv3_2",
        "vgg16.conv4_2"]
    assert args.passes == ["forward", "backward_weight"]
    assert args.algos == ["direct", "winograd"]
    assert (args.threads, args.repeats, args.warmup, args.min_time) == (2, 7, 2, 0.25)
    assert args.dtype == "float64"
    assert args.quick and args.no_torch and args.no_check and args.quiet
    assert args.json == "out.json" and args.markdown == "out.md"
    assert args.no_onnxruntime and args.suite == "layers" and args.no_peaks
    several = build_parser().parse_args(["bench", "--threads", "1,2,1"])
    assert several.threads == [1, 2]
    # String defaults go through the same conversion as given values.
    defaults = build_parser().parse_args(["bench"])
    assert defaults.passes == list(benchmark.PASSES) and defaults.algos == ["auto"]
    assert defaults.layers is None and defaults.suite == "layers"
    assert not defaults.no_onnxruntime and defaults.markdown is None


@pytest.mark.parametrize("bad", [
    ["bench", "--dtype", "int8"],
    ["bench", "--algos", "fft-of-doom", "--no-torch"],
    ["bench", "--layers", "no-such-layer", "--no-torch"],
    ["bench", "--passes", "sideways"],
    ["bench", "--threads", "0"],
    ["bench", "--threads", "1,0"],
    ["bench", "--threads", "two"],
    ["bench", "--repeats", "0"],
    ["bench", "--warmup", "-1"],
    ["bench", "--min-time", "-0.5"],
    ["bench", "--min-time", "nan"],
    ["bench", "--full"],
    ["bench", "--suite", "fortran"],
    ["find"],
    ["check", "--levels"],
])
def test_cli_bad_options_exit_2(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(bad)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["--help"])
    assert exc.value.code == 0
    assert "bench" in capsys.readouterr().out
    # No command: the help, exit status 0.
    assert cli_main([]) == 0
    out = capsys.readouterr().out
    assert all(cmd in out for cmd in ("info", "check", "bench", "find", "config"))


def test_bad_layer_message_lists_the_names(capsys):
    with pytest.raises(SystemExit):
        cli_main(["bench", "--layers", "no-such-layer"])
    assert "vgg16.conv3_2" in capsys.readouterr().err


def test_option_parsing_helpers():
    assert benchmark.parse_passes("backward") == ["backward_data", "backward_weight"]
    assert benchmark.parse_passes("weight,fwd,weight") == ["forward", "backward_weight"]
    assert benchmark.parse_passes(None) == list(benchmark.PASSES)
    with pytest.raises(ValueError):
        benchmark.parse_passes("sideways")
    with pytest.raises(ValueError):
        benchmark.parse_passes(",")
    assert benchmark.parse_algos(" Auto,direct,auto") == ["auto", "direct"]
    assert benchmark.parse_algos(None) == ["auto"]
    for algo in cconv.ALGORITHMS:
        assert benchmark.parse_algos(algo) == [algo]
    with pytest.raises(ValueError):
        benchmark.parse_algos("fft")
    assert [layer.name for layer in benchmark.select_layers("batch1")] == [
        "batch1.128.3x3", "batch1.256.3x3"]
    assert len(benchmark.select_layers(None)) == len(benchmark.LAYERS)
    assert len(benchmark.select_layers("all")) == len(benchmark.LAYERS)


def test_layer_names_are_unique():
    # --layers selects by name: two layers with one name could not be told apart.
    assert len({layer.name for layer in benchmark.LAYERS}) == len(benchmark.LAYERS)


def test_flops_formula():
    # 2 * N * K * OH * OW * (C/groups) * R * S
    assert benchmark.conv_flops(TINY) == 2 * 2 * 4 * 9 * 7 * 3 * 3 * 3
    assert benchmark.conv_flops(TINY_1X1) == 2 * 1 * 2 * 3 * 3 * 4
    dw = benchmark.Layer("dw", 1, 8, 8, 5, 5, 3, 3, 2, 1, 1, 8)
    assert benchmark.conv_flops(dw) == 2 * 8 * 3 * 3 * 1 * 9
    dilated = benchmark.Layer("d2", 1, 1, 1, 10, 12, 3, 3, 1, 2, 2, 1)
    assert dilated.output_hw == (10, 12)
    assert benchmark.conv_flops(dilated, n=3) == 2 * 3 * 10 * 12 * 9


@pytest.mark.parametrize("use_torch", [False, True])
def test_tiny_layer_runs_and_gflops_is_flops_over_median(use_torch):
    if use_torch:
        pytest.importorskip("torch")
    res = benchmark.run_suite(layers=[TINY], repeats=3, warmup=1, torch=use_torch)
    rows = res["results"]
    assert [r["pass"] for r in rows] == list(benchmark.PASSES)
    flops = benchmark.conv_flops(TINY)
    for r in rows:
        assert r["layer"] == "tiny.3x3" and r["algo"] == "auto" and r["flops"] == flops
        assert (r["OH"], r["OW"]) == (9, 7)
        c = r["cconv"]
        assert c["status"] == "ok" and len(c["times_s"]) == 3
        assert c["median_s"] == statistics.median(c["times_s"])
        assert c["gflops"] == pytest.approx(flops / c["median_s"] / 1e9, rel=1e-12)
        if use_torch:
            t = r["torch"]
            assert t["status"] == "ok" and len(t["times_s"]) == 3
            assert t["gflops"] == pytest.approx(flops / statistics.median(t["times_s"]) / 1e9)
            tcl = r["torch_channels_last"]
            assert tcl["status"] == "ok" and len(tcl["times_s"]) == 3
            faster = max(t["gflops"], tcl["gflops"])
            assert r["ratio"] == pytest.approx(c["gflops"] / faster)
            assert r["ratio_nchw"] == pytest.approx(c["gflops"] / t["gflops"])
            assert r["ratio_channels_last"] == pytest.approx(c["gflops"] / tcl["gflops"])
            assert r["torch_best"] == ("nchw" if t["gflops"] >= tcl["gflops"]
                                       else "channels_last")
            assert r["max_rel_err"] is not None and r["max_rel_err"] < 1e-4
        else:
            assert r["ratio"] is None and r["torch"] == {"status": "not used"}
    meta = res["meta"]
    for key in ("cconv_version", "threads", "torch_version", "cpu_model"):
        assert meta[key] not in (None, "")
    text = benchmark.format_markdown(res)
    assert "| tiny.3x3 |" in text and "GFLOP/s" in text


def test_missing_torch_skips_the_torch_contender(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes ``import torch`` fail
    res = benchmark.run_suite(layers=[TINY], passes="forward", repeats=1, torch=True)
    assert res["meta"]["torch_version"] == "not installed"
    (row,) = res["results"]
    assert row["torch"] == {"status": "not installed"} and row["ratio"] is None
    assert row["cconv"]["status"] == "ok"
    assert "torch not installed" in benchmark.format_markdown(res)


def test_gflops_uses_the_median_of_the_timer():
    # A fake clock: successive calls return these instants -> durations 0.5, 2, 0.25.
    ticks = iter([0.0, 0.5, 1.0, 3.0, 10.0, 10.25])
    res = benchmark.run_suite(layers=[TINY], passes="forward", repeats=3, warmup=1,
                              torch=False, onnxruntime=False, timer=lambda: next(ticks),
                              prime=0, batch=0)
    (row,) = res["results"]
    assert row["cconv"]["times_s"] == [0.5, 2.0, 0.25]
    assert row["cconv"]["median_s"] == 0.5
    assert row["cconv"]["gflops"] == pytest.approx(benchmark.conv_flops(TINY) / 0.5 / 1e9)


def test_min_time_adds_rounds_until_each_contender_ran_that_long():
    # Every timed call lasts 0.1 s on this clock: 2 repeats give 0.2 s, min_time 0.35
    # needs 4 calls; a huge min_time stops at the 200-round cap.
    clock = iter(0.1 * i for i in range(10000))
    res = benchmark.run_suite(layers=[TINY], passes="forward", repeats=2, warmup=1,
                              torch=False, onnxruntime=False, min_time=0.35,
                              timer=lambda: next(clock), prime=0, batch=0)
    (row,) = res["results"]
    assert len(row["cconv"]["times_s"]) == 4 and res["meta"]["min_time"] == 0.35
    clock = iter(0.1 * i for i in range(10000))
    res = benchmark.run_suite(layers=[TINY], passes="forward", repeats=2, warmup=1,
                              torch=False, onnxruntime=False, min_time=1e9,
                              timer=lambda: next(clock), prime=0, batch=0)
    assert len(res["results"][0]["cconv"]["times_s"]) == 200
    assert "at least 1e+09 s of timed calls per contender" in benchmark.format_markdown(res)
    with pytest.raises(ValueError, match="min_time"):
        benchmark.run_suite(layers=[TINY], passes="forward", min_time=-1, torch=False)


@pytest.mark.parametrize("labels", ["ab", "abc"])
def test_interleaving_varies_the_order_of_the_contenders(labels):
    from cconv.benchmark.timing import time_interleaved

    calls = []
    contenders = {k: (lambda k=k: calls.append(k)) for k in labels}
    n = len(labels)
    rounds = 2 * n
    times, _, errors = time_interleaved(contenders, warmup=0, repeats=rounds,
                                              timer=lambda: 0.0)
    assert all(len(t) == rounds for t in times.values()) and not errors
    timed = calls[n:]  # after one warm-up call each
    orders = ["".join(timed[r * n:(r + 1) * n]) for r in range(rounds)]
    assert all(sorted(o) == sorted(labels) for o in orders)
    # Each contender goes first equally often, and every order is used.
    assert sorted(o[0] for o in orders) == sorted(labels * 2)
    assert len(set(orders)) == (2 if n == 2 else 6)


def test_algo_the_shape_cannot_use_is_reported_na():
    algos = [a for a in ("direct", "winograd") if a in cconv.ALGORITHMS]
    res = benchmark.run_suite(layers=[TINY_1X1], passes="forward", algos=algos,
                              repeats=1, warmup=1, torch=False)
    by_algo = {r["algo"]: r for r in res["results"]}
    assert set(by_algo) == set(algos)
    if "direct" in by_algo:
        assert by_algo["direct"]["cconv"]["status"] == "ok"
    if "winograd" in by_algo:  # Winograd F(2x2,3x3) cannot run a 1x1 stride-2 layer
        assert by_algo["winograd"]["cconv"]["status"] == "n/a"
        assert "n/a" in benchmark.format_markdown(res)


def test_cli_bench_end_to_end(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = cli_main(["bench", "--quick", "--layers", "dw384s2", "--passes", "forward",
                   "--repeats", "1", "--no-torch", "--no-onnxruntime", "--quiet", "--json",
                   str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "mobilenetv2.dw384s2" in printed and "quick mode" in printed
    data = json.loads(out.read_text())
    assert data["meta"]["quick"] is True
    (row,) = data["results"]
    assert row["N"] == 1 and row["cconv"]["status"] == "ok"
    assert row["cconv"]["gflops"] == pytest.approx(row["flops"] / row["cconv"]["median_s"] / 1e9)


def test_cli_config_and_list(capsys):
    assert cli_main(["config"]) == 0
    assert capsys.readouterr().out.strip() != ""
    assert cli_main(["bench", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(f"| {layer.name} |" in listed for layer in benchmark.LAYERS)
