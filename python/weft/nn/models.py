"""Reference models built from layers: ResNet-18 (v1) and MobileNetV2 (width 1.0), with the
architectures of the published papers and the usual reference implementations (so the parameter
counts match: 11,689,512 and 3,504,872 trainable for 1000 classes)."""
from __future__ import annotations

from .combinators import Residual, Sequential
from .layers import (BatchNorm, Conv2D, Dense, Dropout, Flatten, GlobalAvgPool2D, MaxPool2D,
                     ReLU, ReLU6)

__all__ = ["resnet18", "mobilenet_v2"]


def _conv_bn(channels, kernel, stride, padding, groups=1):
    return [Conv2D(channels, kernel, stride, padding, groups=groups, use_bias=False),
            BatchNorm()]


def _basic_block(in_channels, channels, stride):
    body = Sequential(*_conv_bn(channels, 3, stride, 1), ReLU(), *_conv_bn(channels, 3, 1, 1))
    shortcut = None
    if stride != 1 or in_channels != channels:
        shortcut = Sequential(*_conv_bn(channels, 1, stride, 0))
    return Residual(body, shortcut, activation="relu")


def resnet18(classes=1000):
    """ResNet-18 v1 (He et al. 2015): 7x7 stem, four stages of two basic blocks (64, 128, 256,
    512 channels), global average pooling and a dense classifier. Input (N, 3, 224, 224)."""
    net = Sequential(*_conv_bn(64, 7, 2, 3), ReLU(), MaxPool2D(3, 2, 1))
    in_channels = 64
    for i, channels in enumerate((64, 128, 256, 512)):
        for j in range(2):
            net.add(_basic_block(in_channels, channels, 2 if i > 0 and j == 0 else 1))
            in_channels = channels
    net.add(GlobalAvgPool2D(), Flatten(), Dense(classes))
    return net


def _inverted_residual(in_channels, out_channels, stride, expand):
    hidden = in_channels * expand
    layers = []
    if expand != 1:
        layers += [*_conv_bn(hidden, 1, 1, 0), ReLU6()]
    layers += [*_conv_bn(hidden, 3, stride, 1, groups=hidden), ReLU6(),
               *_conv_bn(out_channels, 1, 1, 0)]
    body = Sequential(*layers)
    if stride == 1 and in_channels == out_channels:
        return Residual(body)
    return body


def mobilenet_v2(classes=1000, dropout=0.2):
    """MobileNetV2 (Sandler et al. 2018), width 1.0: inverted residual blocks with linear
    bottlenecks, ReLU6, a 1280-channel head. Input (N, 3, 224, 224)."""
    net = Sequential(*_conv_bn(32, 3, 2, 1), ReLU6())
    in_channels = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            net.add(_inverted_residual(in_channels, c, s if i == 0 else 1, t))
            in_channels = c
    net.add(*_conv_bn(1280, 1, 1, 0), ReLU6(), GlobalAvgPool2D(), Flatten(), Dropout(dropout),
            Dense(classes))
    return net
