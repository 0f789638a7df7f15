"""trident.nn: torch.nn's Module, Parameter, containers, layers, losses, functional and init; to_torch(module)
(or module.to_torch()) puts a Trident module inside a torch model, from_torch(torch_module) makes a torch model of
standard layers a Trident one."""
from . import functional, init  # noqa: F401
from .layers import *  # noqa: F401,F403
from .layers import (AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv2d, CrossEntropyLoss,  # noqa
                     Dropout, Embedding, Flatten, GELU, GroupNorm, Identity, L1Loss, LayerNorm, Linear, LogSoftmax,
                     MaxPool2d, MSELoss, NLLLoss, ReLU, Sigmoid, SiLU, Softmax, Tanh, Unflatten, Conv1d, RMSNorm,
                     AdaptiveAvgPool2d, SmoothL1Loss, HuberLoss, KLDivLoss, LeakyReLU, ELU,
                     ConvTranspose2d)
from .attention import MultiheadAttention  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell  # noqa: F401
from .module import Module, ModuleDict, ModuleList, Parameter, Sequential  # noqa: F401
from ._torch import to_torch  # noqa: F401
from ._from_torch import from_torch  # noqa: F401

Module.to_torch = to_torch
