"""``cconv find --shapes FILE``: warm the ``algo="find"`` cache for a list of layers.

A pipeline can run Find once at deploy time, so its first real calls do not pay for the
timing.  The file lists layers in either of two formats.

Text: one layer per line, ``N C H W K R S`` (logical sizes: batch, input channels, height,
width, output channels, kernel height and width) followed by optional ``key=value`` fields;
``#`` starts a comment::

    # N  C   H   W   K   R S  options
    8   64  56  56  64  3 3  padding=1
    8   128 56  56  128 3 3  stride=2 padding=1 dtype=float64 layout=NHWC
    1   32  112 112 32  3 3  padding=same groups=32 passes=forward,backward_data

JSON: a list of objects with the same keys, or ``{"layers": [...]}``::

    [{"N": 8, "C": 64, "H": 56, "W": 56, "K": 64, "R": 3, "S": 3, "padding": 1}]

Fields: ``stride``, ``dilation`` and ``padding`` (an int, ``a,b`` for (H, W), a padding
string such as ``same``; JSON also takes ``[[top, bottom], [left, right]]``), ``groups``,
``layout`` (NCHW / NHWC), ``weight_layout`` (OIHW / HWIO), ``dtype``, ``padding_mode``,
``padding_value`` and ``passes`` (``forward``, ``backward_data``, ``backward_weight``;
default all three).  Entries are keyed exactly as the calls that later use them: by version,
SIMD level, pass, thread count and geometry.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["LayerSpec", "read_shapes", "warm"]

OPS = ("forward", "backward_data", "backward_weight")
_SIZES = ("N", "C", "H", "W", "K", "R", "S")
_OPTIONS = ("stride", "padding", "dilation", "groups", "layout", "weight_layout", "dtype",
            "padding_mode", "padding_value", "passes")


@dataclass
class LayerSpec:
    """One layer of a shapes file.

    Attributes
    ----------
    sizes : tuple of int
        N, C, H, W, K, R, S.
    options : dict
        Keywords of :func:`cconv.plan_conv2d` (stride, padding, ...).
    passes : tuple of str
        The passes to tune.
    where : str
        ``FILE:LINE`` (text) or ``FILE[INDEX]`` (JSON), for messages.
    """

    sizes: Tuple[int, ...]
    options: Dict[str, Any] = field(default_factory=dict)
    passes: Tuple[str, ...] = OPS
    where: str = ""

    def shapes(self) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        """The input and weight shapes in the layer's layout and weight layout.

        Returns
        -------
        x_shape, weight_shape : tuple of int
        """
        N, C, H, W, K, R, S = self.sizes
        groups = int(self.options.get("groups", 1))
        if groups <= 0 or C % groups:
            raise ValueError(f"{self.where}: groups={groups} must divide C={C}")
        x = (N, H, W, C) if self.options.get("layout", "NCHW") == "NHWC" else (N, C, H, W)
        hwio = self.options.get("weight_layout", "OIHW") == "HWIO"
        w = (R, S, C // groups, K) if hwio else (K, C // groups, R, S)
        return x, w

    def label(self) -> str:
        """A one-line description: sizes and the options given.

        Returns
        -------
        str
        """
        N, C, H, W, K, R, S = self.sizes
        extra = " ".join(f"{k}={v}" for k, v in self.options.items())
        return f"{N}x{C}x{H}x{W} -> {K} {R}x{S}" + (f" {extra}" if extra else "")


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _text_value(key: str, text: str) -> Any:
    if key == "passes":
        return text
    if key in ("stride", "dilation", "padding") and "," in text:
        return tuple(int(v) for v in text.split(","))
    if key in ("layout", "weight_layout", "dtype", "padding_mode"):
        return text
    try:
        return _number(text)
    except ValueError:
        if key == "padding":  # "same", "valid", ...
            return text
        raise ValueError(f"{key}={text!r} is not a number") from None


def _check_passes(value: Any, where: str) -> Tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else list(value)
    passes = tuple(str(p).strip() for p in names if str(p).strip())
    bad = [p for p in passes if p not in OPS]
    if bad or not passes:
        raise ValueError(f"{where}: passes must be among {', '.join(OPS)}, got {value!r}")
    return passes


def _spec(values: Dict[str, Any], where: str) -> LayerSpec:
    missing = [k for k in _SIZES if k not in values]
    unknown = [k for k in values if k not in _SIZES + _OPTIONS]
    if missing or unknown:
        raise ValueError(f"{where}: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else [])
            + ([f"unknown field(s) {', '.join(unknown)} (known: "
                f"{', '.join(_SIZES + _OPTIONS)})"] if unknown else [])))
    sizes = tuple(values[k] for k in _SIZES)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        raise ValueError(f"{where}: N, C, H, W, K, R, S must be positive ints, got {sizes}")
    options = {k: values[k] for k in _OPTIONS if k in values and k != "passes"}
    if isinstance(options.get("padding"), list):  # JSON arrays -> the tuples cconv takes
        options["padding"] = tuple(tuple(p) if isinstance(p, list) else p
                                   for p in options["padding"])
    for key in ("stride", "dilation"):
        if isinstance(options.get(key), list):
            options[key] = tuple(options[key])
    passes = _check_passes(values["passes"], where) if "passes" in values else OPS
    return LayerSpec(sizes, options, passes, where)


def _parse_text(text: str, name: str) -> List[LayerSpec]:
    specs = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{name}:{number}"
        sizes = [w for w in words if "=" not in w]
        fields = [w for w in words if "=" in w]
        if len(sizes) != len(_SIZES):
            raise ValueError(f"{where}: expected 7 sizes 'N C H W K R S' then key=value "
                             f"fields, got {line.strip()!r}")
        try:
            values: Dict[str, Any] = dict(zip(_SIZES, (int(s) for s in sizes)))
            for item in fields:
                key, _, value = item.partition("=")
                values[key] = _text_value(key, value)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        specs.append(_spec(values, where))
    return specs


def read_shapes(path: str) -> List[LayerSpec]:
    """Read a shapes file, JSON or text (see the module docstring for both formats).

    Parameters
    ----------
    path : str
        The file; JSON when its first non-blank character is ``[`` or ``{``.

    Returns
    -------
    list of LayerSpec

    Raises
    ------
    ValueError
        For a malformed file; the message names the file and the line or entry.
    """
    text = Path(path).read_text()
    if text.lstrip()[:1] not in ("[", "{"):
        specs = _parse_text(text, path)
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: not valid JSON: {exc}") from None
        if isinstance(data, dict):
            data = data.get("layers")
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise ValueError(f"{path}: expected a list of objects or {{\"layers\": [...]}}")
        specs = [_spec(d, f"{path}[{i}]") for i, d in enumerate(data)]
    if not specs:
        raise ValueError(f"{path}: no layers")
    return specs


def warm(spec: LayerSpec, num_threads: Optional[int] = None) -> List[Dict[str, Any]]:
    """Run Find for every pass of one layer (or take the winner from the cache).

    Parameters
    ----------
    spec : LayerSpec
    num_threads : int, optional
        The thread count the later calls will use (Find entries are per thread count);
        default :func:`cconv.get_num_threads`.

    Returns
    -------
    list of dict
        Per pass: ``pass``, ``algo`` (the winner), ``cached`` (it was in the cache file
        already) and ``seconds``.

    Raises
    ------
    ValueError
        If cconv rejects the layer; the message starts with the layer's location.
    """
    import cconv

    from . import _dispatch, _find_cache
    from ._threads import resolve_num_threads

    nthreads = resolve_num_threads(num_threads)
    x_shape, w_shape = spec.shapes()
    try:
        plan = cconv.plan_conv2d(x_shape, w_shape, **spec.options)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{spec.where}: {exc}") from None
    geom = plan.geometry.kernel_geometry
    rows = []
    for op in spec.passes:
        before = _stored(_find_cache.key(geom, op, nthreads))
        start = time.perf_counter()
        impl = _dispatch.select(plan.geometry, op, "find", nthreads)
        rows.append({"pass": op, "algo": impl.name, "cached": before is not None,
                     "seconds": time.perf_counter() - start})
    return rows


def _stored(entry: str) -> Optional[str]:
    from . import _find_cache

    try:
        with open(_find_cache.path()) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    value = data.get(entry) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
