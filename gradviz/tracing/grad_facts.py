"""``GradFacts``: backward calls, the gradients they made, ``.grad`` reads and writes, hooks, optimizers, NaN/Inf.

A ``TraceBuilder`` collaborator (builder.py), owner of the backward records (``backward_begin`` … ``backward_end``),
of the first NaN/Inf and the records it pins, and of the gradient facts that feed ``GradLedger`` (grad_ledger.py:
resets, accumulations, steps). The backward call in progress, its ``visited`` list and ``grad_norms`` dict and the
last ``.grad`` read are per thread: they stay on the builder, which swaps them when another thread reports
(``switch_thread``), and are read from it here.
"""

from ..document.vocabulary import error_code


class GradFacts:
    """Backward and gradients, from the adapters' facts (see builder.py's module docstring for their conventions)."""

    def __init__(self, trace):
        self.trace = trace
        self.nodes = trace.nodes
        self.live_variables = trace.live_variables
        self.live_nodes = trace.live_nodes
        self.groups = trace.groups
        self.versions = trace.versions
        self.silent_pending = trace.versions.silent_pending
        self.ledger_pending = trace.grad_ledger.pending  # its list of this backward's accumulations
        self.first_nonfinite = None
        # beyond the first NaN/Inf (often a harmless -inf of an attention mask in iteration 0), the first
        # non-finite loss and the first non-finite backward gradient are pinned too: a real NaN in a middle
        # iteration keeps its records
        self._nonfinite_loss_pinned = self._nonfinite_grad_pinned = False

    def backward_begin(self, roots, root_nodes, location, *, retain_graph, kind="backward", gradient_none=False):
        """``backward`` (``kind="backward"``) or ``autograd.grad`` (``"grad"``) starts from the variables
        ``roots`` (keys, reported first) whose nodes are ``root_nodes`` (keys or None); ``retain_graph`` as
        given (None: not given); ``gradient_none`` when a root's explicit gradient was None (then a ``None``
        ``.grad`` read on the same line is what it came from)."""
        live = self.live_variables
        nodes = self.live_nodes
        groups = self.groups
        bid = len(self.trace.backwards) + groups.dropped["backwards"]
        gradient_from = None
        read = self.trace.last_grad_read
        if gradient_none and read is not None and read["location"] == location and read["was_none"]:
            gradient_from = read["id"]
        b = {"id": bid, "seq": next(self.trace.seq), "iteration": groups.iteration,
             "roots": [live[r].id for r in roots],
             "root_nodes": [None if n is None else nodes[n].id for n in root_nodes],
             "retain_graph": bool(retain_graph), "started": retain_graph is not None, "kind": kind,
             "location": location, "visited": [], "grad_norms": {}, "leaf_grad_norms": {},
             "gradient_from": gradient_from, "error": None, "freed_nodes": 0, "thread": self.trace.thread()}
        self.trace.backward = b
        self.trace.visited = b["visited"]  # appended to by every backward step
        self.trace.grad_norms = b["grad_norms"]
        self.trace.backwards[bid] = b
        groups.note_backward(b)
        if not self._nonfinite_loss_pinned:
            for n in root_nodes:
                rec = None if n is None else nodes[n]
                if rec is not None and rec.nonfinite is not None:  # a NaN/Inf loss
                    self._nonfinite_loss_pinned = True
                    groups.pin_backward(b)
                    break

    def backward_step(self, node, norm, nonfinite=False):
        """Backward ran node ``node`` (reported first); ``norm`` is the L2 norm of the gradient it received
        (a float, NaN/Inf allowed; None when the adapter does not measure it), ``nonfinite`` whether that
        gradient holds NaN/Inf."""
        rec = self.live_nodes[node]
        nid = rec.id
        trace = self.trace
        trace.visited.append(nid)
        pending = self.silent_pending
        if pending and nid in pending:
            self.versions.silent_used(nid)
        if norm is not None:
            trace.grad_norms[nid] = norm
        if nonfinite:
            self.nonfinite(rec, "backward")

    def accumulate(self, variable, norm, nonfinite=False, grad=None):
        """Backward added a gradient of L2 norm ``norm`` (None: not measured) into the leaf ``variable``'s
        ``.grad``; ``grad`` is the key of the ``.grad`` variable when backward just made it (reported with
        ``variable(..., origin="grad")``)."""
        trace = self.trace
        b = trace.backward
        rec = self.live_variables[variable]
        fresh = False
        if grad is not None:
            made = self.live_variables.get(grad)
            if made is not None and made.origin == "grad":
                made.source = rec.id
                fresh = True
        if b is None:
            return
        self.ledger_pending.append((rec.id, fresh))  # GradLedger.accumulate, inline: once per leaf per backward
        if norm is not None:
            b["leaf_grad_norms"][rec.id] = norm
        acc = rec.accumulator
        if acc is not None:
            if nonfinite:
                acc_rec = self.nodes.get(acc)
                if acc_rec is not None:
                    self.nonfinite(acc_rec, "backward")
            trace.visited.append(acc)
            if norm is not None:
                trace.grad_norms[acc] = norm

    def backward_end(self, error=None):
        """Backward finished. ``error`` describes what it raised, or is None: ``{"type", "message"}`` plus, when
        known, ``"node"`` (a node key), ``"variable"`` (a variable key), ``"index"``, ``"expected"``,
        ``"current"``; ``"code"`` (the diagnostic code that explains it) is found from the type's name or the message
        (``document.vocabulary.error_code``: PyTorch's wording is recognised too) unless given."""
        b = self.trace.backward
        if b is None:
            return
        if error is not None:
            kind = error.get("type")
            info = {"type": kind, "message": error.get("message"), "code": error.get("code") or error_code(error)}
            for name, value in error.items():
                if name in info:
                    continue
                if name == "node":
                    rec = self.live_nodes.get(value)
                    value = None if rec is None else rec.id
                elif name == "variable":
                    rec = self.live_variables.get(value)
                    value = None if rec is None else rec.id
                info[name] = value
            b["error"] = info
            self.groups.pin_backward(b)
        self.trace.grad_ledger.backward_end(b, error is None)
        self.groups.backward_done(b)
        self.trace.backward = None

    def nonfinite(self, rec, phase):
        if rec.nonfinite is None:
            rec.nonfinite = phase
        if self.first_nonfinite is None:
            self.first_nonfinite = {"node": rec.id, "phase": phase, "iteration": self.groups.iteration,
                                    "backward": None if self.trace.backward is None else self.trace.backward["id"]}
            self.groups.first_nonfinite = self.first_nonfinite  # (its iteration moves when iterations fold)
            self.groups.pin_node(rec)
        if phase == "backward" and not self._nonfinite_grad_pinned:
            self._nonfinite_grad_pinned = True
            self.groups.pin_node(rec)
            if self.trace.backward is not None:
                self.groups.pin_backward(self.trace.backward)

    def nonfinite_data(self, name, location, op=None):
        """The first NaN/Inf forward value came in with the data: bound to ``name`` at ``location`` (the line that
        loaded or made it, ``data_origin``), not made by an op of the graph; ``op``: the node that received it."""
        first = self.first_nonfinite
        if first is not None and first["phase"] == "forward" and "data" not in first:
            first["data"], first["data_location"], first["data_op"] = name, location, op

    def nonfinite_output(self, node):
        """Node ``node``'s output holds NaN/Inf, found after the op (an adapter that checks outputs in batches,
        to avoid a host sync per op, reports it this way instead of through ``op(nonfinite=True)``)."""
        rec = self.live_nodes.get(node)
        if rec is not None:
            self.nonfinite(rec, "forward")

    def hook(self, variable, event, location, *, hook_name=None, hook_location=None, retain_grad=False):
        """A tensor hook was registered (``event="register"``), called (``"call"``) or removed (``"remove"``);
        ``retain_grad()`` counts as one with ``retain_grad=True``. ``hook_location`` is ``{"file", "line"}``."""
        fields = {"variable": None if variable is None else self.live_variables[variable].id, "event": event,
                  "retain_grad": retain_grad, "hook_name": hook_name, "hook_location": hook_location}
        if event == "call" and self.trace.backward is not None:
            fields["backward"] = self.trace.backward["id"]
        self.trace.record_event("hook", location, **fields)

    def grad_read(self, variable, location, *, was_none, is_leaf, retains_grad, requires_grad, name=None):
        """User code read ``.grad`` of ``variable`` (not the engine's or gradviz's own reads): ``was_none`` is
        what it got; ``name`` what the user's frame calls the variable, if the record has no name yet."""
        rec = self.live_variables[variable]
        if rec.name is None and name is not None:
            rec.name = name
        event = self.trace.record_event("grad_read", location, variable=rec.id, was_none=was_none, is_leaf=is_leaf,
                            retains_grad=retains_grad, requires_grad=requires_grad)
        self.trace.last_grad_read = event
        if was_none and not is_leaf:
            self.groups.pin_event(event)

    def grad_write(self, variable, location, *, is_none):
        """User code assigned ``.grad`` of ``variable``."""
        vid = self.live_variables[variable].id
        self.trace.iterations.release_hold()
        self.trace.record_event("grad_write", location, variable=vid, is_none=is_none)
        self.trace.grad_ledger.reset(vid)

    def optimizer(self, event, location, optimizer, parameters):
        """An optimizer (class name ``optimizer``) ran ``"step"`` or ``"zero_grad"`` over ``parameters``
        (variable keys, reported first); a module's ``zero_grad()`` reports with its class name. A step ends
        the iteration."""
        groups = self.groups
        if event == "zero_grad":
            self.trace.iterations.release_hold()
            groups.zero_grad()
        live = self.live_variables
        eid = next(self.trace.event_ids)  # _event, inline: twice per training step
        record = {"id": eid, "seq": next(self.trace.seq), "kind": "optimizer", "location": location,
                  "iteration": groups.iteration, "event": event, "optimizer": optimizer,
                  "parameters": [live[k].id for k in parameters]}
        self.trace.events[eid] = record
        groups.note_event(record)
        ledger = self.trace.grad_ledger
        if event == "zero_grad":
            for p in record["parameters"]:
                ledger.reset(p)
        elif event == "step":
            if groups.hold:
                groups.first_step()
            summed = ledger.step(record, record["parameters"])
            if summed:  # a gradient summed across steps: kept whatever the window (see grad_ledger)
                record["summed_grads"] = summed
                groups.pin_event(record)
            groups.boundary()
            # one numbering: once a step was seen, iterations end at steps, light or full, and --full counts
            # as the light default does (a loop of 240 backward calls and 60 steps: 60 iterations, not 240)
            groups.step_bounded = True

