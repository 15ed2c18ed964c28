"""Train a small CNN built from cconv.nn on scikit-learn's 8x8 handwritten digits.

Needs scikit-learn (the "demo" extra: ``pip install "cconv[demo]"``).  The split, the
initial weights and the batch order come from fixed seeds, so a run is reproducible; the last
line printed is ``accuracy: NN.N%`` on the held-out quarter of the data.

    python examples/train_digits.py [--seed 0] [--epochs 12] [--threads N]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Tuple

import numpy as np
import numpy.typing as npt

import cconv
from cconv import nn

Array = npt.NDArray[Any]


def load_data(seed: int) -> Tuple[Array, Array, Array, Array]:
    """The digits as float32 (N, 1, 8, 8) images in [0, 1] and int labels, split 75 / 25.

    Parameters
    ----------
    seed : int
        Seeds the shuffle before the split.

    Returns
    -------
    (x_train, y_train, x_test, y_test)
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("this example needs scikit-learn: pip install 'cconv[demo]'") from None
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    split = len(labels) * 3 // 4
    train, test = order[:split], order[split:]
    return images[train], labels[train], images[test], labels[test]


def build_model(seed: int) -> nn.Sequential:
    """Two conv-BN-ReLU-max-pool blocks, then dropout and a linear classifier.

    Parameters
    ----------
    seed : int
        Seeds the initial weights.

    Returns
    -------
    nn.Sequential
    """
    rng = np.random.default_rng(seed)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, rng=rng), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),                                                 # 8x8 -> 4x4
        nn.Conv2d(32, 64, 3, padding=1, rng=rng), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2),                                                 # 4x4 -> 2x2
        nn.Flatten(), nn.Dropout(0.25, rng=rng), nn.Linear(64 * 2 * 2, 10, rng=rng))


def accuracy(model: nn.Module, images: Array, labels: Array, batch: int = 256) -> float:
    """Fraction of ``images`` classified as ``labels`` (evaluation mode).

    Parameters
    ----------
    model : nn.Module
    images, labels : ndarray
    batch : int

    Returns
    -------
    float
    """
    model.eval()
    correct = 0
    for start in range(0, len(labels), batch):
        logits = model(images[start:start + batch])
        correct += int((logits.argmax(axis=1) == labels[start:start + batch]).sum())
    return correct / len(labels)


def train(seed: int, epochs: int, batch_size: int) -> float:
    """Train with Adam and a step learning-rate decay; print progress; return test accuracy.

    Parameters
    ----------
    seed : int
    epochs : int
    batch_size : int

    Returns
    -------
    float
    """
    x_train, y_train, x_test, y_test = load_data(seed)
    model = build_model(seed)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.Adam(model.parameters(), lr=3e-3)
    order_rng = np.random.default_rng(seed + 1)
    for epoch in range(epochs):
        if epoch == epochs * 2 // 3:
            optimizer.lr /= 10  # a short fine-tuning phase steadies the last epochs
        model.train()
        start, total, batches = time.perf_counter(), 0.0, 0
        order = order_rng.permutation(len(y_train))
        for first in range(0, len(order), batch_size):
            rows = order[first:first + batch_size]
            loss = loss_fn(model(x_train[rows]), y_train[rows])
            model.backward(loss_fn.backward())
            optimizer.step()
            total, batches = total + loss, batches + 1
        print(f"epoch {epoch + 1:2d}: loss {total / batches:.4f}, test accuracy "
              f"{accuracy(model, x_test, y_test):.2%} ({time.perf_counter() - start:.2f} s)")
    return accuracy(model, x_test, y_test)


def main() -> None:
    """Parse the command line, train, print ``accuracy: NN.N%`` last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None,
                        help="cconv threads (default: cconv.get_num_threads())")
    args = parser.parse_args()
    if args.threads is not None:
        cconv.set_num_threads(args.threads)
    start = time.perf_counter()
    result = train(args.seed, args.epochs, args.batch_size)
    print(f"wall time: {time.perf_counter() - start:.1f} s on {cconv.get_num_threads()} "
          f"thread(s)")
    print(f"accuracy: {result * 100:.1f}%")


if __name__ == "__main__":
    main()
