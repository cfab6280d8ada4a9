"""A value saved for backward, changed through `.data`: no error, and a silently wrong gradient.

`torch.sigmoid` saves its output for backward (d sigmoid = s * (1 - s)). This script "turns off" the gate's
small activations by zeroing them through `.data`. A write through `.data` goes to the same memory but moves a
version counter of its own, so the check that would raise "modified by an inplace operation" never fires, in
PyTorch either (a PyTorch issue reproduces it: zeroing a sigmoid output through `.data` makes the input's
gradient zeros, with no error). Backward computes s * (1 - s) from the zeroed values: the gate's gradient is
exactly zero wherever an activation was zeroed, and the script runs to the end (its own exit status is 0;
`gradviz run` exits 1 for the error it reports, unless given `--fail-on never`).

`gradviz run` reports:

    silent-inplace (error)  at the `gate.data[...] = 0` line, naming SigmoidBackward (saved at the sigmoid line)
                            and the backward that used the changed values

The fix: `gate = gate * (gate >= 0.5)` (out of place: autograd tracks it, and the gradient is right).
"""

import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)

layer = nn.Linear(6, 8)
head = nn.Linear(8, 1)
x = torch.randn(16, 6)
target = torch.randn(16, 1)

pre = layer(x)
gate = torch.sigmoid(pre)                # SigmoidBackward saves its output `gate`
gate.data[gate.data < 0.5] = 0           # the mistake: written through .data, no version bump
loss = ((head(gate) - target) ** 2).mean()
loss.backward()                          # uses the zeroed values: no error, wrong gradient

zeroed = (gate.data == 0).float().sum().item()
print(f"{int(zeroed)} of {gate.numel()} activations zeroed; layer.weight.grad norm {layer.weight.grad.norm():.4f}")
