"""``gradviz.nn``: modules, parameters, initialisation and functional forms, with PyTorch's names."""

from . import functional, init
from .module import Module
from .modules.activation import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .modules.container import ModuleList, Sequential
from .modules.conv import Conv2d
from .modules.dropout import Dropout
from .modules.flatten import Flatten
from .modules.linear import Identity, Linear
from .modules.loss import BCELoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .modules.pooling import MaxPool2d
from .parameter import Parameter

__all__ = ["functional", "init", "Module", "Parameter", "BCELoss", "Conv2d", "CrossEntropyLoss", "Dropout",
           "Flatten", "Identity", "L1Loss", "Linear", "LogSoftmax", "MaxPool2d", "ModuleList", "MSELoss",
           "NLLLoss", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh"]
