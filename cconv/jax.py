"""A JAX ``conv2d`` that runs cconv's kernels on the host and is differentiable.

``import cconv`` does not import this module; ``import cconv.jax`` needs JAX
(``pip install "cconv[jax]"``).

The convolution and its two gradients are ``jax.pure_callback`` calls into
:func:`cconv.conv2d`, :func:`cconv.conv2d_backward_data` and
:func:`cconv.conv2d_backward_weight`, tied together by ``jax.custom_vjp``; so it works under
``jax.jit`` and ``jax.grad`` (reverse mode; forward mode, ``jax.jvp``, is not defined), and
under ``jax.vmap`` one callback per mapped element.  The bias is added by JAX itself.  The
operands travel to the host: this is for CPU backends, where that costs no copy.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError('cconv.jax needs JAX: pip install "cconv[jax]"') from exc

from . import _geometry as _geometry_module
from . import functional as _functional_module

__all__ = ["conv2d"]

# cconv's internal modules carry no type hints; Any-typed aliases keep ``mypy --strict`` from
# flagging every call.
_functional: Any = _functional_module
_geometry: Any = _geometry_module
# jax.ShapeDtypeStruct's constructor has no type hints.
_ShapeDtypeStruct: Any = jax.ShapeDtypeStruct


def _frozen(value: Any) -> Any:
    """``value`` with every list turned into a tuple (hashable, for a static argument)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True)
class _Keywords:
    """The keywords of one convolution: hashable, so JAX can treat them as static."""

    items: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)


def _host(function: str, keywords: _Keywords, dtype: np.dtype, static: tuple[Any, ...],
          *operands: Any) -> np.ndarray:
    """Run one cconv function on the host, in the dtype JAX expects back."""
    result = getattr(_functional, function)(*operands, *static, **keywords.as_dict())
    return np.asarray(result).astype(dtype, copy=False)


def _callback(function: str, keywords: _Keywords, shape: Sequence[int], dtype: Any,
              operands: tuple[jax.Array, ...], static: tuple[Any, ...] = ()) -> jax.Array:
    """``function(*operands, *static, **keywords)`` as a pure callback of (shape, dtype)."""
    dtype = np.dtype(dtype)
    host = functools.partial(_host, function, keywords, dtype, static)
    result: jax.Array = jax.pure_callback(host, _ShapeDtypeStruct(tuple(shape), dtype),
                                          *operands, vmap_method="sequential")
    return result


def _geometry_of(x: jax.Array, w: jax.Array, keywords: _Keywords) -> Any:
    """Validate the convolution now, at trace time (shapes are static)."""
    kw = {k: v for k, v in keywords.items if k not in ("algo", "num_threads")}
    return _geometry.make_geometry(x.shape, w.shape,
                                   dtype=_geometry.compute_dtype(x.dtype, w.dtype), **kw)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _conv2d(x: jax.Array, w: jax.Array, keywords: _Keywords) -> jax.Array:
    geom = _geometry_of(x, w, keywords)
    return _callback("conv2d", keywords, geom.output_shape(), jnp.result_type(x, w), (x, w))


def _conv2d_forward(x: jax.Array, w: jax.Array,
                    keywords: _Keywords) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    return _conv2d(x, w, keywords), (x, w)


def _conv2d_backward(keywords: _Keywords, residuals: tuple[jax.Array, jax.Array],
                     grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    x, w = residuals
    # Cotangents take their primal's dtype; JAX drops whichever one is not needed.
    dx = _callback("conv2d_backward_data", keywords, x.shape, x.dtype, (grad, w), (x.shape,))
    dw = _callback("conv2d_backward_weight", keywords, w.shape, w.dtype, (grad, x), (w.shape,))
    return dx, dw


_conv2d.defvjp(_conv2d_forward, _conv2d_backward)


def conv2d(x: Any, weight: Any, bias: Any = None, *, stride: int | Sequence[int] = 1,
           padding: Any = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
           layout: str = "NCHW", weight_layout: str = "OIHW", padding_mode: str = "zeros",
           padding_value: float = 0.0, algo: str = "auto",
           num_threads: int | None = None) -> jax.Array:
    """:func:`cconv.conv2d` as a differentiable JAX function (``jit`` and ``grad`` work).

    Parameters
    ----------
    x : jax.Array or array_like
        (N, C, H, W) for ``layout="NCHW"`` or (N, H, W, C) for ``"NHWC"``.
    weight : jax.Array or array_like
        (K, C/groups, R, S) for ``weight_layout="OIHW"`` or (R, S, C/groups, K) for ``"HWIO"``.
    bias : jax.Array or array_like, optional
        (K,), added by JAX.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value,
    algo, num_threads
        As in :func:`cconv.conv2d`; static (Python values, not traced arrays).

    Returns
    -------
    jax.Array
        The output in ``layout`` order, of dtype ``jnp.result_type(x, weight)``.
    """
    xa, wa = jnp.asarray(x), jnp.asarray(weight)
    keywords = _Keywords(tuple(
        (name, _frozen(value)) for name, value in dict(
            stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
            weight_layout=weight_layout, padding_mode=padding_mode,
            padding_value=padding_value, algo=algo, num_threads=num_threads).items()))
    geom = _geometry_of(xa, wa, keywords)
    y = _conv2d(xa, wa, keywords)
    if bias is None:
        return y
    b = jnp.asarray(bias)
    if b.shape != (geom.K,):
        raise ValueError(f"bias must have shape ({geom.K},), got {b.shape}")
    return y + (b.reshape(1, -1, 1, 1) if layout == "NCHW" else b)
