"""weft.nn: models as layers, in two pure pieces and a stateful convenience.

    >>> import weft, weft.nn as nn
    >>> model = nn.Sequential(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.ReLU(),
    ...                       nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(10))
    >>> params = model.init((None, 3, 32, 32), seed=0)     # shapes inferred; batch deferred
    >>> y = model.apply(params, weft.random.uniform(shape=(4, 3, 32, 32)))
    >>> y.shape
    (4, 10)

``model.hybridize()`` runs the same model as one bound graph; ``model.export(prefix, params)``
writes MXNet's checkpoint files; ``nn.Trainer`` trains with ``nn.SGD``, ``nn.Adam`` or
``nn.AdamW``. See docs/LAYERS.md.
"""
from . import init, models
from .combinators import Concat, Lambda, Parallel, Residual, Sequential
from .symbol_layer import SymbolLayer, import_model
from .layer import Context, Layer, Parameters
from .layers import (GELU, Activation, AvgPool1D, AvgPool2D, AvgPool3D, BatchNorm, Conv1D,
                     Conv2D, Conv2DTranspose, Conv3D, Dense, Dropout, Embedding, Flatten,
                     GlobalAvgPool1D, GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool2D,
                     LayerNorm, LeakyReLU, MaxPool1D, MaxPool2D, MaxPool3D, ReLU, ReLU6, Sigmoid,
                     Softmax, Tanh)
from .loss import L1Loss, L2Loss, Loss, SigmoidBinaryCrossEntropyLoss, SoftmaxCrossEntropyLoss
from .optim import SGD, Adam, AdamW, Optimizer
from .rnn import GRU, LSTM, RNN
from .trainer import Accuracy, Trainer, batches

__all__ = [
    "Accuracy", "Activation", "Adam", "AdamW", "AvgPool1D", "AvgPool2D", "AvgPool3D",
    "BatchNorm", "Concat", "Context", "Conv1D", "Conv2D", "Conv2DTranspose", "Conv3D", "Dense",
    "Dropout", "Embedding", "Flatten", "GELU", "GRU", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalAvgPool3D", "GlobalMaxPool2D", "L1Loss", "L2Loss", "LSTM", "Lambda", "Layer",
    "LayerNorm", "LeakyReLU", "Loss", "MaxPool1D", "MaxPool2D", "MaxPool3D", "Optimizer",
    "Parallel", "Parameters", "RNN", "ReLU", "ReLU6", "Residual", "SGD", "Sequential", "Sigmoid",
    "SigmoidBinaryCrossEntropyLoss", "Softmax", "SoftmaxCrossEntropyLoss", "SymbolLayer", "Tanh",
    "Trainer", "batches", "import_model", "init", "models",
]
