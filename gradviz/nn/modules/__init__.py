"""The layer classes of ``gradviz.nn``."""

from .activation import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from .container import ModuleList, Sequential
from .conv import Conv2d
from .dropout import Dropout
from .flatten import Flatten
from .linear import Identity, Linear
from .loss import BCELoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .pooling import MaxPool2d

__all__ = ["LogSoftmax", "ReLU", "Sigmoid", "Softmax", "Tanh", "ModuleList", "Sequential", "Conv2d", "Dropout",
           "Flatten", "Identity", "Linear", "BCELoss", "CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss",
           "MaxPool2d"]
