"""Build cconv's Cython extensions.

The tile kernels are written once, as Tempita templates, and built once per
instruction set (faiss-style): ``_tiles_avx512``, ``_tiles_avx2`` and
``_tiles_base``, and the same for ``_winograd``.  ``cconv._simd`` imports the best
one the running CPU supports, so a wheel built here never assumes the user's CPU
equals the build machine's.

Every template ``cconv/_kernels/<name>.<ext>.tp`` is rendered per level to
``<name>_<level>.<ext>``: the ``.pyx.tp`` modules, and the ``.pxi.tp`` pieces those
modules ``include`` by their generated name (``_winograd_gemm_<level>.pxi``).  The C
declarations the modules share live in ``.pxd`` files next to their headers
(``simd.pxd`` for ``simd.h``, ...), which the modules ``cimport``.

Environment variables
---------------------
CCONV_MARCH_NATIVE=1   add ``-march=native`` to every extension (local builds only).
CCONV_NO_OPENMP=1      build without OpenMP (kernels run single-threaded).
CCONV_SANITIZE=1       build with ``-fsanitize=address,undefined -O1 -g``.
"""

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
from Cython import Tempita
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "cconv" / "_kernels"
# Extension sources must be relative to the project root: building a wheel refuses
# absolute paths (pip runs setup.py from the root).
KERNELS_REL = "cconv/_kernels"

# Per-ISA variants: vector width in bytes, pixels per register tile, compiler flags.
# Pixels per tile keep the accumulator block in registers: 14 pixels x 2 vectors
# on AVX-512's 32 registers, 6 x 2 on AVX2 / SSE's 16 registers.
X86_VARIANTS = {
    "avx512": dict(vbytes=64, tile_rows=14, flags=[
        "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma",
        "-mprefer-vector-width=512"]),
    "avx2": dict(vbytes=32, tile_rows=6, flags=["-mavx2", "-mfma"]),
    "base": dict(vbytes=16, tile_rows=6, flags=[]),
}
GENERIC_VARIANTS = {"base": dict(vbytes=16, tile_rows=6, flags=[])}


def _is_x86_64():
    return platform.machine().lower() in ("x86_64", "amd64")


def _compiler_accepts(flags):
    """Return True if the C compiler builds and links a tiny program with ``flags``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "probe.c"
        c_file.write_text(src)
        try:
            result = subprocess.run(cc + [str(c_file), "-o", str(Path(tmp) / "probe")] + flags,
                                    capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0


def _openmp_flags():
    if os.environ.get("CCONV_NO_OPENMP"):
        return [], []
    if sys.platform == "darwin" and _compiler_accepts(["-Xpreprocessor", "-fopenmp", "-lomp"]):
        return ["-Xpreprocessor", "-fopenmp"], ["-lomp"]
    if _compiler_accepts(["-fopenmp"]):
        return ["-fopenmp"], ["-fopenmp"]
    print("cconv: the C compiler does not support OpenMP; building single-threaded",
          file=sys.stderr)
    return [], []


def _templated_modules():
    """Stems of the kernel modules written as templates (``<stem>.pyx.tp``)."""
    return sorted(path.name[:-len(".pyx.tp")] for path in KERNELS.glob("*.pyx.tp"))


def _plain_modules(variants):
    """Stems of the hand-written ``.pyx`` modules other than ``_runtime`` (not generated)."""
    generated = {f"{stem}_{level}" for stem in _templated_modules() for level in variants}
    return sorted(path.stem for path in KERNELS.glob("*.pyx")
                  if path.stem not in generated and path.stem != "_runtime")


def _render_templates(variants):
    """Render every ``<name>.<ext>.tp`` of the kernels to ``<name>_<level>.<ext>`` per level.

    A file is rewritten only when its text changes: cythonize rebuilds what is newer than
    its C file, includes and cimports included.
    """
    for template_path in sorted(KERNELS.glob("*.tp")):
        name, ext = template_path.name[:-len(".tp")].rsplit(".", 1)
        template = template_path.read_text()
        header = (f"# Generated from {template_path.name} by setup.py: edit the template, "
                  "not this file.\n")
        for level, spec in variants.items():
            text = header + Tempita.sub(template, isa=level, vbytes=spec["vbytes"],
                                        tile_rows=spec["tile_rows"])
            target = KERNELS / f"{name}_{level}.{ext}"
            if not target.exists() or target.read_text() != text:
                target.write_text(text)


def _extensions():
    omp_compile, omp_link = _openmp_flags()
    base_flags = ["-O3", "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math"]
    if os.environ.get("CCONV_SANITIZE"):
        base_flags = ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined"]
        omp_link = omp_link + ["-fsanitize=address,undefined"]
    if os.environ.get("CCONV_MARCH_NATIVE"):
        base_flags.append("-march=native")
    variants = X86_VARIANTS if _is_x86_64() else GENERIC_VARIANTS
    _render_templates(variants)
    common = dict(include_dirs=[np.get_include(), KERNELS_REL],
                  define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
                  extra_link_args=omp_link)
    build_flags = " ".join(base_flags + omp_compile)
    exts = [
        Extension("cconv._kernels._runtime", [f"{KERNELS_REL}/_runtime.pyx"],
                  extra_compile_args=base_flags + omp_compile
                  + [f'-DCCONV_BUILD_FLAGS="{build_flags}"'], **common),
    ]
    # Every other hand-written module (``_layout.pyx``, ``_boundary.pyx``, ...) is built once,
    # for the baseline ISA: they move memory, which SIMD levels do not change.
    for stem in _plain_modules(variants):
        exts.append(Extension(f"cconv._kernels.{stem}", [f"{KERNELS_REL}/{stem}.pyx"],
                              extra_compile_args=base_flags + omp_compile, **common))
    for stem in _templated_modules():
        for name, spec in variants.items():
            exts.append(Extension(
                f"cconv._kernels.{stem}_{name}", [f"{KERNELS_REL}/{stem}_{name}.pyx"],
                extra_compile_args=base_flags + omp_compile + spec["flags"]
                + [f"-DCCONV_VBYTES={spec['vbytes']}"], **common))
    return exts


def _nthreads():
    return max(1, min(os.cpu_count() or 1, 4))


setup(
    ext_modules=cythonize(
        _extensions(),
        # freethreading_compatible: the kernels keep no module state; the Python-level state
        # they serve (thread settings, Find cache, workspace pool) is guarded by locks.
        compiler_directives=dict(language_level=3, boundscheck=False, wraparound=False,
                                 cdivision=True, initializedcheck=False,
                                 freethreading_compatible=True),
        nthreads=_nthreads() if shutil.which("cc") else 0,
    ),
)
