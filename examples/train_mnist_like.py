"""Time per epoch of a LeNet-style CNN in cconv.nn, and of the same network in PyTorch.

The data are synthetic 28x28 "stroke digits" made here with NumPy (nothing to download):
each of ten classes is a fixed figure of three thick strokes, and every sample is its class's
figure moved by up to three pixels, with one random extra stroke and Gaussian noise.

When PyTorch is installed the same architecture is built there, starts from the same weights
and sees the same batches; both run on the same number of threads (cconv's OpenMP, NumPy's
BLAS and PyTorch's intra-op pool are all set to it) and their epochs alternate, so both see
the same machine load.  Without PyTorch only cconv.nn's times are printed.

    python examples/train_mnist_like.py [--samples 6000] [--epochs 3] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt
import threadpoolctl

import cconv
from cconv import nn

Array = npt.NDArray[Any]
SIZE = 28
CLASSES = 10


def strokes(rng: np.random.Generator, count: int, width: float = 1.2) -> Array:
    """``count`` images (SIZE x SIZE) of one random thick stroke each, values in [0, 1].

    Parameters
    ----------
    rng : numpy.random.Generator
    count : int
    width : float
        Standard deviation of the stroke's Gaussian profile, in pixels.

    Returns
    -------
    ndarray of shape (count, SIZE, SIZE), float32
    """
    ends = rng.uniform(5, SIZE - 5, size=(count, 2, 2))
    t = np.linspace(0.0, 1.0, 24)[None, :, None]
    points = ends[:, :1] + t * (ends[:, 1:] - ends[:, :1])              # (count, 24, 2)
    grid = np.arange(SIZE, dtype=np.float64)
    dy = (grid[None, :, None] - points[:, None, :, 0]) ** 2               # (count, SIZE, 24)
    dx = (grid[None, :, None] - points[:, None, :, 1]) ** 2
    dist = dy[:, :, None, :] + dx[:, None, :, :]                           # (count, S, S, 24)
    images: Array = np.exp(-dist.min(axis=3) / (2 * width ** 2)).astype(np.float32)
    return images


def make_data(samples: int, seed: int) -> Tuple[Array, Array]:
    """Synthetic stroke digits and their labels.

    Parameters
    ----------
    samples : int
    seed : int

    Returns
    -------
    images : ndarray of shape (samples, 1, SIZE, SIZE), float32
    labels : ndarray of shape (samples,), int64
    """
    rng = np.random.default_rng(seed)
    figures = np.clip(strokes(np.random.default_rng(1234), 3 * CLASSES)
                      .reshape(CLASSES, 3, SIZE, SIZE).sum(axis=1), 0.0, 1.0)
    labels = rng.integers(0, CLASSES, size=samples)
    shift = 3
    padded = np.pad(figures, ((0, 0), (shift, shift), (shift, shift)))
    rows, cols = rng.integers(0, 2 * shift + 1, size=(2, samples))
    images = np.empty((samples, SIZE, SIZE), dtype=np.float32)
    for i in range(samples):
        images[i] = padded[labels[i], rows[i]:rows[i] + SIZE, cols[i]:cols[i] + SIZE]
    images = np.clip(images + strokes(rng, samples), 0.0, 1.0)
    images += rng.normal(0.0, 0.2, size=images.shape).astype(np.float32)
    return images[:, None], labels.astype(np.int64)


def build_model(seed: int) -> nn.Sequential:
    """The LeNet-style network: two conv-BN-ReLU-pool blocks and a two-layer classifier.

    Parameters
    ----------
    seed : int

    Returns
    -------
    nn.Sequential
    """
    rng = np.random.default_rng(seed)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, rng=rng), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),                                                 # 28 -> 14
        nn.Conv2d(32, 64, 3, padding=1, rng=rng), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2),                                                 # 14 -> 7
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128, rng=rng), nn.ReLU(),
        nn.Dropout(0.25, rng=rng), nn.Linear(128, CLASSES, rng=rng))


def torch_twin(model: nn.Sequential) -> Any:
    """The same network in PyTorch with ``model``'s weights, or None without PyTorch.

    Parameters
    ----------
    model : nn.Sequential
        As :func:`build_model` returns.

    Returns
    -------
    torch.nn.Sequential or None
    """
    try:
        import torch
    except ImportError:
        return None
    tnn = torch.nn
    twin = tnn.Sequential(
        tnn.Conv2d(1, 32, 3, padding=1), tnn.BatchNorm2d(32), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(32, 64, 3, padding=1), tnn.BatchNorm2d(64), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(), tnn.Linear(64 * 7 * 7, 128), tnn.ReLU(), tnn.Dropout(0.25),
        tnn.Linear(128, CLASSES))
    twin.load_state_dict({key: torch.from_numpy(value)
                          for key, value in model.state_dict().items()})
    return twin


def cconv_epoch(model: nn.Sequential, optimizer: nn.Optimizer,
                batches: List[Tuple[Array, Array]]) -> float:
    """Train one epoch with cconv.nn; return the mean loss.

    Parameters
    ----------
    model : nn.Sequential
    optimizer : nn.Optimizer
    batches : list of (images, labels)

    Returns
    -------
    float
    """
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    total = 0.0
    for images, labels in batches:
        total += loss_fn(model(images), labels)
        model.backward(loss_fn.backward())
        optimizer.step()
    return total / len(batches)


def torch_epoch(twin: Any, optimizer: Any, batches: List[Tuple[Any, Any]]) -> float:
    """Train one epoch of the PyTorch twin; return the mean loss.

    Parameters
    ----------
    twin : torch.nn.Sequential
    optimizer : torch.optim.Optimizer
    batches : list of (images, labels) tensors

    Returns
    -------
    float
    """
    import torch

    twin.train()
    total = 0.0
    for images, labels in batches:
        optimizer.zero_grad()
        loss: Any = torch.nn.functional.cross_entropy(twin(images), labels)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


def accuracy(predict: Callable[[Array], Array], images: Array, labels: Array) -> float:
    """Fraction of ``images`` whose largest logit is at ``labels``.

    Parameters
    ----------
    predict : callable
        Maps a batch of images to (N, classes) logits.
    images, labels : ndarray

    Returns
    -------
    float
    """
    hits = 0
    for start in range(0, len(labels), 500):
        logits = predict(images[start:start + 500])
        hits += int((logits.argmax(axis=1) == labels[start:start + 500]).sum())
    return hits / len(labels)


def timed(step: Callable[[], float]) -> Tuple[float, float]:
    """Run ``step``; return (seconds, its result)."""
    start = time.perf_counter()
    result = step()
    return time.perf_counter() - start, result


def main() -> None:
    """Parse the command line, train both networks side by side, print the epoch times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6000, help="training samples")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for every library (default: cconv.get_num_threads())")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    threads = cconv.get_num_threads() if args.threads is None else args.threads
    cconv.set_num_threads(threads)

    x_train, y_train = make_data(args.samples, args.seed)
    x_test, y_test = make_data(max(args.samples // 5, 1), args.seed + 1)
    order_rng = np.random.default_rng(args.seed + 2)
    orders = [order_rng.permutation(args.samples) for _ in range(args.epochs)]

    model = build_model(args.seed)
    twin = torch_twin(model)      # copies the initial weights before any training
    optimizer = nn.SGD(model.parameters(), lr=0.05, momentum=0.9)
    times: Dict[str, List[float]] = {"cconv.nn": [], "PyTorch": []}
    twin_optimizer: Optional[Any] = None
    if twin is not None:
        import torch

        torch.manual_seed(args.seed)
        torch.set_num_threads(threads)
        twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
    print(f"{args.samples} training images {SIZE}x{SIZE}, batch {args.batch_size}, "
          f"{threads} thread(s), PyTorch {'found' if twin is not None else 'not installed'}")

    with threadpoolctl.threadpool_limits(threads, user_api="blas"):
        for epoch, order in enumerate(orders, start=1):
            rows = [order[i:i + args.batch_size] for i in range(0, args.samples, args.batch_size)]
            batches = [(x_train[r], y_train[r]) for r in rows]
            seconds, loss = timed(lambda: cconv_epoch(model, optimizer, batches))
            times["cconv.nn"].append(seconds)
            line = f"epoch {epoch}: cconv.nn {seconds:.2f} s (loss {loss:.3f})"
            if twin is not None:
                tensors = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
                seconds, loss = timed(lambda: torch_epoch(twin, twin_optimizer, tensors))
                times["PyTorch"].append(seconds)
                line += f", PyTorch {seconds:.2f} s (loss {loss:.3f})"
            print(line, flush=True)

        model.eval()
        print(f"test accuracy: cconv.nn {accuracy(model, x_test, y_test):.1%}", end="")
        if twin is not None:
            twin.eval()
            with torch.no_grad():
                acc = accuracy(lambda x: twin(torch.from_numpy(x)).numpy(), x_test, y_test)
            print(f", PyTorch {acc:.1%}", end="")
        print()

    ours = statistics.median(times["cconv.nn"])
    summary = f"time per epoch (median): cconv.nn {ours:.2f} s"
    if times["PyTorch"]:
        theirs = statistics.median(times["PyTorch"])
        summary += f", PyTorch {theirs:.2f} s (cconv.nn / PyTorch = {ours / theirs:.2f})"
    print(summary)


if __name__ == "__main__":
    main()
