"""``Sequential``: layers applied in order, gradients propagated in reverse."""

from __future__ import annotations

from typing import Iterator, List, Tuple, Union, overload

from ._types import Array
from .module import Module

__all__ = ["Sequential"]


class Sequential(Module):
    """A chain of modules, as ``torch.nn.Sequential``.

    Children are named by their position (``"0"``, ``"1"``, ...), so state-dictionary keys
    match those of the same PyTorch ``Sequential`` (``"0.weight"``, ``"1.running_mean"``).

    Parameters
    ----------
    *layers : Module
    """

    def __init__(self, *layers: Module) -> None:
        super().__init__()
        for index, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: argument {index} is not a Module: {layer!r}")
        self.layers: List[Module] = list(layers)

    def children(self) -> Iterator[Tuple[str, Module]]:
        """The layers named by position.

        Returns
        -------
        iterator of (str, Module)
        """
        return ((str(index), layer) for index, layer in enumerate(self.layers))

    def forward(self, x: Array) -> Array:
        """Apply every layer in order.

        Parameters
        ----------
        x : ndarray

        Returns
        -------
        ndarray
        """
        for layer in self.layers:
            x = layer(x)
        return x

    def backward(self, grad_out: Array) -> Array:
        """Propagate a gradient through every layer, last to first.

        Parameters
        ----------
        grad_out : ndarray
            Gradient of the loss with respect to the last forward output.

        Returns
        -------
        ndarray
            Gradient with respect to the last forward input.
        """
        for layer in reversed(self.layers):
            grad_out = layer.backward(grad_out)
        return grad_out

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.layers)

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Module, Sequential]:
        if isinstance(index, slice):
            return Sequential(*self.layers[index])
        return self.layers[index]

    def __repr__(self) -> str:
        lines = [f"  ({index}): {layer!r}".replace("\n", "\n  ")
                 for index, layer in enumerate(self.layers)]
        return "Sequential(\n" + "\n".join(lines) + "\n)" if lines else "Sequential()"
