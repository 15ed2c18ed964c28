"""The ``cconv`` command line: info, check, bench, find, and the reference ``check`` uses.

Subcommands run as ``python -m cconv`` subprocesses started in the directory that holds the
cconv under test (the source tree, or site-packages when testing an installed wheel), so the
same build answers.  Outputs are checked for content: the SIMD level ``cconv._simd`` reports,
one table row per algorithm and pass, JSON records that parse and agree with the table, and
Find winners that land in the cache file under the keys later calls use.
"""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cconv
from cconv import _find_cache, _reference, _selfcheck, _simd
from cconv._cli import main as cli_main
from cconv.benchmark.progress import Progress
from support import reference as test_reference

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
MODES = ("zeros", "constant", "reflect", "symmetric", "replicate", "circular")


def run_cli(*args, env=None, timeout=300):
    """``python -m cconv ARGS`` against the cconv under test; the CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if k != "CCONV_SIMD"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "cconv", *args], cwd=PKG_ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def _ok(proc):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


# ---------------------------------------------------------------------------------------------
# cconv info
# ---------------------------------------------------------------------------------------------

def test_info_names_the_simd_level_in_use_and_the_find_cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "find-cache.json").write_text(json.dumps({"a": "direct", "b": "winograd"}))
    env = {"CCONV_CACHE_DIR": str(cache)}
    text = _ok(run_cli("info", env=env)).stdout
    lines = dict(line.split(" : ", 1) for line in text.splitlines() if " : " in line)
    lines = {k.strip(): v for k, v in lines.items()}
    assert lines["SIMD level in use"] == _simd.LEVEL
    assert lines["SIMD levels built"] == ", ".join(_simd.available_levels())
    assert lines["cconv"] == cconv.__version__
    assert lines["Find cache"].startswith(str(cache / "find-cache.json"))
    assert "(2 entries," in lines["Find cache"]
    data = json.loads(_ok(run_cli("info", "--json", env=env)).stdout)
    assert data["simd"]["level"] == _simd.LEVEL
    assert set(data["simd"]["built"]) <= set(data["simd"]["cpu"])
    assert data["find_cache"]["entries"] == 2
    assert data["openmp"]["num_threads"] == cconv.get_num_threads()
    assert data["build_flags"] == cconv.show_config(print_out=False)["build_flags"]
    if data["openmp"]["compiled"]:  # the loaded OpenMP runtime is found and named
        assert data["openmp"]["runtime"], data["openmp"]
    if sys.platform.startswith("linux"):  # GCC and Clang name themselves in .comment
        assert any("GCC" in c or "clang" in c.lower() for c in data["compiler"]), data


def test_info_follows_a_forced_simd_level():
    level = _simd.available_levels()[-1]
    data = json.loads(_ok(run_cli("info", "--json", env={"CCONV_SIMD": level})).stdout)
    assert data["simd"]["level"] == level


# ---------------------------------------------------------------------------------------------
# cconv check
# ---------------------------------------------------------------------------------------------

def test_check_passes_with_a_row_per_algorithm_and_pass(tmp_path):
    out = tmp_path / "check.json"
    proc = _ok(run_cli("check", "--json", str(out)))
    levels = _simd.available_levels()
    table = proc.stdout
    assert "PASSED" in table and "FAIL " not in table
    header = next(line for line in table.splitlines() if line.startswith("algorithm"))
    assert header.split()[2:2 + len(levels)] == levels
    for algo in ("auto", *cconv.ALGORITHMS):
        for pss in _selfcheck.PASSES:
            row = next(line for line in table.splitlines()
                       if line.split()[:2] == [algo, pss])
            cells = row.split()[2:]
            assert [cells[2 * i] for i in range(len(levels))] == ["ok"] * len(levels), row
    report = json.loads(out.read_text())
    assert report["levels"] == levels
    ran = {(r["level"], r["algo"], r["pass_"]) for r in report["results"]}
    assert ran == {(lv, a, p) for lv in levels for a in ("auto", *cconv.ALGORITHMS)
                   for p in _selfcheck.PASSES}
    assert all(r["ok"] and r["error"] <= r["tolerance"] for r in report["results"])
    # Each level ran in its own process on that level's kernels: every case on "auto".
    for level in levels:
        assert sum(r["level"] == level and r["algo"] == "auto" for r in report["results"]) \
            == len(_selfcheck.CASES) * len(_selfcheck.PASSES)


def test_check_rejects_a_level_this_machine_lacks():
    proc = run_cli("check", "--levels", "sse9")
    assert proc.returncode == 2 and "sse9" in proc.stderr


def test_check_reports_a_wrong_result(monkeypatch):
    real_call = _selfcheck._Operands.call

    def off_by_a_bit(self, pss, algo):
        result = real_call(self, pss, algo)
        return result * (1.001 if algo == "direct" and pss == "backward_weight" else 1.0)

    monkeypatch.setattr(_selfcheck._Operands, "call", off_by_a_bit)
    cases = _selfcheck.CASES[:3]
    records = _selfcheck.run_level(cases)
    bad = [r for r in records if not r["ok"]]
    assert bad and {(r["algo"], r["pass_"]) for r in bad} == {("direct", "backward_weight")}
    report = {"levels": [_simd.LEVEL], "results": records}
    assert not _selfcheck.passed(report)
    text = _selfcheck.format_table(report)
    assert f"FAIL {len(cases)}/{len(cases)}" in text and "FAIL [" in text


def test_check_reports_a_crashed_level(monkeypatch):
    def crash(*args, **kwargs):
        return subprocess.CompletedProcess(args, -4, stdout="", stderr="Illegal instruction")

    monkeypatch.setattr(_selfcheck.subprocess, "run", crash)
    report = _selfcheck.run_levels([_simd.LEVEL])
    assert not _selfcheck.passed(report)
    (record,) = report["results"]
    assert "Illegal instruction" in record["message"] and not record["ok"]
    assert "FAIL" in _selfcheck.format_table(report)


# ---------------------------------------------------------------------------------------------
# The reference behind ``cconv check``
# ---------------------------------------------------------------------------------------------

@st.composite
def small_problem(draw):
    groups = draw(st.sampled_from([1, 2]))
    C, K = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    R, S = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    H = draw(st.integers(dilation[0] * (R - 1) + 1, 8))
    W = draw(st.integers(dilation[1] * (S - 1) + 1, 8))
    # reflect needs padding < size; circular and the rest at most the size
    pads = tuple((draw(st.integers(0, min(2, n - 1))), draw(st.integers(0, min(2, n - 1))))
                 for n in (H, W))
    return dict(N=draw(st.integers(1, 2)), C=C, H=H, W=W, K=K, R=R, S=S, stride=stride,
                dilation=dilation, pads=pads, groups=groups)


def _operands(p, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((p["N"], p["C"], p["H"], p["W"]))
    w = rng.standard_normal((p["K"], p["C"] // p["groups"], p["R"], p["S"]))
    return x, w


def _kw(p):
    return dict(stride=p["stride"], pads=p["pads"], dilation=p["dilation"], groups=p["groups"])


@given(small_problem(), st.integers(0, 2**16))
def test_reference_with_zero_padding_matches_the_test_suites_reference(p, seed):
    x, w = _operands(p, seed)
    y = _reference.forward(x, w, **_kw(p))
    expect = test_reference.ref_conv2d(x, w, stride=p["stride"], pads=p["pads"],
                                       dilation=p["dilation"], groups=p["groups"])
    np.testing.assert_allclose(y, expect, rtol=1e-12, atol=1e-12)
    dy = np.random.default_rng(seed + 1).standard_normal(y.shape)
    np.testing.assert_allclose(
        _reference.backward_data(dy, w, x.shape, **_kw(p)),
        test_reference.ref_backward_data(dy, w, x.shape, stride=p["stride"], pads=p["pads"],
                                         dilation=p["dilation"], groups=p["groups"]),
        rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        _reference.backward_weight(dy, x, w.shape, **_kw(p)),
        test_reference.ref_backward_weight(dy, x, w.shape, stride=p["stride"],
                                           pads=p["pads"], dilation=p["dilation"],
                                           groups=p["groups"]),
        rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
@given(p=small_problem(), seed=st.integers(0, 2**16))
def test_reference_padding_modes_are_numpy_pad_and_gradients_are_adjoints(mode, p, seed):
    x, w = _operands(p, seed)
    value = 0.5 if mode == "constant" else 0.0
    y = _reference.forward(x, w, mode=mode, value=value, **_kw(p))
    numpy_mode = {"zeros": "constant", "replicate": "edge", "circular": "wrap"}.get(mode, mode)
    extra = {"constant_values": value} if numpy_mode == "constant" else {}
    xp = np.pad(x, ((0, 0), (0, 0), *p["pads"]), mode=numpy_mode, **extra)
    unpadded = dict(_kw(p), pads=((0, 0), (0, 0)))
    np.testing.assert_allclose(y, _reference.forward(xp, w, **unpadded), rtol=1e-12,
                               atol=1e-12)
    # <conv(pad(x)) - conv(pad(0)), dy> = <x, backward_data(dy)> (the constant is affine), and
    # <conv(pad(x)), dy> = <w, backward_weight(dy, x)>.
    dy = np.random.default_rng(seed + 1).standard_normal(y.shape)
    y0 = _reference.forward(np.zeros_like(x), w, mode=mode, value=value, **_kw(p))
    dx = _reference.backward_data(dy, w, x.shape, mode=mode, **_kw(p))
    dw = _reference.backward_weight(dy, x, w.shape, mode=mode, value=value, **_kw(p))
    assert np.vdot(y - y0, dy) == pytest.approx(np.vdot(x, dx), rel=1e-9, abs=1e-9)
    assert np.vdot(y, dy) == pytest.approx(np.vdot(w, dw), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_reference_matches_pytorch_padding_modes(mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 7, 6))
    w = rng.standard_normal((6, 2, 3, 2))
    pads = ((2, 1), (1, 0))
    kw = dict(stride=(2, 1), pads=pads, dilation=(1, 2), groups=2)
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    padded = torch.nn.functional.pad(tx, (1, 0, 2, 1), mode="constant" if mode == "zeros"
                                     else mode)
    ty = torch.nn.functional.conv2d(padded, tw, stride=(2, 1), dilation=(1, 2), groups=2)
    dy = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(dy))
    np.testing.assert_allclose(_reference.forward(x, w, mode=mode, **kw), ty.detach().numpy(),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_reference.backward_data(dy, w, x.shape, mode=mode, **kw),
                               tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_reference.backward_weight(dy, x, w.shape, mode=mode, **kw),
                               tw.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("padding, expected", [
    ("valid", ((0, 0), (0, 0))),
    ("full", ((2, 2), (2, 2))),            # dilation * (kernel - 1) = (2*1, 1*2)
    ("same", ((1, 1), (0, 1))),            # H: out 5, total 2; W: out 3, total 1 -> end
    ("same_lower", ((1, 1), (1, 0))),
    (2, ((2, 2), (2, 2))),
    ((1, 3), ((1, 1), (3, 3))),
])
def test_reference_padding_rules(padding, expected):
    # H=5, W=6, kernel (2, 3), stride (1, 2), dilation (2, 1)
    assert _reference.resolve_padding(padding, (5, 6), (2, 3), (1, 2), (2, 1)) == expected


# ---------------------------------------------------------------------------------------------
# cconv bench
# ---------------------------------------------------------------------------------------------

def test_bench_writes_json_and_markdown(tmp_path):
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    proc = _ok(run_cli("bench", "--quick", "--layers", "dw384s2", "--passes",
                       "forward,backward_data", "--repeats", "1", "--min-time", "0",
                       "--no-torch", "--json", str(js), "--markdown", str(md)))
    data = json.loads(js.read_text())
    assert {"meta", "results"} <= set(data)
    assert {"cconv_version", "threads", "cpu_model", "onnxruntime_version", "torch_version",
            "dtype", "passes", "algos"} <= set(data["meta"])
    assert data["meta"]["torch_version"] == "not used"
    assert [r["pass"] for r in data["results"]] == ["forward", "backward_data"]
    for row in data["results"]:
        assert {"layer", "cconv", "torch", "onnxruntime", "ratio", "ratio_onnxruntime",
                "flops", "max_rel_err"} <= set(row)
        assert row["cconv"]["status"] == "ok"
        assert row["cconv"]["gflops"] == pytest.approx(
            row["flops"] / row["cconv"]["median_s"] / 1e9)
    assert md.read_text().strip() in proc.stdout
    assert "| mobilenetv2.dw384s2 |" in md.read_text()
    # Not a terminal: one plain progress line per (layer, pass).
    assert "[1/2] mobilenetv2.dw384s2" in proc.stderr and "[2/2]" in proc.stderr
    assert "\r" not in proc.stderr


def test_bench_compares_with_onnxruntime_on_the_forward_pass():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from cconv import benchmark

    tiny = benchmark.Layer("tiny.3x3s2", 2, 3, 8, 11, 9, 3, 3, 2, 1, 1, 1)
    res = benchmark.run_suite(layers=[tiny], passes="forward,backward_weight", repeats=2,
                              torch=False)
    fwd, bwd = res["results"]
    o = fwd["onnxruntime"]
    assert o["status"] == "ok" and len(o["times_s"]) == 2
    assert fwd["ratio_onnxruntime"] == pytest.approx(fwd["cconv"]["gflops"] / o["gflops"])
    assert fwd["max_rel_err_onnxruntime"] < 1e-5  # the same convolution, computed by ORT
    assert bwd["onnxruntime"]["status"] == "n/a" and bwd["ratio_onnxruntime"] is None
    assert "ratio ort" in benchmark.format_markdown(res)
    res64 = benchmark.run_suite(layers=[tiny], passes="forward", repeats=1, torch=False,
                                dtype="float64")
    assert res64["results"][0]["onnxruntime"]["status"] == "n/a"  # float32 only


def test_bench_without_onnxruntime_says_so(monkeypatch):
    from cconv import benchmark

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    tiny = benchmark.Layer("tiny", 1, 2, 2, 5, 5, 3, 3, 1, 1, 1, 1)
    res = benchmark.run_suite(layers=[tiny], passes="forward", repeats=1, torch=False)
    assert res["meta"]["onnxruntime_version"] == "not installed"
    assert res["results"][0]["onnxruntime"] == {"status": "not installed"}
    assert "ort ms" not in benchmark.format_markdown(res)


def test_progress_rewrites_one_line_on_a_terminal_and_prints_lines_elsewhere():
    tty = io.StringIO()
    bar = Progress(4, stream=tty, terminal=True)
    for i in range(4):
        bar(f"case {i}")
    bar.close()
    text = tty.getvalue()
    assert text.count("\r\033[K") == 4 and text.endswith("\n") and text.count("\n") == 1
    assert "[#####...............] 1/4 case 0" in text and "4/4 case 3" in text
    assert "[" + "#" * 20 + "] 4/4" in text
    plain = io.StringIO()
    lines = Progress(2, stream=plain)  # a StringIO is not a terminal
    lines("a")
    lines("b")
    lines.close()
    assert plain.getvalue() == "[1/2] a\n[2/2] b\n"


def test_bench_scipy_suite_missing_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cconv.benchmark.scipy_suite", None)
    assert cli_main(["bench", "--suite", "scipy", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "cconv.benchmark.scipy_suite" in err and "--suite scipy" in err


def test_bench_scipy_suite_gets_the_options_it_accepts(monkeypatch, capsys):
    import types

    seen = {}
    fake = types.ModuleType("cconv.benchmark.scipy_suite")

    def run_suite(repeats, quick, progress=None):
        seen.update(repeats=repeats, quick=quick)
        if progress is not None:
            progress("one case")
        return {"rows": [1, 2]}

    fake.run_suite = run_suite
    fake.format_markdown = lambda result: f"| scipy table | {len(result['rows'])} rows |"
    monkeypatch.setitem(sys.modules, "cconv.benchmark.scipy_suite", fake)
    assert cli_main(["bench", "--suite", "scipy", "--quick", "--repeats", "3"]) == 0
    assert seen == {"repeats": 3, "quick": True}
    assert "| scipy table | 2 rows |" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# cconv find
# ---------------------------------------------------------------------------------------------

SHAPES_TEXT = """\
# N C H W K R S   options
2 8 10 10 8 3 3   padding=1
1 4 9 7 6 1 1     stride=2 layout=NHWC passes=forward,backward_weight
1 6 8 8 6 3 3     padding=same groups=6 dtype=float64 passes=backward_data
"""


def _cache_entries(cache_dir):
    return json.loads((cache_dir / "find-cache.json").read_text())


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_find_warms_the_cache_under_the_keys_later_calls_use(tmp_path, fmt):
    cache = tmp_path / "cache"
    shapes = tmp_path / "shapes"
    if fmt == "text":
        shapes.write_text(SHAPES_TEXT)
    else:
        shapes.write_text(json.dumps({"layers": [
            {"N": 2, "C": 8, "H": 10, "W": 10, "K": 8, "R": 3, "S": 3, "padding": [1, 1]},
            {"N": 1, "C": 4, "H": 9, "W": 7, "K": 6, "R": 1, "S": 1, "stride": 2,
             "layout": "NHWC", "passes": ["forward", "backward_weight"]},
            {"N": 1, "C": 6, "H": 8, "W": 8, "K": 6, "R": 3, "S": 3, "padding": "same",
             "groups": 6, "dtype": "float64", "passes": "backward_data"}]}))
    env = {"CCONV_CACHE_DIR": str(cache)}
    out = tmp_path / "winners.json"
    proc = _ok(run_cli("find", "--shapes", str(shapes), "--threads", "1", "--json", str(out),
                       env=env))
    winners = json.loads(out.read_text())
    assert [(w["where"].rsplit(":", 1)[-1] if fmt == "text" else w["where"][-3:], w["pass"])
            for w in winners] == (
        [("2", "forward"), ("2", "backward_data"), ("2", "backward_weight"),
         ("3", "forward"), ("3", "backward_weight"), ("4", "backward_data")] if fmt == "text"
        else [("[0]", "forward"), ("[0]", "backward_data"), ("[0]", "backward_weight"),
              ("[1]", "forward"), ("[1]", "backward_weight"), ("[2]", "backward_data")])
    assert all(w["algo"] in cconv.ALGORITHMS and not w["cached"] for w in winners)
    assert "6 winners for 3 layers" in proc.stdout
    # The cache file holds each winner under the key a call with algo="find" looks up.
    entries = _cache_entries(cache)
    plan = cconv.plan_conv2d((2, 8, 10, 10), (8, 8, 3, 3), padding=1)
    key = _find_cache.key(plan.geometry.kernel_geometry, "backward_data", 1)
    assert entries[key] == winners[1]["algo"]
    # A second run finds every winner in the cache.
    again = _ok(run_cli("find", "--shapes", str(shapes), "--threads", "1", env=env))
    assert again.stdout.count("(cached)") == 6


@pytest.mark.parametrize("content, message", [
    ("2 8 10 10 8 3\n", "expected 7 sizes"),
    ("2 8 10 10 8 3 3 pading=1\n", "unknown field(s) pading"),
    ("2 8 10 10 8 3 3 passes=sideways\n", "passes must be among"),
    ("2 8 10 10 8 3 3 groups=3\n", "groups=3 must divide C=8"),
    ("[{\"N\": 1}]", "missing C, H, W, K, R, S"),
    ("{\"layers\": 3}", "expected a list of objects"),
    ("# nothing\n", "no layers"),
])
def test_find_rejects_a_bad_shapes_file_naming_the_place(tmp_path, content, message):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text(content)
    proc = run_cli("find", "--shapes", str(shapes), env={"CCONV_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert message in proc.stderr and str(shapes) in proc.stderr, proc.stderr


def test_find_reports_a_layer_cconv_rejects(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("1 4 3 3 4 5 5\n")  # a 5x5 kernel over a 3x3 image, no padding
    proc = run_cli("find", "--shapes", str(shapes), env={"CCONV_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 2 and f"{shapes}:1:" in proc.stderr, proc.stderr
