"""Sphinx configuration of cconv's documentation site.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The API pages import cconv: the in-place build of this checkout when it has one
(``python setup.py build_ext --inplace``), otherwise the installed package.  No network is
used: intersphinx is off.  Optional dependencies of the integration modules (PyTorch, Dask,
xarray, JAX, ...) that are not installed are mocked, so their pages build without them.
"""

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_KERNELS = ROOT / "cconv" / "_kernels"
if any(_KERNELS.glob("_runtime*.so")) or any(_KERNELS.glob("_runtime*.pyd")):
    sys.path.insert(0, str(ROOT))
else:
    # An unbuilt checkout must not shadow the installed package (``python -m sphinx`` puts
    # the working directory first on sys.path).
    sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != ROOT]

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _ext package below

import cconv  # noqa: E402  (after the path is settled)

project = "cconv"
author = "the cconv developers"
copyright = "the cconv developers"
release = cconv.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "_ext.cconv_automodules",
]

# Optional dependencies: mocked only when missing (a mock of an installed library would
# hide real import errors of the modules that use it).
_OPTIONAL = ["torch", "dask", "distributed", "xarray", "jax", "jaxlib", "sklearn", "scipy",
             "onnx", "onnxruntime", "threadpoolctl"]
autodoc_mock_imports = [m for m in _OPTIONAL if importlib.util.find_spec(m) is None]
autodoc_default_options = {"show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpydoc sections say the types, in words people read
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

templates_path = []
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []
html_title = f"cconv {release}"
