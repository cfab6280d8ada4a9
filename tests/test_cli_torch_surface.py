"""A typical training script — device selection, DataLoader, a scheduler, a checkpoint — runs unmodified under
``gradviz run --torch`` and prints what real PyTorch prints for everything that does not depend on random draws."""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset, random_split

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if torch.backends.mps.is_available():
        device = torch.device("mps")
    torch.manual_seed(0)
    X = torch.Tensor(64, 4).uniform_(-1, 1)
    y = (X.sum(1) > 0).long()
    train, val = random_split(TensorDataset(X, y), [0.75, 0.25], generator=torch.Generator().manual_seed(1))
    loader = DataLoader(train, batch_size=16, shuffle=True, num_workers=0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for epoch in range(4):
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
        sched.step()
        print(epoch, len(loader), tuple(xb.shape), xb.dtype == torch.float32, yb.dtype == torch.long, xb.device,
          sched.get_last_lr())
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "ckpt.pt")
    state = torch.load("ckpt.pt", map_location=device, weights_only=True)
    fresh = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    fresh.load_state_dict(state["model"])
    print(torch.equal(fresh(X), model(X)), sorted(state["opt"]["state"][0]), torch.is_tensor(X), torch.numel(X))
    print(torch.LongTensor([1, 2]).dtype == torch.int64, torch.get_default_dtype() == torch.float32,
          torch.accelerator.is_available())
""")


def _run(args, cwd, env):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_training_script_runs_unmodified_and_prints_what_torch_prints(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ours = _run([sys.executable, "-m", "gradviz", "run", "--torch", "--no-render", "-q", "train.py"],
                tmp_path, env)
    assert ours.returncode == 0, ours.stderr
    lines = ours.stdout.splitlines()
    assert lines[0] == "0 3 (16, 4) True True cpu [0.01]"
    assert lines[3] == "3 3 (16, 4) True True cpu [0.0025]"
    assert lines[4] == "True ['momentum_buffer', 'square_avg', 'step'] True 256"
    assert lines[5] == "True True False"
    pytest.importorskip("torch")
    theirs = _run([sys.executable, "train.py"], tmp_path, dict(os.environ))
    assert theirs.returncode == 0, theirs.stderr
    assert theirs.stdout.splitlines() == lines
