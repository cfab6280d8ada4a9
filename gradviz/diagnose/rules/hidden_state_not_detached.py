"""hidden-state-not-detached: a recurrent module's state fed back into it after a backward, still attached to
the graph it came from. Read from the ``training`` section's ``hidden_state_carries``: the adapters compare each
recurrent call's state arguments with its previous call's outputs, on every iteration, light ones included."""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule
from ..training_causes import carries, detach_line

HIDDEN_STATE_NOT_DETACHED = Code(
    "hidden-state-not-detached", "warning",
    "an RNN's hidden state carried across iterations without detach(): backward reaches back through every batch",
    explanation="""\
A recurrent model's hidden state is passed from one batch to the next (truncated backpropagation through
time, as in a language model reading one long text), but it is never detached: the state given to batch k
is still the output of batch k-1's graph. The next backward then goes back through batch k-1, k-2, … to the
first batch. Without `retain_graph=True` the second backward raises "Trying to backward through the graph a
second time" (graph-freed); with it, the optimizer's in-place update of weights that the old graphs saved
raises a version error (stale-version), or, when nothing saved is updated, each step gets slower and holds
more memory than the one before, and the gradients mix every batch ever seen. The error, when there is one,
names neither the hidden state nor the fix.

gradviz compares each call of a recurrent module (RNN, LSTM, GRU and their cells) with the outputs of its
previous call: a state argument that is one of them, made before a backward and still attached, is reported
at the line that passes it, with the caller's name for it.

The mistake:

    hidden = model.init_hidden(batch_size)
    for x, y in batches:
        output, hidden = model(x, hidden)    # hidden still holds the last batch's graph
        loss = criterion(output, y)
        loss.backward()

The fix: detach the state at the batch boundary (for an LSTM, both tensors of the pair):

    for x, y in batches:
        hidden = hidden.detach()             # or tuple(h.detach() for h in hidden)
        output, hidden = model(x, hidden)

Not reported: a state passed from step to step inside one iteration (a cell unrolled in a loop), a state
carried with no backward in between (one backward over the whole sequence), and a state detached or made
anew at each batch.
""")


@rule(HIDDEN_STATE_NOT_DETACHED, order=21)
def hidden_state_not_detached(ctx, out):
    index = ctx.index
    for c in carries(index):
        loc = c.get("location")
        name = c.get("argument")
        what = f"`{name}`" if name else "the hidden state"
        later = next((b for b in index.backwards if (b.get("iteration") or 0) >= (c.get("iteration") or 0)), None)
        message = (f"{what} is passed to `{c['module']}` ({c['class']}) at {index.where(loc)} still attached to the "
                   f"graph of iteration {c['made_iteration']}, which a backward already went through: the next "
                   "backward goes back through every earlier batch (backpropagation through the whole history; "
                   "without retain_graph=True it raises, with it each step costs more than the last). From "
                   f"iteration {c['iteration']}, {c['count']} call{'s' if c['count'] != 1 else ''}.")
        fix = detach_line(c)
        hint = (f"Write `{fix}` before `{code_text(loc) or 'the call'}` at {index.where(loc)}: each batch's "
                "backward then stops at the batch boundary.")
        out.add(HIDDEN_STATE_NOT_DETACHED.code, message, hint, loc,
                related=[related("backward that goes back through it", later and later.get("location"))],
                details={"module": c["module"], "class": c["class"], "argument": name, "fix": fix,
                         "iteration": c["iteration"], "made_iteration": c["made_iteration"], "calls": c["count"]},
                order=(1, c.get("order") or 0))
