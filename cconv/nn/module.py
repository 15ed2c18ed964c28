"""The layer base class: modes, parameters, buffers and state dictionaries.

A layer keeps its parameters as plain NumPy arrays in attributes (``weight``, ``bias``) and the
gradients of the last ``backward`` call beside them (``grad_weight``, ``grad_bias``).  The
names are listed once per class in ``param_names`` and ``buffer_names``; everything generic
(``parameters()``, ``state_dict()``, ``train()``) reads those lists, so a layer only writes
``forward`` and ``backward``.

Layers never modify their inputs, but they keep arrays for ``backward`` by reference (the
input, or their own output): change neither in place between a layer's ``forward`` and its
``backward``.
"""

from __future__ import annotations

from typing import (Any, ClassVar, Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar,
                    cast)

import numpy as np
import numpy.typing as npt

from ._types import Array

__all__ = ["Module", "Parameter"]

M = TypeVar("M", bound="Module")


class Parameter:
    """A live handle on one parameter array of a module and on its gradient.

    The handle reads the module's attribute on every access, so an optimizer holding it
    updates whatever array the module holds now (also after ``load_state_dict``).

    Parameters
    ----------
    module : Module
        The owner.
    name : str
        The attribute holding the array; its gradient is the attribute ``"grad_" + name``.
    """

    __slots__ = ("module", "name")

    def __init__(self, module: Module, name: str) -> None:
        self.module = module
        self.name = name

    @property
    def value(self) -> Array:
        """The parameter array (updated in place by optimizers)."""
        return cast(Array, getattr(self.module, self.name))

    @property
    def grad(self) -> Optional[Array]:
        """The gradient from the last ``backward`` call, or None before any."""
        return cast(Optional[Array], getattr(self.module, "grad_" + self.name))

    def __repr__(self) -> str:
        return f"Parameter({type(self.module).__name__}.{self.name}, shape={self.value.shape})"


class Module:
    """Base class of layers and containers.

    Subclasses set ``param_names`` / ``buffer_names`` and implement :meth:`forward` and
    :meth:`backward`; containers override :meth:`children`.

    Attributes
    ----------
    training : bool
        True after :meth:`train` (the initial mode), False after :meth:`eval`.
    """

    #: Attributes holding trainable arrays (None when a layer was built without one).
    param_names: ClassVar[Tuple[str, ...]] = ()
    #: Attributes holding state that is saved but not trained (running statistics).
    buffer_names: ClassVar[Tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.training = True
        for name in self.param_names:
            setattr(self, "grad_" + name, None)

    def forward(self, x: Array) -> Array:
        """Compute the layer's output and remember what :meth:`backward` needs.

        Parameters
        ----------
        x : ndarray

        Returns
        -------
        ndarray
        """
        raise NotImplementedError

    def backward(self, grad_out: Array) -> Array:
        """Gradients of the last :meth:`forward` call.

        Parameters
        ----------
        grad_out : ndarray
            Gradient of the loss with respect to the last output.

        Returns
        -------
        ndarray
            Gradient with respect to the last input; parameter gradients are stored in the
            ``grad_<name>`` attributes (replaced, not accumulated).
        """
        raise NotImplementedError

    def __call__(self, x: Array) -> Array:
        return self.forward(x)

    def _saved(self, value: Optional[Any]) -> Any:
        """``value`` (state saved by forward), or a RuntimeError when forward never ran."""
        if value is None:
            raise RuntimeError(f"{self!r}: backward called before forward")
        return value

    # -- structure --------------------------------------------------------------------------

    def children(self) -> Iterator[Tuple[str, Module]]:
        """The direct sub-modules with their names (none for a plain layer).

        Returns
        -------
        iterator of (str, Module)
        """
        return iter(())

    def train(self: M, mode: bool = True) -> M:
        """Set training mode (``mode=True``) or evaluation mode, here and in all children.

        Parameters
        ----------
        mode : bool

        Returns
        -------
        Module
            ``self``.
        """
        self.training = bool(mode)
        for _, child in self.children():
            child.train(mode)
        return self

    def eval(self: M) -> M:
        """Set evaluation mode (``train(False)``).

        Returns
        -------
        Module
            ``self``.
        """
        return self.train(False)

    def named_parameters(self, prefix: str = "") -> Iterator[Tuple[str, Parameter]]:
        """Every parameter with its state-dictionary key, children first-to-last.

        Parameters
        ----------
        prefix : str
            Prepended to every key.

        Returns
        -------
        iterator of (str, Parameter)
        """
        for name in self.param_names:
            if getattr(self, name) is not None:
                yield prefix + name, Parameter(self, name)
        for child_name, child in self.children():
            yield from child.named_parameters(f"{prefix}{child_name}.")

    def parameters(self) -> List[Parameter]:
        """Every parameter, in the order of :meth:`named_parameters`.

        Returns
        -------
        list of Parameter
        """
        return [param for _, param in self.named_parameters()]

    def zero_grad(self) -> None:
        """Forget the gradients (set every ``grad_<name>`` to None)."""
        for param in self.parameters():
            setattr(param.module, "grad_" + param.name, None)

    # -- state ------------------------------------------------------------------------------

    def _named_state(self, prefix: str = "") -> Iterator[Tuple[str, Module, str]]:
        """(key, owner, attribute) of every parameter and buffer, PyTorch's key order."""
        for name in self.param_names + self.buffer_names:
            if getattr(self, name) is not None:
                yield prefix + name, self, name
        for child_name, child in self.children():
            yield from child._named_state(f"{prefix}{child_name}.")

    def state_dict(self) -> Dict[str, Array]:
        """Copies of every parameter and buffer, keyed as PyTorch keys them.

        Returns
        -------
        dict of str to ndarray
            Keys such as ``"0.weight"``, ``"1.running_mean"``; copies, so later training
            does not change a saved state.
        """
        return {key: np.array(getattr(owner, name), copy=True)
                for key, owner, name in self._named_state()}

    def load_state_dict(self, state: Mapping[str, npt.ArrayLike], strict: bool = True) -> None:
        """Copy arrays into the parameters and buffers in place.

        Parameters
        ----------
        state : mapping of str to array_like
            As :meth:`state_dict` returns (or a PyTorch state dict converted to NumPy).
        strict : bool
            When True, missing and unexpected keys are a ValueError; otherwise they are
            ignored.  Shape mismatches are always a ValueError.
        """
        targets = {key: (owner, name) for key, owner, name in self._named_state()}
        if strict:
            missing = sorted(set(targets) - set(state))
            unexpected = sorted(set(state) - set(targets))
            if missing or unexpected:
                raise ValueError(f"load_state_dict: missing keys {missing}, unexpected keys "
                                 f"{unexpected}")
        checked = []
        for key, (owner, name) in targets.items():
            if key not in state:
                continue
            value = np.asarray(state[key])
            target = getattr(owner, name)
            if value.shape != target.shape:
                raise ValueError(f"load_state_dict: {key} has shape {value.shape}, but the "
                                 f"module's has shape {target.shape}")
            checked.append((target, value))
        # Copy only after every shape is known to fit, so a failed load changes nothing.
        for target, value in checked:
            np.copyto(target, value, casting="same_kind")
