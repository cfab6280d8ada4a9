"""What the DDP tests that need no second rank share: a one-rank gloo group in this process (a module-scoped
fixture; a test module makes it its own by importing it) and a three-layer net whose middle layer a branch may
skip."""

import pytest

torch = pytest.importorskip("torch")
dist = torch.distributed
nn = torch.nn


@pytest.fixture(scope="module", autouse=True)
def one_rank():
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 4)
        self.c = nn.Linear(4, 1)

    def forward(self, x, deep=True):
        h = self.a(x)
        if deep:
            h = self.b(h)  # the call the branch skips
        return self.c(h)
