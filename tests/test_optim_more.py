"""RMSprop, Adagrad and Adadelta update parameters the way SGD and Adam do: in place, bumping the version (a graph
that saved the parameter refuses to backward) and reporting to observers as the optimizer's update."""

import pytest

import gradviz as gv
import gradviz.nn as nn
import gradviz.optim as optim
from gradviz.autograd import observer
from gradviz.errors import StaleVersionError

NEW = ("RMSprop", "Adagrad", "Adadelta")


@pytest.mark.parametrize("name", NEW)
def test_a_step_bumps_the_version_like_sgd(name):
    w = nn.Parameter(gv.ones(3))
    opt = getattr(optim, name)([w], lr=0.1)
    loss = (w * w).sum()
    (w * 2).sum().backward()
    before = w._version
    opt.step()
    assert w._version == before + 1
    with pytest.raises(StaleVersionError):
        loss.backward()  # MulBackward saved w before the step


class Recorder(observer.Observer):
    def __init__(self):
        self.updates = []

    def on_parameter_update(self, optimizer, parameter, old_version, new_version):
        self.updates.append((type(optimizer).__name__, parameter, old_version, new_version))


@pytest.mark.parametrize("name", NEW)
def test_observers_see_each_update_as_the_optimizers(name):
    w, b = nn.Parameter(gv.ones(3)), nn.Parameter(gv.zeros(1))
    opt = getattr(optim, name)([w, b], lr=0.1)
    (w * 2).sum().backward()  # b gets no gradient: no update reported for it
    recorder = Recorder()
    with observer.observing(recorder):
        opt.step()
    assert recorder.updates == [(name, w, 0, 1)]
