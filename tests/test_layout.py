"""The package's structure: the import graph has no cycle, data flows one way, and the
algorithms honour one contract."""

import ast
import pathlib

import numpy as np
import pytest

import cconv
from cconv import _dispatch, _find_cache, _simd
from cconv._geometry import make_geometry
from cconv.algorithms import REGISTRY, Algorithm

PACKAGE = pathlib.Path(cconv.__file__).parent


def _module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path, modules):
    """Modules of the cconv package that ``path`` imports (relative imports resolved;
    ``from package import module`` imports that module, not the package's ``__init__``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("cconv"):
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cconv"))
    return found


@pytest.fixture(scope="module")
def graph():
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in _imports(path, modules) if m in modules and m != name}
            for name, path in modules.items()}


def test_import_graph_has_no_cycle(graph):
    # The package __init__ re-exports the public names and is imported by everyone
    # implicitly; cycles through it do not count, so it is left out.
    edges = {k: {m for m in v if m != "cconv"} for k, v in graph.items() if k != "cconv"}
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in edges.get(node, ()):
            if state.get(nxt) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack + [node, nxt]))
            if nxt not in state:
                visit(nxt, stack + [node])
        state[node] = "done"

    for node in edges:
        if node not in state:
            visit(node, [])


def test_algorithms_never_import_upward(graph):
    upward = {"cconv._dispatch", "cconv._find_cache", "cconv.functional", "cconv._plan",
              "cconv._execute", "cconv.compat", "cconv.benchmark", "cconv._cli"}
    for name, deps in graph.items():
        if name.startswith("cconv.algorithms"):
            assert not deps & upward, (name, deps & upward)


def test_compat_adapters_use_only_the_public_core(graph):
    # the output-size and "same" padding rules; SciPy's float-to-integer stores; the pool
    # of buffers kept between calls (strips, results)
    private_ok = {"cconv._geometry", "cconv._convert", "cconv._workspace"}
    for name, deps in graph.items():
        if name.startswith("cconv.compat"):
            inner = {d for d in deps if not d.startswith("cconv.compat") and d != "cconv"}
            assert inner <= private_ok, (name, inner)


def test_every_algorithm_implements_the_contract():
    contract = ["why_not", "forward", "backward_data", "backward_weight", "prepare_weight",
                "workspace_bytes"]
    assert cconv.ALGORITHMS == tuple(REGISTRY)
    for name, cls in REGISTRY.items():
        assert issubclass(cls, Algorithm) and cls.name == name
        for method in contract:
            assert getattr(cls, method) is not getattr(Algorithm, method), (name, method)


WORKSPACE_WEIGHTS = {"direct": (64, 64, 3, 3), "winograd": (64, 64, 3, 3),
                     "gemm": (64, 64, 1, 1), "depthwise": (64, 1, 3, 3)}


@pytest.mark.parametrize("algo", list(REGISTRY))
def test_workspace_follows_the_thread_count_it_describes(algo):
    w_shape = WORKSPACE_WEIGHTS[algo]
    geom = make_geometry((2, 64, 16, 16), w_shape, padding=(w_shape[2] // 2),
                         groups=64 // w_shape[1])
    impl = REGISTRY[algo].for_geometry(geom)
    for op in _dispatch.OPS:
        one, eight = impl.workspace_bytes(op, 1), impl.workspace_bytes(op, 8)
        assert one >= 0 and eight >= one
        if algo in ("winograd", "depthwise"):  # per-thread scratch: more threads, more bytes
            assert eight > one, op


def test_find_cache_key_names_the_build_and_simd_level():
    geom = make_geometry((1, 4, 8, 8), (4, 4, 3, 3))
    key = _find_cache.key(geom, "forward", 2)
    assert cconv.__version__ in key and _simd.LEVEL in key and "t2" in key
    assert key != _find_cache.key(geom, "backward_data", 2)
    assert key != _find_cache.key(geom, "forward", 3)


def test_plan_rejects_arrays_of_other_shapes():
    plan = cconv.plan_conv2d((2, 4, 8, 8), (6, 4, 3, 3))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    dy = rng.standard_normal(plan.output_shape).astype(np.float32)
    with pytest.raises(ValueError, match=r"x has shape \(2, 4, 9, 9\)"):
        plan.forward(np.zeros((2, 4, 9, 9), np.float32), w)
    with pytest.raises(ValueError, match=r"weight has shape \(6, 4, 5, 5\)"):
        plan.forward(x, np.zeros((6, 4, 5, 5), np.float32))
    with pytest.raises(ValueError, match="grad_out has shape"):
        plan.backward_data(dy[:, :, :-1], w)
    with pytest.raises(ValueError, match="x has shape"):
        plan.backward_weight(dy, x[:1])
    # the right shapes give the functions' results
    np.testing.assert_allclose(plan.forward(x, w), cconv.conv2d(x, w), rtol=1e-6)
    np.testing.assert_allclose(plan.backward_weight(dy, x),
                               cconv.conv2d_backward_weight(dy, x, w.shape), rtol=1e-6)


def test_plan_workspace_for_other_passes_and_threads():
    plan = cconv.plan_conv2d((2, 64, 16, 16), (64, 64, 3, 3), padding=1, algo="winograd")
    assert plan.workspace_bytes == plan.workspace_bytes_for("forward")
    assert plan.workspace_bytes_for("forward", 8) > plan.workspace_bytes_for("forward", 1)
    with pytest.raises(ValueError, match="op must be one of"):
        plan.workspace_bytes_for("sideways")


@pytest.mark.parametrize("groups", [1.0, "2", None])
def test_non_integer_groups_is_the_same_error_everywhere(groups):
    x = np.zeros((1, 4, 6, 6), np.float32)
    w = np.zeros((4, 4, 3, 3), np.float32)
    with pytest.raises(TypeError, match="groups must be an int"):
        cconv.conv2d(x, w, groups=groups)
    with pytest.raises(TypeError, match="groups must be an int"):
        cconv.conv_transpose2d(x, w, groups=groups)


def test_small_work_runs_on_one_thread(monkeypatch):
    from cconv._threads import MIN_FLOPS_PER_THREAD
    from cconv.algorithms.direct import DirectConvolution
    seen = []
    original = DirectConvolution.forward

    def spy(self, x, w, bias, y, alpha, beta, nthreads, prepared=None):
        seen.append(nthreads)
        return original(self, x, w, bias, y, alpha, beta, nthreads, prepared)

    monkeypatch.setattr(DirectConvolution, "forward", spy)
    w = np.ones((32, 32, 3, 3), np.float32)
    small = np.ones((1, 32, 4, 4), np.float32)   # 0.6 MFLOP
    big = np.ones((2, 32, 32, 32), np.float32)   # 38 MFLOP
    assert 2 * 32 * 16 * 32 * 9 < MIN_FLOPS_PER_THREAD < 2 * 2 * 32 * 1024 * 32 * 9 // 3
    for x in (small, big):
        cconv.conv2d(x, w, padding=1, num_threads=3, algo="direct")
    assert seen == [1, 3]
