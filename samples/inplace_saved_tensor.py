"""An in-place op overwrites a value that an op saved for its backward pass.

`torch.sigmoid` saves its output for backward (d sigmoid = s * (1 - s)). Scaling that output in place with
`hidden *= mask` changes the saved value and bumps its version from 0 to 1, so backward refuses to use it:

    RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation

gradviz predicts it at the in-place line, before any backward, and the script then fails at `loss.backward()`
(exit status 1). `gradviz run` reports:

    stale-version (error)  at the `hidden *= mask` line, naming SigmoidBackward (saved at the sigmoid line),
                           versions 0 -> 1, and the backward that failed

The fix: `hidden = hidden * mask`.
"""

import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)

layer1 = nn.Linear(6, 8)
layer2 = nn.Linear(8, 1)
criterion = nn.MSELoss()

x = torch.randn(4, 6)
target = torch.randn(4, 1)
mask = (torch.rand(4, 8) > 0.5).float()

hidden = torch.sigmoid(layer1(x))   # SigmoidBackward saves its output
hidden *= mask                      # in place: the saved output is now at version 1
out = layer2(hidden)
loss = criterion(out, target)
loss.backward()                     # fails: SigmoidBackward expected version 0
