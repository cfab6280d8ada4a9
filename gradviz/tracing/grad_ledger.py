"""Where each leaf's ``.grad`` stands between optimizer steps, followed over the whole trace.

The window keeps full records of a few iterations only, and a loop may need more than it keeps to show a
gradient summed across optimizer steps (a GAN step is three tracer iterations: two discriminator steps are never
in one kept stretch with the default window). So the tracer follows every reset (``zero_grad``, ``.grad = ...``,
``p.grad.zero_()``), backward accumulation and step itself, a few small entries per leaf, and writes on a step
event the gradients it uses that a backward added to after an earlier step of the same leaf with no reset in
between (``summed_grads``): the grad-accumulation rule reads it where the records in between were dropped.
"""

# A leaf's state: absent (fresh: nothing accumulated since a reset), "accumulated", "stepped" (accumulated, then a
# step used it) or "carried" (a backward added to a gradient a step had already used).


class GradLedger:
    __slots__ = ("_state", "pending")

    def __init__(self):
        # leaf id -> [state, (id, location) of the backward that carried it, (id, location, optimizer) of the step
        # that used it last]: small tuples, not the records (a backward's holds every node it visited)
        self._state = {}
        # this backward's accumulations: (leaf id, whether it made the .grad anew); one list for the whole trace
        # (emptied at each backward's end): TraceBuilder.accumulate appends to it itself
        self.pending = []

    def reset(self, leaf):
        self._state.pop(leaf, None)

    def backward_end(self, backward, ok):
        """The backward ``backward`` (its record) finished; a failed one is not counted."""
        pending = self.pending
        if not ok:
            pending.clear()
            return
        state = self._state
        for leaf, fresh in pending:
            entry = state.get(leaf)
            if fresh or entry is None:
                state[leaf] = ["accumulated", None, None if entry is None else entry[2]]
            elif entry[0] == "stepped":
                entry[0] = "carried"
                entry[1] = (backward["id"], backward["location"])
            elif entry[0] != "carried":
                entry[0] = "accumulated"
        pending.clear()

    def step(self, event, leaves):
        """An optimizer step (its event) over ``leaves``: the ``summed_grads`` entries for those it sums across
        steps, grouped by the backward that carried them and the step before."""
        state = self._state
        groups = {}
        for leaf in leaves:
            entry = state.get(leaf)
            if entry is None:
                continue
            if entry[0] == "carried":
                (bid, bloc), (sid, sloc, optimizer) = entry[1], entry[2]
                group = groups.get((bid, sid))
                if group is None:
                    group = groups[(bid, sid)] = {
                        "parameters": [], "backward": bid, "backward_location": bloc, "previous_step": sid,
                        "previous_step_location": sloc, "previous_optimizer": optimizer}
                group["parameters"].append(leaf)
            if entry[0] in ("accumulated", "carried"):
                entry[0] = "stepped"
                entry[2] = (event["id"], event["location"], event["optimizer"])
        return list(groups.values())
