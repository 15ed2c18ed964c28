"""Documentation and typing: docstrings of every public name, the API pages, the stubs.

* Every public function has a NumPy-style docstring with a ``Parameters`` section (when it
  takes any) and a ``Returns`` (or ``Yields``) section (unless annotated ``-> None``); every
  public class has ``Parameters`` or ``Attributes``.  Public names are ``cconv.__all__`` and
  those of every public module of the package that imports without optional dependencies
  (``cconv.algorithms``, the internal contract of the algorithms, aside).
* The API reference (docs/api/cconv.rst) lists every name of ``cconv.__all__``, and the
  Sphinx site builds with warnings as errors.
* The ``.pyi`` stubs of the compiled kernel modules name exactly the functions and
  parameters the built modules have, and every kernel module the Python code imports has one.
"""

import ast
import importlib
import inspect
import pathlib
import pkgutil
import re
import subprocess
import sys

import pytest

import cconv
from cconv import _simd

PACKAGE = pathlib.Path(cconv.__file__).parent
REPO = pathlib.Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def _section(doc, name):
    return re.search(rf"^\s*{name}\s*\n\s*-{{3,}}\s*$", doc, re.M) is not None


# The algorithms package is the internal contract between the dispatcher and the kernels (see
# its docstring), not user API: the API reference leaves it out, and so does this check.
INTERNAL = ("cconv.algorithms",)


def _public_modules():
    """Public modules of cconv that import here (those needing a missing library skip)."""
    found = {"cconv": cconv}
    for info in pkgutil.walk_packages(cconv.__path__, "cconv."):
        if any(part.startswith("_") for part in info.name.split(".")) or any(
                info.name == m or info.name.startswith(m + ".") for m in INTERNAL):
            continue
        try:
            found[info.name] = importlib.import_module(info.name)
        except ImportError:  # an optional dependency is missing: its own tests cover it
            continue
    return found


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == module.__name__]
    return [n for n in names if not n.startswith("_")]


def _problems(qualname, obj):
    doc = inspect.getdoc(obj) or ""
    if not doc.strip():
        return ["no docstring"]
    if inspect.isclass(obj):
        return [] if _section(doc, "Parameters") or _section(doc, "Attributes") else [
            "class docstring without Parameters or Attributes"]
    problems = []
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin without a signature: sections still checked
        sig = None
    params = [p for p in (sig.parameters.values() if sig else ()) if p.name not in
              ("self", "cls")]
    if params and not _section(doc, "Parameters"):
        problems.append("no Parameters section")
    returns_none = sig is not None and sig.return_annotation in (None, "None")
    if not returns_none and not (_section(doc, "Returns") or _section(doc, "Yields")):
        problems.append("no Returns section")
    return problems


def test_every_public_name_has_parameters_and_returns_sections():
    failures = []
    for modname, module in sorted(_public_modules().items()):
        for name in _public_names(module):
            obj = getattr(module, name, None)
            if obj is None or not (inspect.isroutine(obj) or inspect.isclass(obj)):
                continue  # data: versions, tables, tuples of names
            failures += [f"{modname}.{name}: {p}" for p in _problems(f"{modname}.{name}", obj)]
    assert not failures, f"{len(failures)} public names lack docstring sections:\n" + \
        "\n".join(failures)


def test_the_checker_sees_missing_sections():
    def documented(a):
        """Do it.

        Parameters
        ----------
        a : int

        Returns
        -------
        int
        """
        return a

    def bare(a):
        """Do it."""
        return a

    def nothing_back(a) -> None:
        """Do it.

        Parameters
        ----------
        a : int
        """

    assert _problems("documented", documented) == []
    assert _problems("bare", bare) == ["no Parameters section", "no Returns section"]
    assert _problems("nothing_back", nothing_back) == []
    assert _problems("dict", type("Plain", (), {"__doc__": "A class."})) == [
        "class docstring without Parameters or Attributes"]


@pytest.mark.skipif(not (DOCS / "api" / "cconv.rst").exists(), reason="no docs/ here")
def test_api_reference_lists_every_public_name():
    page = (DOCS / "api" / "cconv.rst").read_text()
    listed = set(re.findall(r"^\.\. auto(?:function|class|data):: cconv\.(\w+)", page, re.M))
    missing = [n for n in cconv.__all__ if n != "__version__" and n not in listed]
    assert not missing, f"docs/api/cconv.rst lacks {missing}"


@pytest.mark.skipif(not (DOCS / "conf.py").exists(), reason="no docs/ here")
def test_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                           "html", str(DOCS), str(tmp_path / "html")],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-6000:]
    page = (tmp_path / "html" / "api" / "cconv.html").read_text()
    assert 'id="cconv.conv2d"' in page and "Parameters" in page


# ---------------------------------------------------------------------------------------------
# typing: py.typed and the stubs of the compiled modules
# ---------------------------------------------------------------------------------------------

def test_package_is_marked_typed():
    assert (PACKAGE / "py.typed").is_file()


def _kernel_modules_imported_by_python_code():
    """Kernel modules the package's Python code imports, per-level ones for every level."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_kernels"):
                names.update(a.name for a in node.names)
    names |= {f"{stem}_{level}" for stem in _simd.TEMPLATED for level in
              _simd.available_levels()}
    return sorted(names)


def test_every_kernel_module_the_python_code_imports_has_a_stub():
    missing = [n for n in _kernel_modules_imported_by_python_code()
               if not (PACKAGE / "_kernels" / f"{n}.pyi").is_file()]
    assert not missing, f"no .pyi stub for cconv._kernels.{missing}"


def _stub_interface(path):
    """(functions: name -> parameter names, constants: names) declared by a stub."""
    functions, constants = {}, set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            functions[node.name] = [a.arg for a in args.posonlyargs + args.args
                                    + args.kwonlyargs]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            constants.add(node.target.id)
    return functions, constants


@pytest.mark.parametrize("stub", sorted(p.name for p in (PACKAGE / "_kernels").glob("*.pyi")))
def test_stub_matches_the_built_module(stub):
    functions, constants = _stub_interface(PACKAGE / "_kernels" / stub)
    try:
        module = importlib.import_module(f"cconv._kernels.{stub[:-4]}")
    except ImportError as exc:  # a level this CPU cannot run
        pytest.skip(f"cannot import {stub[:-4]} here: {exc}")
    public = {n: v for n, v in vars(module).items()
              if not n.startswith("_") and not inspect.ismodule(v)}
    built_functions = {n for n, v in public.items() if callable(v) and not inspect.isclass(v)}
    assert set(functions) == built_functions, stub
    assert constants == set(public) - built_functions, stub
    for name, params in functions.items():
        assert list(inspect.signature(public[name]).parameters) == params, (stub, name)
