"""Fast checks of the benchmark runner and the ``python -m cconv`` command line.

No timing is asserted: only that options parse, that a tiny layer goes through
the runner, and that the reported GFLOP/s is FLOPs / median time.
"""

import json
import statistics

import pytest

from cconv import benchmarks
from cconv.__main__ import build_parser as build_main_parser
from cconv.__main__ import main as cli_main

TINY = benchmarks.Layer("tiny.3x3", 2, 3, 4, 9, 7, 3, 3, 1, 1, 1, 1)
TINY_1X1 = benchmarks.Layer("tiny.1x1s2", 1, 4, 2, 6, 6, 1, 1, 2, 0, 1, 1)


def test_cli_parses_every_bench_option():
    args = build_main_parser().parse_args([
        "bench", "--layers", "res3,vgg", "--passes", "forward,backward_weight",
        "--algos", "direct,winograd", "--threads", "2", "--repeats", "7", "--warmup", "2",
        "--min-time", "0.25", "--dtype", "float64", "--quick", "--full", "--no-torch", "--no-check",
        "--json", "out.json", "--quiet",
    ])
    assert args.command == "bench"
    assert args.layers == "res3,vgg"
    assert args.passes == "forward,backward_weight"
    assert args.algos == "direct,winograd"
    assert (args.threads, args.repeats, args.warmup, args.min_time) == (2, 7, 2, 0.25)
    assert args.dtype == "float64"
    assert args.quick and args.full and args.no_torch and args.no_check and args.quiet
    assert args.json == "out.json"

    # Same options through the standalone parser used by bench/run_suite.py.
    args = benchmarks.build_parser().parse_args(["--passes", "backward", "--quick"])
    assert args.quick and args.passes == "backward"
    defaults = benchmarks.build_parser().parse_args([])
    assert defaults.algos == "auto" and defaults.repeats == 5 and defaults.dtype == "float32"
    assert defaults.min_time == 0.5


def test_cli_help_and_bad_options(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["--help"])
    assert exc.value.code == 0
    assert "bench" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "--dtype", "int8"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "--algos", "fft-of-doom", "--no-torch"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "--layers", "no-such-layer", "--no-torch"])
    assert exc.value.code == 2


def test_option_parsing_helpers():
    assert benchmarks._parse_passes("backward") == ["backward_data", "backward_weight"]
    assert benchmarks._parse_passes(None) == list(benchmarks.PASSES)
    with pytest.raises(ValueError):
        benchmarks._parse_passes("sideways")
    assert [l.name for l in benchmarks.select_layers("batch1")] == [
        "batch1.128.3x3", "batch1.256.3x3"]
    assert len(benchmarks.select_layers(None)) == len(benchmarks.LAYERS)


def test_layer_table_is_the_issue_suite():
    got = sorted((l.N, l.C, l.K, l.H, l.W, l.R, l.S, l.stride, l.padding, l.dilation, l.groups)
                 for l in benchmarks.LAYERS)
    want = sorted([
        (8, 3, 64, 224, 224, 7, 7, 2, 3, 1, 1),
        (8, 64, 64, 56, 56, 3, 3, 1, 1, 1, 1),
        (8, 64, 256, 56, 56, 1, 1, 1, 0, 1, 1),
        (8, 256, 64, 56, 56, 1, 1, 1, 0, 1, 1),
        (8, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1),
        (8, 128, 128, 56, 56, 3, 3, 2, 1, 1, 1),
        (8, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1),
        (8, 512, 512, 7, 7, 3, 3, 1, 1, 1, 1),
        (2, 64, 64, 224, 224, 3, 3, 1, 1, 1, 1),
        (8, 256, 256, 56, 56, 3, 3, 1, 1, 1, 1),
        (8, 512, 512, 28, 28, 3, 3, 1, 1, 1, 1),
        (8, 144, 144, 56, 56, 3, 3, 1, 1, 1, 144),
        (8, 384, 384, 28, 28, 3, 3, 2, 1, 1, 384),
        (8, 64, 64, 128, 128, 3, 3, 1, 2, 2, 1),
        (4, 1, 16, 512, 512, 5, 5, 1, 2, 1, 1),
        (8, 3, 32, 256, 256, 3, 3, 1, 1, 1, 1),
        (1, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1),
        (1, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1),
    ])
    assert got == want
    assert len({l.name for l in benchmarks.LAYERS}) == len(benchmarks.LAYERS)


def test_flops_formula():
    # 2 * N * K * OH * OW * (C/groups) * R * S
    assert benchmarks.conv_flops(TINY) == 2 * 2 * 4 * 9 * 7 * 3 * 3 * 3
    assert benchmarks.conv_flops(TINY_1X1) == 2 * 1 * 2 * 3 * 3 * 4
    dw = benchmarks.Layer("dw", 1, 8, 8, 5, 5, 3, 3, 2, 1, 1, 8)
    assert benchmarks.conv_flops(dw) == 2 * 8 * 3 * 3 * 1 * 9


