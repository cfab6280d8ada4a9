"""The diagnostics catalogue: every code gradviz can report, its default severity, a one-line title, and the
long explanation ``gradviz explain CODE`` prints (what it means, a minimal example of the mistake, the fix).
docs/diagnostics.md is generated from it (``gradviz/diagnose/page.py``).

Codes are stable kebab-case names: scripts, CI settings and docs refer to them, so never rename one.
"""

from ..document import vocabulary
from . import registry

# code -> (default severity, one-line title). A rule may lower the severity of one record (``graph-cut`` is
# an info when the cut was bridged by hand), never raise it.
_LEGACY_CODES = {
    "none-grad": ("warning", "`.grad` of a non-leaf Variable read as None"),
    "nonscalar-backward": ("error", "backward() on a non-scalar output without a gradient"),
    "stale-version": ("error", "a Variable saved for backward was modified in place"),
    "silent-inplace": ("error", "a value saved for backward changed through `.data` or numpy, unnoticed"),
    "graph-freed": ("error", "backward through a graph whose saved buffers were already freed"),
    "retained-graph": ("warning", "finished graphs kept alive, holding memory"),
    "graph-cut": ("warning", "parameters cut off from the loss by .data, detach() or a numpy round trip"),
    "unused-parameter": ("warning", "a parameter given to the optimizer never took part in the forward pass"),
    "no-requires-grad": ("error", "backward() on a result that does not require grad"),
    "leaf-inplace": ("error", "in-place operation on a leaf Variable that requires grad"),
    "optimize-non-leaf": ("error", "an optimizer given a Variable that is not a leaf"),
    "volatile-deprecated": ("warning", "`volatile=True` is deprecated and has no effect in PyTorch"),
    "nan-inf": ("warning", "NaN or Inf produced by an op in forward or backward"),
    "grad-accumulation": ("warning", "gradients summed across optimizer steps (no zero_grad between)"),
    "exploding-grad": ("info", "one layer's gradient norm is far above the others"),
    "vanishing-grad": ("info", "one layer's gradient norm is far below the others"),
    "wrong-backward": ("error", "a custom Function's backward disagrees with its forward"),
    # across the ranks of a DistributedDataParallel job (diagnose/ddp_rules.py: diagnose_job)
    "ddp-unused-parameters": ("error", "parameters of a DDP module got no gradient on some ranks"),
    "ddp-divergent-graph": ("warning", "ranks of a DDP job built different graphs in one iteration"),
    "ddp-accumulate-without-no-sync": ("warning", "gradient accumulation all-reduced on every DDP micro-step"),
    "ddp-grad-mismatch": ("error", "a parameter's gradient differs across DDP ranks at an optimizer step"),
}

SEVERITIES = vocabulary.SEVERITIES  # the document's severities, most severe first


