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

# ----- issue 8 (nn): recurrent, normalisation, embedding, attention, transformer, more activations and losses --
from . import utils  # noqa: E402
from .modules.activation import (  # noqa: E402
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    Mish,
    PReLU,
    ReLU6,
    SiLU,
    Softmax2d,
    Softmin,
    Softplus,
    Softsign,
    Tanhshrink,
    Threshold,
)
from .modules.attention import MultiheadAttention  # noqa: E402
from .modules.container import ModuleDict, ParameterDict, ParameterList  # noqa: E402
from .modules.conv import Conv1d, ConvTranspose2d  # noqa: E402
from .modules.distance import CosineSimilarity, PairwiseDistance  # noqa: E402
from .modules.dropout import Dropout1d, Dropout2d, Dropout3d  # noqa: E402
from .modules.flatten import Unflatten  # noqa: E402
from .modules.fold import Fold, Unfold  # noqa: E402
from .modules.linear import Bilinear  # noqa: E402
from .modules.loss import (  # noqa: E402
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    MarginRankingLoss,
    MultiLabelSoftMarginLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .modules.normalization import (  # noqa: E402
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    LayerNorm,
    RMSNorm,
)
from .modules.padding import (  # noqa: E402
    CircularPad1d,
    CircularPad2d,
    ConstantPad1d,
    ConstantPad2d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    ZeroPad1d,
    ZeroPad2d,
)
from .modules.pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: E402
from .modules.pooling import (  # noqa: E402
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
)
from .modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: E402
from .modules.sparse import Embedding, EmbeddingBag  # noqa: E402
from .modules.transformer import (  # noqa: E402
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .modules.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: E402

__all__ += ["utils", "ELU", "GELU", "Hardtanh", "LeakyReLU", "ReLU6", "SiLU", "Softplus", "MultiheadAttention",
            "ModuleDict", "ParameterList", "Dropout2d", "BCEWithLogitsLoss", "HuberLoss", "KLDivLoss",
            "SmoothL1Loss", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "LayerNorm", "AdaptiveAvgPool2d",
            "AvgPool2d", "GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "RNNCellBase",
            "Embedding", "TransformerEncoder", "TransformerEncoderLayer", "Transformer", "TransformerDecoder",
            "TransformerDecoderLayer", "Conv1d", "BatchNorm3d", "AdaptiveAvgPool1d", "AvgPool1d", "MaxPool1d",
            "ConvTranspose2d", "CELU", "GLU", "SELU", "Hardsigmoid", "Hardswish", "LogSigmoid", "Mish", "PReLU",
            "Softsign", "Tanhshrink", "Threshold", "ParameterDict", "Unflatten", "CircularPad1d", "CircularPad2d",
            "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
            "ReplicationPad2d", "ZeroPad1d", "ZeroPad2d", "InstanceNorm1d", "InstanceNorm2d",
            "CosineSimilarity", "PairwiseDistance", "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss",
            "MarginRankingLoss", "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
            "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "Softmax2d", "Softmin", "PixelShuffle",
            "PixelUnshuffle", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "EmbeddingBag", "Fold", "Unfold", "Bilinear",
            "Dropout1d", "Dropout3d", "RMSNorm"]
