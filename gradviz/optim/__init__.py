"""``gradviz.optim``: optimizers with ``torch.optim``'s names and update rules."""

from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]

# ----- more optimizers and the learning-rate schedulers ---------------------------------------------------------
from . import lr_scheduler  # noqa: E402
from .adadelta import Adadelta  # noqa: E402
from .adagrad import Adagrad  # noqa: E402
from .rmsprop import RMSprop  # noqa: E402

__all__ += ["RMSprop", "Adagrad", "Adadelta", "lr_scheduler"]

# ----- breadth2: NAdam, RAdam ------------------------------------------------------------------------------------
from .nadam import NAdam, RAdam  # noqa: E402

__all__ += ["NAdam", "RAdam"]

# ----- L-BFGS (closures re-evaluated within one step) -----------------------------------------------------------
from .lbfgs import LBFGS  # noqa: E402

__all__ += ["LBFGS"]