EXPLANATIONS = {
    "none-grad": """\
A non-leaf Variable's `.grad` was read and it was None.

Backward computes the gradient of every Variable in the graph, but it only *keeps* it for leaves (Variables
you created yourself with requires_grad=True, such as parameters). An intermediate result such as a model's
output is not a leaf: its gradient flows through it and is then dropped, so its `.grad` stays None. PyTorch
warns about this too ("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed").

The mistake (the seed question: passing that None on to a second backward):

    y1 = model1(X)
    y2 = model2(y1)
    loss = criterion(y2, y)
    loss.backward()
    y1.backward(y1.grad)     # y1.grad is None: y1 is not a leaf

The fix: most of the time you do not need the intermediate gradient at all. Chain the models and call
backward once; the gradient reaches model1's parameters through y1 by itself:

    model = nn.Sequential(model1, model2)      # or: y2 = model2(model1(X))
    loss = criterion(model(X), y)
    loss.backward()

If you do need to see the gradient of an intermediate result, ask for it before backward:

    y1.retain_grad()                           # keep y1.grad after backward
    loss.backward()
    print(y1.grad)

or observe it without keeping it: `y1.register_hook(lambda g: print(g.norm()))`.

A sharper case: a tensor created with requires_grad=True and transformed on the same line is not a leaf
either. The created tensor is the leaf and gets the gradient, but nothing names it:

    w = torch.randn(3, requires_grad=True) * 0.1     # w is MulBackward's output
    (w * x).sum().backward()
    print(w.grad)                                    # None

gradviz says so and writes the fix for your line: transform first, then ask for gradients
(`w = (torch.randn(3) * 0.1).requires_grad_()`), or create it, then scale it under `torch.no_grad()`
(`with torch.no_grad(): w.mul_(0.1)`). An optimizer given such a `w` refuses it (`optimize-non-leaf`).

In the picture: the Variable whose `.grad` was read is outlined in the diagnostic's colour.
""",
    "nonscalar-backward": """\
backward() was called on a Variable with more than one element and no `gradient` argument
("grad can be implicitly created only for scalar outputs").

backward() computes d(root)/d(leaves). For a scalar root the starting gradient is 1; for a vector or matrix
there is no single obvious starting gradient, so you must pass one with the same shape as the root. Passing
None (for example the `.grad` of a non-leaf, which is always None) is the same as passing nothing: gradviz
links this diagnostic to the `none-grad` read where the None came from.

The mistake:

    y1 = model1(X)                # shape (N, 8)
    loss = criterion(model2(y1), y)
    loss.backward()
    y1.backward(y1.grad)          # y1.grad is None -> RuntimeError

The fix: call backward once on the scalar loss; it already reaches model1 through y1:

    loss = criterion(model2(model1(X)), y)
    loss.backward()

If the root really is a vector, reduce it (`out.sum().backward()`) or pass its gradient explicitly
(`out.backward(torch.ones_like(out))`).

In the picture: the root node of the failed backward.
""",
    "stale-version": """\
A Variable that an op saved for its backward pass was modified in place before backward read it ("one of the
variables needed for gradient computation has been modified by an inplace operation").

Every storage has a version counter that each in-place op increments (`x.add_(1)`, `x[0] = 0`, `x += 1`,
`relu_`, writes through a view). An op that saves a tensor for backward records its version; backward checks
it and refuses to use a value that has changed since. gradviz predicts this at the in-place op itself, as soon
as it overwrites a storage that a graph not yet backwarded has saved, and names both lines.

The mistake:

    y = x.sigmoid()               # SigmoidBackward saves its output y
    y.mul_(2)                     # in place: y is now at version 1
    y.sum().backward()            # RuntimeError: expected version 0

The same happens through a view, which shares its base's storage and counter:

    h = x.exp()                   # ExpBackward saves h
    h[:, 0] = 0                   # writes into h through a view

The fix: use the out-of-place form (`y = y * 2`, `h = h.clone(); h[:, 0] = 0`), or apply the in-place op to a
`clone()`, or move it after backward.

An optimizer's `step()` is an in-place update of the parameters too: stepping between a forward pass (or a
`backward(retain_graph=True)`) and a backward through that graph is reported at the `step()` line. A graph
that no backward ever runs through and that is gone before the script ends (a validation pass run with grad
on, then the next training step) is not reported: nothing used the changed values.

In the picture: the node that saved the value and the in-place op, with the saved tensor's versions.
""",
    "silent-inplace": """\
A value that a graph had saved for its backward pass was changed in place through a path with a version
counter of its own: `.data`, or a numpy array sharing its memory. No error is raised — not by gradviz's engine,
not by PyTorch — and backward computes the gradient from the changed values: it is silently wrong.

`stale-version` protects saved values: every in-place op bumps the storage's version counter, and backward
refuses a saved tensor whose version moved. But `y.data` is a new tensor on the same memory with a *new*
counter, and a numpy array has no counter at all, so writes through them move nothing backward checks.
(Reproduced from a PyTorch issue: zeroing a sigmoid's output through `.data` makes the input's gradient all
zeros, with no error.)

The mistake:

    y = torch.sigmoid(x)          # SigmoidBackward saves its output y
    y.data[y.data < 0.5] = 0      # written through .data: y's version counter does not move
    y.sum().backward()            # x.grad is computed from the zeroed y: all zeros where y was zeroed

and through numpy:

    a = y.detach().numpy()        # shares y's memory
    a[:] = 0                      # no engine event at all
    y.sum().backward()

gradviz reports a `.data` write at its line, naming the node that saved the value and where, once a backward
has run that node (until then nothing used the changed values). A numpy write is seen by no engine event:
gradviz copies a saved value when a numpy array is taken from it, compares when backward reaches the saving
node, and reports at the line where the array was taken, saying the write happened between there and that
backward.

The fix: change the value out of place (`y = y * mask`, `y = torch.where(y < 0.5, 0, y)`) or in a `clone()`;
take a copy before writing into a numpy array (`y.detach().numpy().copy()`); or make the change after backward.
Without `.data`, an in-place change is tracked, and a backward that needs the old value raises `stale-version`
instead of returning a wrong gradient.

Not reported (harmless): `p.data -= lr * p.grad` after backward freed the graph that saved `p`; `.data`
initialisation before any forward pass; reading `.data`; writes into a value whose saving graph was already
freed, or kept with retain_graph=True and not backwarded again.

In the picture: the nodes that saved the changed value.
""",
    "graph-freed": """\
backward ran through a graph whose saved buffers an earlier backward had already freed ("Trying to backward
through the graph a second time").

To save memory, backward frees the values each node saved as soon as it has used them. A second backward
through the same nodes then has nothing to work with. This usually means part of the graph was built once,
outside the loop, and is reused every iteration, or that two losses share a subgraph and each calls backward.

The mistake:

    h = encoder(X)                # built once
    for step in range(100):
        loss = head(h).sum()
        loss.backward()           # the 2nd iteration goes back through h's freed graph

The fix: rebuild what you differentiate inside the loop (`h = encoder(X)` in the loop body), or, for two
losses on one graph, add them and call backward once: `(loss1 + loss2).backward()`.

`retain_graph=True` makes the error go away, but it is seldom the right fix: it keeps every saved buffer
alive (see `retained-graph`), and backward then accumulates into the same parameters twice.

In the picture: the freed nodes, and the line where the first backward ran.
""",
    "retained-graph": """\
Graphs that backward has finished with (or never ran on) are still alive, holding their saved buffers.

A graph lives as long as anything refers to a Variable in it. Each training iteration builds a new one; if
something keeps the old ones alive, memory grows every iteration until the process runs out of it. The usual
causes are:
  - `retain_graph=True`, which keeps a graph's saved buffers after backward;
  - a running total that is itself a Variable: `total_loss += loss` chains every iteration's graph to the
    next one;
  - lists of outputs or losses kept for logging; hooks or closures that hold Variables.

gradviz reports the bytes held after each iteration, warns when they grow, and names the line that links the
iterations (such as the accumulation into total_loss) where it can find it.

The mistake (the seed's hook answer in a training loop):

    for X, y in batches:
        y1 = model1(X)
        loss = criterion(model2(y1), y)
        y1.register_hook(extract(y1))
        loss.backward(retain_graph=True)      # keeps this graph's buffers
        y1.backward(y1.grad)
        epoch_loss += loss                    # and keeps every graph alive

The fix: call backward once on a graph built from the chained models, without retain_graph, and accumulate
plain numbers: `epoch_loss += loss.item()`.

Not reported: a graph kept for a later backward of the same step that uses it and frees it (a GAN's `fake`,
detached for the discriminator's loss, then backpropagated by the generator's), and the rise and fall of memory
within each step of a loop with several backward calls: gradviz warns when the memory or the number of graphs
keeps rising from one part of the run to the next. A line that chains each iteration's graph to the next is
named from the third iteration on when one more graph is alive after each (a short run, such as a Lightning
`Trainer(max_steps=3)` with `self.total_loss += loss` in `training_step`).

In the picture: retained graphs are shaded, with their byte size.
""",
    "graph-cut": """\
Parameters that require grad got no gradient from backward because the graph between them and the loss was
cut: by `.data`, `detach()`, re-wrapping (`Variable(x.data, requires_grad=True)`), or a numpy round trip
(`torch.from_numpy(x.detach().numpy())`). Backward stops at the cut, so everything before it is not trained.

The mistake:

    h = model1(X)
    h = torch.from_numpy(h.detach().numpy())  # leaves the graph
    loss = criterion(model2(h), y)
    loss.backward()                           # model1 gets no gradient

The fix: keep the computation in Variables from the parameters to the loss; remove the cut:

    loss = criterion(model2(model1(X)), y)

When the cut is deliberate and the gradient is carried across by hand, gradviz reports it as an info and
draws two graphs bridged by hand. The seed's first version does this:

    y1 = model1(X)
    v = Variable(y1.data, requires_grad=True) # cut: v is a new leaf
    loss = criterion(model2(v), y)
    loss.backward()                           # stops at v
    y1.backward(v.grad)                       # carries v's gradient into model1

It works, but `Variable` is deprecated and one graph with one backward (`model2(model1(X))`) does the same
with less code and less memory.

Not reported: parameters that no optimizer is given, in a script that uses optimizers, such as a DQN's target
network (`target(s2).max(1)[0].detach()`, then updated by copying from the online network): it is not trained
by backward, so cutting it off is the point.

In the picture: the cut drawn as a dashed break between the two graphs.
""",
    "unused-parameter": """\
A parameter handed to the optimizer never took part in any recorded operation, so it never gets a gradient
and the optimizer never changes it.

Usually a layer is created in `__init__` but not called in `forward`, or a branch of `forward` never runs.

The mistake:

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 1)        # never used below
        def forward(self, x):
            return self.fc1(x).sum(dim=1)

The fix: use the layer in forward, or delete it (or freeze it with `requires_grad_(False)` and leave it out
of the optimizer if it is kept on purpose).

A parameter frozen after it was created (`requires_grad = False` before training) is not reported, even if
it is still given to the optimizer: gradviz reads the parameters' `requires_grad` at the end of the trace.
Nor is a module that is never called and never given to an optimizer, such as the template layer that
`nn.TransformerEncoder(layer, num_layers)` copies: it is not part of the model being trained (the report's
summary counts its parameters apart). Registered as a submodule and given to the optimizer with
`model.parameters()`, the template is reported: it is trained by nothing.

In the picture: unused parameters are listed beside the graph, since they have no node in it.
""",
    "no-requires-grad": """\
backward() was called on a result that does not require grad and has no grad_fn ("element 0 of tensors does
not require grad and does not have a grad_fn").

An op's output requires grad only if one of its inputs does, and only while grad mode is on. So the result
has no history when every input was frozen (`requires_grad=False`), when it was computed under
`torch.no_grad()`, or when an input was volatile (the old inference flag).

The mistake:

    with torch.no_grad():
        out = model(X)                        # no graph is recorded
    loss = criterion(out, y)
    loss.backward()                           # RuntimeError

The fix: compute what you differentiate with grad mode on and with at least one input (usually the
parameters) requiring grad. To freeze part of a model, freeze only that part:
`for p in backbone.parameters(): p.requires_grad = False`, and keep the head trainable.

In the picture: the root of the failed backward, with the reason in the label.
""",
    "leaf-inplace": """\
An in-place op was applied to a leaf that requires grad, such as a parameter ("a leaf Variable that requires
grad is being used in an in-place operation").

Autograd accumulates a leaf's gradient into `.grad`; an in-place change would silently make the recorded
history wrong, so it is refused while grad mode is on.

The mistake:

    w = torch.randn(3, requires_grad=True)
    w.add_(1)                                 # RuntimeError

The fix: update parameters under `torch.no_grad()` (that is what optimizers do), or use an out-of-place op
if the change belongs in the graph:

    with torch.no_grad():
        w.add_(1)

In the picture: the leaf and the in-place op.
""",
    "optimize-non-leaf": """\
An optimizer was given a Variable that is not a leaf and refused it ("can't optimize a non-leaf Tensor", a
ValueError in PyTorch and in gradviz alike).

An optimizer updates the `.grad` of each tensor it holds, and backward fills `.grad` only for leaves: tensors
you created, not results computed from them. The usual way to make a non-leaf by accident is to create a
tensor with requires_grad=True and transform it on the same line: the created tensor is the leaf (unnamed),
and the name holds the result.

The mistake:

    w = torch.randn(3, requires_grad=True) * 0.1     # w is MulBackward's output, not a leaf
    opt = torch.optim.SGD([w], lr=0.1)               # ValueError: can't optimize a non-leaf Tensor

(Read directly, `w.grad` is None after backward for the same reason: see `none-grad`.)

The fix: make the name hold the leaf. Transform first, then ask for gradients:

    w = (torch.randn(3) * 0.1).requires_grad_()

or create it with requires_grad=True and scale it in place where autograd does not record:

    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        w.mul_(0.1)

gradviz writes the first fix for your own line when the line is a single assignment.

In the picture: the node that made the non-leaf.
""",
    "volatile-deprecated": """\
`Variable(..., volatile=True)` was used. `volatile` was removed in PyTorch 0.4: it has no effect there
(PyTorch warns "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.").

gradviz still honours it the old way (the output of any op with a volatile input is volatile and records no
graph), so old scripts such as the seed's autograd notes run, but code relying on it silently builds graphs in
current PyTorch and wastes memory.

The mistake:

    x = Variable(torch.randn(5, 5), volatile=True)
    out = model(x)                            # inference

The fix:

    with torch.no_grad():
        out = model(torch.randn(5, 5))

In the picture: the volatile Variable.
""",
    "nan-inf": """\
An op produced NaN or Inf: in its forward output, or in the gradient its backward produced. gradviz checks
every op (like PyTorch's anomaly mode, but always on) and points at the first one, since everything after it
is contaminated.

Common causes: `log` of 0 or of a negative number, `sqrt` at 0 in backward, division by a value that
reaches 0, `exp` of a large number, a learning rate so large that the weights overflow.

Not reported: an infinity that the graph absorbs before it reaches the loss or any output, such as an
attention mask filled with -inf (softmax turns it into 0). If such a value makes a gradient NaN in backward
(`torch.where(x > 0, x.log(), 0)` at x = 0: 0 times 1/0), that gradient is reported.

The mistake:

    p = torch.tensor([0.0, 0.5], requires_grad=True)
    loss = -(p.log()).sum()                   # log(0) = -inf

The fix: keep the argument in the valid range (`p.clamp(min=1e-7).log()`), use the stable fused form
(`log_softmax` + `nll_loss` instead of `softmax().log()`; `cross_entropy` on logits), or lower the learning
rate.

In the picture: the first op with a non-finite value.
""",
    "grad-accumulation": """\
Gradients were summed across two or more optimizer steps: backward adds into `.grad`, and nothing reset it
between steps, so each step uses the sum of all gradients so far.

The mistake:

    for X, y in batches:
        loss = criterion(model(X), y)
        loss.backward()                       # adds to last iteration's .grad
        optimizer.step()

The fix: clear the gradients once per step, before backward:

    for X, y in batches:
        optimizer.zero_grad()
        loss = criterion(model(X), y)
        loss.backward()
        optimizer.step()

(Accumulating over several backward calls and then stepping once, to simulate a bigger batch, is fine: the
mistake is only accumulation across steps.)

gradviz reports it when a step uses the sum: a backward after one step adds to a parameter's gradient, and
the next step of that parameter comes with no reset in between. Gradients left over in parameters that are
reset before their optimizer steps them again are harmless and not reported: in a GAN, the generator's loss
backwards through the discriminator after the discriminator's step, and `netD.zero_grad()` clears that before
the discriminator's next step. (In a long loop the trace keeps full records of the first and last few
iterations only; the rule looks for this within each of those stretches.)

Any reset counts: `optimizer.zero_grad()`, `model.zero_grad()` (with or without `set_to_none`),
`p.grad = None`, `p.grad.zero_()` or `p.grad.data.zero_()`.

In the picture: the parameters whose gradients were summed.
""",
    "exploding-grad": """\
One layer's gradient norm is orders of magnitude (1000x or more) above the median of the other layers'.
Only gradients that an optimizer then steps with are compared: a GAN generator's backward also reaches the
discriminator, whose gradients are reset before its next step, and those are left out.

Large gradients in one layer usually come from a deep chain of multiplications (RNNs, deep nets without
normalisation), from a badly scaled input, or from a loss that is summed instead of averaged. They make
training unstable and end in NaN.

The mistake:

    h = layer1(x) * 1e4                       # a badly scaled activation
    loss = layer3(layer2(h)).pow(2).sum()     # layer2/layer3 gradients explode

The fix: scale the inputs, use normalisation layers or a better initialisation, average the loss, or clip:
`torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)` between backward and step.

In the picture: the layer's parameters, with their gradient norms on the edges (`--show-grads`).
""",
    "vanishing-grad": """\
One layer's gradient norm is orders of magnitude (1000x or more) below the median of the other layers'.
As for `exploding-grad`, only gradients that an optimizer then steps with are compared.

Tiny gradients mean the layer hardly learns: typical causes are saturated activations (sigmoid/tanh with
large inputs), dead ReLUs, a deep stack without residual connections, or a layer whose output is scaled
down to almost nothing.

The mistake:

    h = layer1(x) * 1e-5                      # layer1's output barely reaches the loss
    loss = layer3(layer2(h)).pow(2).mean()    # layer1 gets ~1e-5 of the others' gradient

The fix: use ReLU-family activations with a suitable initialisation (Kaiming), normalisation layers,
residual connections, or check that the layer's output actually reaches the loss.

In the picture: the layer's parameters, with their gradient norms on the edges (`--show-grads`).
""",
    "wrong-backward": """\
A custom `autograd.Function`'s `backward` returned gradients that do not match its `forward`.

gradviz checks every custom Function the first time it runs with a given input signature (shapes, dtypes,
which inputs require grad). On copies of the actual inputs, it compares what backward gives for a random
projection, <J^T v, u>, with the same projection of forward's derivative by central differences, <v, J u>
(two extra forward calls and one backward per input, in float64 when the Function computes in float64). A
disagreement is checked again at slightly moved inputs, so a kink exactly at an input (ReLU at 0) is not
reported. Nothing raises: a wrong backward trains slowly or to the wrong place, silently.

The mistake (a dropped factor):

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x ** 2          # d(x^3)/dx is 3 x^2

The fix: correct the formula the report points at (the input it names, the line where backward is defined),
and keep it correct with a gradient check in your tests, in float64:

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(Cube.apply, (x,))

The check runs with the tracer quiet, on copies, with the random state restored, so it changes nothing the
script computes or prints. Turn it off with `gradviz run --no-check-backward` or
`gradviz.trace(check_backward=False)`; the report lists what was checked and what was skipped.

In the picture: the Function's node.
""",
    "ddp-unused-parameters": """\
Parameters of a module wrapped in DistributedDataParallel got no gradient from some rank's backward.

DDP all-reduces gradients in buckets while backward runs, and by default (`find_unused_parameters=False`) it
waits for every wrapped parameter's gradient before it considers an iteration's reduction done. A parameter
that took no part in the loss never reports ready: the rank that skipped it raises, at its next forward,
PyTorch's "Expected to have finished reduction in the prior iteration before starting a new one", and the
other ranks, whose all-reduce of that bucket never gets a partner, hang or fail with a closed connection.
gradviz names the parameters, the ranks whose backward missed them, and the line of the call the branch
skipped (where that layer is called in other iterations or on other ranks); PyTorch's error, when a rank
raised it, is turned into this diagnostic.

The mistake (a layer skipped on one rank):

    class Net(nn.Module):
        def forward(self, x, rank):
            h = torch.relu(self.a(x))
            if rank == 0:                 # rank 1 never calls self.b
                h = torch.relu(self.b(h))
            return self.out(h)

    model = DistributedDataParallel(Net())

The fix depends on whether the branch is on purpose:

- the layer should run everywhere: take the same branch on every rank (decide it from a value that was
  all-reduced or broadcast), or keep the parameters in the graph, e.g. `h = h + 0 * self.b(h)` when skipping;
- the branch is real (mixture of experts, a conditional head): pass `find_unused_parameters=True` to
  `DistributedDataParallel(...)`; DDP then walks the graph after each forward to mark what was not used (a
  cost per iteration) and averages the gradient with zeros from the ranks that skipped;
- the parameters are never used on any rank: remove them, or freeze them (`requires_grad_(False)`) before
  wrapping; `find_unused_parameters=True` would only hide them.

The severity says which case it is: an error when `find_unused_parameters=False` (a crash or a hang), a
warning for parameters no rank ever uses while `find_unused_parameters=True` pays for finding them, an info
when that flag handles a branch taken on some ranks or iterations only.
""",
    "ddp-divergent-graph": """\
In one iteration the ranks of a DDP job built different autograd graphs (other ops or other lines, not only
other shapes).

Data parallel training assumes every rank runs the same computation on its own data. DDP's reducer
all-reduces the same buckets in the same order on every rank; when a rank-dependent (or data-dependent)
branch runs other layers, some ranks wait for gradients the others never produce: a hang, a timeout, or the
"Expected to have finished reduction" error one iteration later. Even when nothing hangs (the branch uses the
same parameters), the ranks then train different functions. gradviz compares the structure of each
iteration's graphs across ranks and points at the first op where they differ, on the rank that ran the extra
line. Graphs that differ only in shapes (an uneven last batch) are not reported.

The mistake (a branch on the rank's own data):

    out = model(x)
    if x.mean() > 0:                      # true on some ranks only
        out = out * torch.sigmoid(out)
    loss = out.pow(2).mean()

The fix: decide branches from a value every rank shares, e.g. all-reduce the condition first:

    flag = (x.mean() > 0).float()
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() > 0:
        out = out * torch.sigmoid(out)

or, when the branch skips parameters on purpose, pass `find_unused_parameters=True` to DDP.
""",
    "ddp-accumulate-without-no-sync": """\
Several backward passes (micro-steps) of a DDP model ran before one optimizer step, and each of them
all-reduced the gradients.

With gradient accumulation only the sum at the optimizer step matters. DDP cannot know that: every backward
run outside `no_sync()` all-reduces all gradients, so accumulating N micro-steps costs N all-reduces where one
would do (the result is the same; the time and the network traffic are N times larger). gradviz counts, for
each optimizer step, the DDP backward passes since the previous step and how many of them synchronised.

The mistake:

    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / 4
        loss.backward()                   # all-reduces every time
        if i % 4 == 3:
            opt.step()
            opt.zero_grad()

The fix: run the first N-1 micro-steps (forward and backward) under `model.no_sync()` and let the last one
all-reduce the summed gradients:

    for i, (x, y) in enumerate(loader):
        sync = i % 4 == 3
        with contextlib.nullcontext() if sync else model.no_sync():
            loss = loss_fn(model(x), y) / 4
            loss.backward()
        if sync:
            opt.step()
            opt.zero_grad()
""",
    "ddp-grad-mismatch": """\
At an optimizer step, a parameter's gradient was not the same on every rank.

After DDP's all-reduce every rank holds the same averaged gradient, so the replicas stay identical. gradviz
takes a fingerprint of each gradient the optimizer is given (its norm and its sum) on every rank and
compares them. A difference means the gradient was never all-reduced, most often because the layer is not
part of the module wrapped in DDP, or that code after backward changed it per rank (a hook, scaling or
clipping by a rank-local value). The replicas then drift apart silently; nothing raises.

The mistake (a head kept outside the DDP module):

    model = DistributedDataParallel(backbone)
    head = nn.Linear(16, 1)               # not wrapped: its gradients stay per rank
    opt = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
    loss = head(model(x)).pow(2).mean()

The fix: wrap one module that holds every trained layer:

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone, self.head = backbone, nn.Linear(16, 1)

    model = DistributedDataParallel(Net())

or all-reduce the other gradients yourself before the step (`dist.all_reduce(p.grad); p.grad /= world_size`).
""",
}


# The codes above register themselves like a rule module's (diagnose/registry.py); then every rule module does.
for _code, (_severity, _title) in _LEGACY_CODES.items():
    registry.Code(_code, _severity, _title, EXPLANATIONS[_code])
from . import rules as _rules  # noqa: E402,F401  (registers every rule module's codes)

# code -> (default severity, one-line title), every registered code in registration order
CODES = {c.code: (c.severity, c.title) for c in registry.CODES.values()}


def explain(code):
    """The long explanation of ``code`` (what it means, a minimal example, the fix), like ``rustc --explain``."""
    entry = registry.CODES.get(code)
    if entry is None:
        known = ", ".join(registry.CODES)
        raise ValueError(f"unknown diagnostic code `{code}`; known codes: {known}")
    return f"{code} ({entry.severity}): {entry.title}\n\n{entry.explanation}"
