"""An in-place op through a view overwrites a value saved for backward.

`scores.exp()` saves its output. `top = scores[:, :2]` is a view: it shares the output's memory *and* its version
counter, so clamping it in place changes the saved value (version 0 -> 1) and backward fails:

    RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation

`gradviz run` reports (exit status 1):

    stale-version (error)  at the `top.clamp_(max=1.0)` line, naming ExpBackward (saved at the exp line)

The fix: clamp a copy (`top = scores[:, :2].clamp(max=1.0)`), or `scores = scores.clone()` before writing.
"""

import gradviz as torch
import gradviz.nn as nn

torch.manual_seed(0)

layer = nn.Linear(5, 4)
x = torch.randn(3, 5)

scores = layer(x).exp()     # ExpBackward saves its output
top = scores[:, :2]         # a view of scores: same storage, same version counter
top.clamp_(max=1.0)         # in place through the view
loss = scores.sum()
loss.backward()             # fails: ExpBackward's saved output changed