@pytest.mark.parametrize("use_torch", [False, True])
def test_tiny_layer_runs_and_gflops_is_flops_over_median(use_torch):
    if use_torch:
        pytest.importorskip("torch")
    res = benchmarks.run_suite(layers=[TINY], repeats=3, warmup=1, torch=use_torch)
    rows = res["results"]
    assert [r["pass"] for r in rows] == list(benchmarks.PASSES)
    flops = benchmarks.conv_flops(TINY)
    for r in rows:
        assert r["layer"] == "tiny.3x3" and r["algo"] == "auto" and r["flops"] == flops
        c = r["cconv"]
        assert c["status"] == "ok" and len(c["times_s"]) == 3
        assert c["median_s"] == statistics.median(c["times_s"])
        assert c["gflops"] == pytest.approx(flops / c["median_s"] / 1e9, rel=1e-12)
        if use_torch:
            t = r["torch"]
            assert t["status"] == "ok" and len(t["times_s"]) == 3
            assert t["gflops"] == pytest.approx(flops / statistics.median(t["times_s"]) / 1e9)
            assert r["ratio"] == pytest.approx(c["gflops"] / t["gflops"])
            assert r["max_rel_err"] is not None and r["max_rel_err"] < 1e-4
        else:
            assert r["ratio"] is None
    meta = res["meta"]
    for key in ("cconv_version", "threads", "torch_version", "cpu_model"):
        assert meta[key] not in (None, "")
    text = benchmarks.format_markdown(res)
    assert "| tiny.3x3 |" in text and "GFLOP/s" in text


def test_gflops_uses_the_median_of_the_timer():
    # A fake clock: successive calls return these instants -> durations 0.5, 2, 0.25.
    ticks = iter([0.0, 0.5, 1.0, 3.0, 10.0, 10.25])
    res = benchmarks.run_suite(layers=[TINY], passes="forward", repeats=3, warmup=1,
                               torch=False, timer=lambda: next(ticks))
    (row,) = res["results"]
    assert row["cconv"]["times_s"] == [0.5, 2.0, 0.25]
    assert row["cconv"]["median_s"] == 0.5
    assert row["cconv"]["gflops"] == pytest.approx(benchmarks.conv_flops(TINY) / 0.5 / 1e9)


def test_min_time_adds_rounds_until_each_contender_ran_that_long():
    # Every timed call lasts 0.1 s on this clock: 2 repeats give 0.2 s, min_time 0.35
    # needs 4 calls; a huge min_time stops at the 200-round cap.
    clock = iter(0.1 * i for i in range(10000))
    res = benchmarks.run_suite(layers=[TINY], passes="forward", repeats=2, warmup=1,
                               torch=False, min_time=0.35, timer=lambda: next(clock))
    (row,) = res["results"]
    assert len(row["cconv"]["times_s"]) == 4 and res["meta"]["min_time"] == 0.35
    clock = iter(0.1 * i for i in range(10000))
    res = benchmarks.run_suite(layers=[TINY], passes="forward", repeats=2, warmup=1,
                               torch=False, min_time=1e9, timer=lambda: next(clock))
    assert len(res["results"][0]["cconv"]["times_s"]) == 200
    assert "at least 1e+09 s per contender" in benchmarks.format_markdown(res)
    with pytest.raises(ValueError, match="min_time"):
        benchmarks.run_suite(layers=[TINY], passes="forward", min_time=-1, torch=False)


def test_algo_the_shape_cannot_use_is_reported_na():
    import cconv

    algos = [a for a in ("direct", "winograd") if a in cconv.ALGORITHMS]
    res = benchmarks.run_suite(layers=[TINY_1X1], passes="forward", algos=algos,
                               repeats=1, warmup=1, torch=False)
    by_algo = {r["algo"]: r for r in res["results"]}
    assert set(by_algo) == set(algos)
    if "direct" in by_algo:
        assert by_algo["direct"]["cconv"]["status"] == "ok"
    if "winograd" in by_algo:  # Winograd F(2x2,3x3) cannot run a 1x1 stride-2 layer
        assert by_algo["winograd"]["cconv"]["status"] == "n/a"
        assert "n/a" in benchmarks.format_markdown(res)


def test_cli_bench_end_to_end(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = cli_main(["bench", "--quick", "--layers", "dw384s2", "--passes", "forward",
                   "--repeats", "1", "--no-torch", "--quiet", "--json", str(out)])
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
    assert "vgg16.conv3_2" in capsys.readouterr().out
