"""The seed's autograd notes, run: how `requires_grad` and `volatile` spread through a graph.

Prints what the notes say each line gives:

    a = x + y          -> a.requires_grad  False (no input requires grad)
    b = a + z          -> b.requires_grad  True  (z does)
    model(regular_input).requires_grad  True   (the parameters require grad)
    model(volatile_input).requires_grad False  (one volatile input makes everything downstream volatile)
    model(volatile_input).volatile      True
    model(volatile_input).creator is None True

gradviz still honours `volatile` the pre-0.4 way so the notes run, but it was removed from PyTorch. `gradviz run`
reports:

    volatile-deprecated (warning)  at the `volatile_input = Variable(..., volatile=True)` line
"""

import warnings

import gradviz as torch
import gradviz.nn as nn
from gradviz.autograd import Variable

warnings.simplefilter("ignore", DeprecationWarning)  # the notes predate the deprecation; gradviz reports it
torch.manual_seed(0)

x = Variable(torch.randn(5, 5))
y = Variable(torch.randn(5, 5))
z = Variable(torch.randn(5, 5), requires_grad=True)
a = x + y
print("a.requires_grad", a.requires_grad)  # False
b = a + z
print("b.requires_grad", b.requires_grad)  # True

# A small stand-in for the notes' resnet18: any model whose parameters require grad behaves the same.
model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 5))

regular_input = Variable(torch.randn(5, 5))
volatile_input = Variable(torch.randn(5, 5), volatile=True)
print("model(regular_input).requires_grad", model(regular_input).requires_grad)  # True
print("model(volatile_input).requires_grad", model(volatile_input).requires_grad)  # False
print("model(volatile_input).volatile", model(volatile_input).volatile)  # True
print("model(volatile_input).creator is None", model(volatile_input).creator is None)  # True
