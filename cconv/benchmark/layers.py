"""The layer table of the benchmark suite, layer selection and FLOP counts."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

from .._geometry import conv_output_size

__all__ = ["LAYERS", "Layer", "conv_flops", "select_layers"]


class Layer(NamedTuple):
    """One convolution layer of the suite.

    Input (N, C, H, W), weight (K, C/groups, R, S).  ``stride``, ``padding`` (per side)
    and ``dilation`` are the same along both axes; ``groups == C`` is depthwise.

    Attributes
    ----------
    name : str
    N, C, K, H, W, R, S : int
        Batch, input channels, output channels, input height and width, kernel size.
    stride, padding, dilation, groups : int
    """

    name: str
    N: int
    C: int
    K: int
    H: int
    W: int
    R: int
    S: int
    stride: int
    padding: int
    dilation: int
    groups: int

    @property
    def output_hw(self) -> Tuple[int, int]:
        """The output's (OH, OW)."""
        return (
            int(conv_output_size(self.H, self.R, self.stride, self.dilation, self.padding,
                                 self.padding)),
            int(conv_output_size(self.W, self.S, self.stride, self.dilation, self.padding,
                                 self.padding)),
        )


# Layers of ResNet-50, VGG-16 and MobileNetV2, plus shapes those networks lack: a dilated
# layer, a single-channel filter bank over a large image, an RGB stem and batch 1.
# Columns: name, N, C, K, H, W, R, S, stride, padding, dilation, groups
LAYERS = (
    Layer("resnet50.conv1", 8, 3, 64, 224, 224, 7, 7, 2, 3, 1, 1),
    Layer("resnet50.res2.3x3", 8, 64, 64, 56, 56, 3, 3, 1, 1, 1, 1),
    Layer("resnet50.res2.1x1_64-256", 8, 64, 256, 56, 56, 1, 1, 1, 0, 1, 1),
    Layer("resnet50.res2.1x1_256-64", 8, 256, 64, 56, 56, 1, 1, 1, 0, 1, 1),
    Layer("resnet50.res3.3x3", 8, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1),
    Layer("resnet50.res3.3x3s2", 8, 128, 128, 56, 56, 3, 3, 2, 1, 1, 1),
    Layer("resnet50.res4.3x3", 8, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1),
    Layer("resnet50.res5.3x3", 8, 512, 512, 7, 7, 3, 3, 1, 1, 1, 1),
    Layer("vgg16.conv1_2", 2, 64, 64, 224, 224, 3, 3, 1, 1, 1, 1),
    Layer("vgg16.conv3_2", 8, 256, 256, 56, 56, 3, 3, 1, 1, 1, 1),
    Layer("vgg16.conv4_2", 8, 512, 512, 28, 28, 3, 3, 1, 1, 1, 1),
    Layer("mobilenetv2.dw144", 8, 144, 144, 56, 56, 3, 3, 1, 1, 1, 144),
    Layer("mobilenetv2.dw384s2", 8, 384, 384, 28, 28, 3, 3, 2, 1, 1, 384),
    Layer("dilated.64.d2", 8, 64, 64, 128, 128, 3, 3, 1, 2, 2, 1),
    Layer("filter.1-16.5x5", 4, 1, 16, 512, 512, 5, 5, 1, 2, 1, 1),
    Layer("rgb.3-32.3x3", 8, 3, 32, 256, 256, 3, 3, 1, 1, 1, 1),
    Layer("batch1.128.3x3", 1, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1),
    Layer("batch1.256.3x3", 1, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1),
)


def conv_flops(layer: Layer, n: Optional[int] = None) -> int:
    """FLOPs of one pass of `layer`, counted as direct convolution.

    Parameters
    ----------
    layer : Layer
        The layer.
    n : int, optional
        Batch size to count with; default ``layer.N``.

    Returns
    -------
    int
        ``2 * N * K * OH * OW * (C / groups) * R * S``.  The same count serves forward,
        backward-data and backward-weight, so an algorithm that does fewer operations
        (Winograd) shows an effective throughput.
    """
    n = layer.N if n is None else n
    oh, ow = layer.output_hw
    return 2 * n * layer.K * oh * ow * (layer.C // layer.groups) * layer.R * layer.S


def select_layers(spec: Union[None, str, Sequence[str]] = None,
                  layers: Sequence[Layer] = LAYERS) -> List[Layer]:
    """Pick the layers whose name contains one of the given substrings.

    Parameters
    ----------
    spec : str or sequence of str, optional
        Comma-separated substrings (case-insensitive), or a sequence of them.
        ``None``, ``""`` or ``"all"`` selects every layer.
    layers : sequence of Layer, optional
        The table to select from; default :data:`LAYERS`.

    Returns
    -------
    list of Layer
        The matching layers, in table order.

    Raises
    ------
    ValueError
        If nothing matches; the message lists the layer names.
    """
    if spec is None:
        return list(layers)
    if isinstance(spec, str):
        spec = spec.split(",")
    subs = [s.strip().lower() for s in spec if s.strip()]
    if not subs or "all" in subs:
        return list(layers)
    chosen = [layer for layer in layers if any(s in layer.name.lower() for s in subs)]
    if not chosen:
        names = ", ".join(layer.name for layer in layers)
        raise ValueError(f"layers={','.join(subs)!r} matches none of: {names}")
    return chosen
