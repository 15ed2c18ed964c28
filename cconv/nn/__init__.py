"""cconv.nn: a small NumPy deep-learning toolkit on cconv's convolutions.

Layers follow PyTorch's names, signatures, initialisation and semantics, with explicit
gradients instead of autograd: ``y = layer(x)`` (or ``layer.forward(x)``) keeps what the
layer needs, ``dx = layer.backward(dy)`` returns the input gradient and stores parameter
gradients in ``grad_weight`` / ``grad_bias``.  Parameters are plain NumPy arrays that the
optimizers update in place::

    from cconv import nn

    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, rng=0), nn.BatchNorm2d(16),
                          nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.Adam(model.parameters(), lr=1e-3)
    loss = loss_fn(model(images), labels)      # images (N, 1, 8, 8) float32, labels (N,) int
    model.backward(loss_fn.backward())
    opt.step()
    nn.save(model, "model.npz")                # keys "0.weight", "1.running_mean", ...

Modules: ``module`` (base class, parameters, state dicts), ``conv`` (cconv-backed
convolutions), ``pooling``, ``normalization``, ``layers`` (ReLU, Flatten, Linear, Dropout),
``container`` (Sequential), ``losses``, ``optim``, ``serialization``, ``init``.
"""

from .container import Sequential
from .conv import Conv2d, ConvTranspose2d
from .layers import Dropout, Flatten, Linear, ReLU
from .losses import CrossEntropyLoss
from .module import Module, Parameter
from .normalization import BatchNorm2d
from .optim import SGD, Adam, Optimizer
from .pooling import AvgPool2d, MaxPool2d
from .serialization import load, load_state_dict, save

__all__ = ["Adam", "AvgPool2d", "BatchNorm2d", "Conv2d", "ConvTranspose2d", "CrossEntropyLoss",
           "Dropout", "Flatten", "Linear", "MaxPool2d", "Module", "Optimizer", "Parameter",
           "ReLU", "SGD", "Sequential", "load", "load_state_dict", "save"]
