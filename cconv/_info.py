"""``cconv info``: what this cconv is, what it runs on and which libraries it loaded.

The thread pools (the OpenMP runtime the kernels use, NumPy's BLAS) are read with
threadpoolctl, which inspects the libraries actually loaded into the process.  The compiler
is read from the ``.comment`` section that GCC and Clang leave in every ELF object they
produce (the ``_runtime`` extension's file), so it names the compiler that built the
installed kernels, not one found on this machine.
"""

from __future__ import annotations

import json
import os
import platform
import struct
import sys
from typing import Any, Dict, List, Optional

import numpy as np

__all__ = ["collect", "elf_comment", "format_info"]

# _OPENMP dates of the OpenMP specifications.
_OPENMP_RELEASES = {200505: "2.5", 200805: "3.0", 201107: "3.1", 201307: "4.0",
                    201511: "4.5", 201811: "5.0", 202011: "5.1", 202111: "5.2"}
_ENVIRONMENT = ("CCONV_SIMD", "CCONV_CACHE_DIR", "CCONV_WORKSPACE_MB", "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def elf_comment(path: str) -> List[str]:
    """The strings of an ELF file's ``.comment`` section (compiler identification).

    Parameters
    ----------
    path : str
        An ELF shared object or executable.

    Returns
    -------
    list of str
        The distinct non-empty strings, in file order; empty when the file is not ELF
        (macOS, Windows) or has no such section.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return []
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        shoff, = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x3A)
    else:
        shoff, = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x2E)
    header = order + ("IIQQQQ" if wide else "IIIIII")

    def section(index: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from(header, data, shoff + index * shentsize)
        return name, offset, size

    try:
        _, names_at, _ = section(shstrndx)
        for i in range(shnum):
            name, offset, size = section(i)
            if data[names_at + name:names_at + name + 9] == b".comment\x00":
                found: List[str] = []
                for text in data[offset:offset + size].split(b"\x00"):
                    decoded = text.decode("utf-8", "replace").strip()
                    if decoded and decoded not in found:
                        found.append(decoded)
                return found
    except struct.error:  # a truncated or unusual file: no answer rather than a crash
        return []
    return []


def _pools() -> List[Dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # a runtime dependency, but info should still print without it
        return []
    return [dict(pool) for pool in threadpool_info()]


def _find_cache() -> Dict[str, Any]:
    from . import _find_cache

    path = _find_cache.path()
    entries: Optional[int] = None
    try:
        size = path.stat().st_size
        with open(path) as f:
            data = json.load(f)
        entries = len(data) if isinstance(data, dict) else 0
    except OSError:
        size = 0
    except ValueError:  # unreadable: cconv treats it as empty and rewrites it
        entries = 0
    return {"path": str(path), "exists": path.exists(), "bytes": size, "entries": entries}


def collect() -> Dict[str, Any]:
    """Everything ``cconv info`` reports, as a JSON-serialisable dict.

    Returns
    -------
    dict
        ``version``, ``python``, ``numpy``, ``platform``, ``simd`` (``level`` in use,
        ``cpu`` levels this CPU supports, ``built`` levels this build has and the CPU runs),
        ``openmp`` (``compiled``, ``version``, ``num_threads``, ``runtime``: the loaded
        library), ``blas`` (loaded BLAS libraries), ``compiler`` and ``build_flags``,
        ``find_cache`` (``path``, ``exists``, ``bytes``, ``entries``) and ``environment``.
    """
    import cconv

    from . import _simd
    from ._kernels import _runtime

    pools = _pools()
    omp_date = int(_runtime.openmp_version())
    openmp_pools = [p for p in pools if p.get("user_api") == "openmp"]
    return {
        "version": cconv.__version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "simd": {
            "level": _simd.LEVEL,
            "cpu": [lv for lv in _simd.LEVELS if _runtime.cpu_supports(lv)],
            "built": _simd.available_levels(),
        },
        "openmp": {
            "compiled": bool(_runtime.have_openmp()),
            "version": (f"{_OPENMP_RELEASES.get(omp_date, '?')} ({omp_date})"
                        if omp_date else None),
            "num_threads": cconv.get_num_threads(),
            "runtime": openmp_pools,
        },
        "blas": [p for p in pools if p.get("user_api") == "blas"],
        "compiler": elf_comment(_runtime.__file__),
        "build_flags": _runtime.build_flags(),
        "find_cache": _find_cache(),
        "environment": {k: os.environ[k] for k in _ENVIRONMENT if k in os.environ},
    }


def _pool_text(pool: Dict[str, Any]) -> str:
    # "libgomp" / "libomp" says more than the internal_api "openmp" they share.
    keys = ("prefix", "internal_api") if pool.get("user_api") == "openmp" else (
        "internal_api", "prefix")
    name = next((pool[k] for k in keys if pool.get(k)), "?")
    extra = f", {pool['architecture']}" if pool.get("architecture") else ""
    return (f"{name} {pool.get('version') or ''} ({pool.get('num_threads')} threads"
            f"{extra}) {pool.get('filepath', '')}").replace("  ", " ")


def format_info(info: Dict[str, Any]) -> str:
    """:func:`collect`'s dict as aligned ``key : value`` lines.

    Parameters
    ----------
    info : dict
        What :func:`collect` returned.

    Returns
    -------
    str
    """
    simd, omp, cache = info["simd"], info["openmp"], info["find_cache"]
    cache_text = (f"{cache['path']} ({cache['entries']} entries, {cache['bytes']} bytes)"
                  if cache["exists"] else f"{cache['path']} (not created yet)")
    if not omp["compiled"]:
        omp_text = "not compiled in: every call runs on one thread"
    else:
        omp_text = f"OpenMP {omp['version']}, {omp['num_threads']} threads"
    rows = [
        ("cconv", info["version"]),
        ("python", f"{info['python']} ({info['platform']})"),
        ("numpy", info["numpy"]),
        ("SIMD level in use", simd["level"]),
        ("SIMD levels of this CPU", ", ".join(simd["cpu"])),
        ("SIMD levels built", ", ".join(simd["built"])),
        ("OpenMP", omp_text),
    ]
    rows += [("OpenMP runtime", _pool_text(p)) for p in omp["runtime"]]
    rows += [("BLAS", _pool_text(p)) for p in info["blas"]] or [("BLAS", "none loaded")]
    rows += [
        ("compiler", "; ".join(info["compiler"]) or "unknown (not recorded in the binary)"),
        ("build flags", info["build_flags"]),
        ("Find cache", cache_text),
    ]
    rows += [(f"${key}", value) for key, value in info["environment"].items()]
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}} : {value}" for key, value in rows)
