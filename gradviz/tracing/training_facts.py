"""Training-mode facts, the same for every engine: the document's ``training`` section (docs/trace-format.md).

Dropout and batch norm behave differently in training and evaluation mode; which mode they ran in, with grad
on or off, and whether a backward then went through them, is what tells a validation pass left in training mode
(``eval-mode-forgotten``) or training left in evaluation mode (``train-mode-not-restored``) from a correct loop.
These facts are cheap enough for every iteration, light ones included: the adapter reports each call of a
mode-dependent module (``call``: a dict lookup and a comparison when nothing changed), each backward
(``backward``: O(modules called since the last one)) and each ``train()``/``eval()`` call (``switch``).

Calls are kept as *runs*: consecutive calls of one module in the same mode, grad mode and backward status. A
run's ``backward`` is true when a backward followed its calls with no call of that module in another mode in
between (the validation pass before a training step is not what that step's backward went through). Runs and
switches share one ``order`` counter, so rules can tell what came first: a run starts at its ``order`` and ends
at ``end`` (the counter's value when it was closed; a switch after it has a higher ``order``).
"""

from .cache_writes import CacheWrites
from .dead_units import DeadUnits

RUN_LIMIT = 32  # first and last runs kept per module
SWITCH_LIMIT = 64  # first and last switches kept
OPTIMIZER_LIMIT = 32  # first and last optimizer constructions kept
SCHEDULER_LIMIT = 64  # learning-rate schedulers followed
RISE = 1e3  # a loss this many times above its lowest value has diverged (loss-diverging)
COLLAPSED = 1e-3  # a schedule whose rate stays under this fraction of its first one has stopped the training


class _Module:
    __slots__ = ("key", "path", "cls", "runs", "open", "dropped")

    def __init__(self, key, path, cls):
        self.key = key
        self.path = path
        self.cls = cls
        self.runs = []  # closed runs (dicts), first and last RUN_LIMIT
        self.open = None  # the run whose calls no backward has judged yet
        self.dropped = 0


class TrainingFacts:
    """The ``training`` section under construction. ``namer(key)``: the path of the module with that key, asked
    when the document is made (a module first seen before any path was known, as a ``train()`` before the first
    forward)."""

    def __init__(self):
        self.modules = {}  # module key -> _Module (mode-dependent modules that ran)
        self.touched = []  # keys of modules called since the last backward
        self.switches = []  # train()/eval() calls
        self.dropouts = {}  # (function, module key, location) -> functional dropout on at evaluation
        self.optimizers = []  # constructions: first and last OPTIMIZER_LIMIT
        self.optimizer_count = 0
        # the order of backward, zero_grad and step: the last backward's order, each optimizer's last zero_grad
        # (order, location) and last step order, and the zero_grads that came between a backward and a step
        self._backward_order = 0
        self._zeroed = {}  # optimizer key (None: a module's zero_grad, every optimizer's) -> (order, location, cls)
        self._stepped = {}  # optimizer key -> order of its last step
        self.cleared = {}  # (zero_grad location, step location) -> entry
        self._step_location = None  # the last step's line, kept once a clip was seen (clip-order's related line)
        self._clipping = False
        self.clips = {}  # clip location -> clip calls that came with no backward since the last step
        self.switch_count = 0
        self.carries = {}  # (module key, location) -> a recurrent state fed back after a backward, undetached
        self.leaks = {}  # (optimizer, step location) -> another optimizer's loss left gradients for its step
        self._step_counts = {}  # optimizer key -> steps taken
        self.schedulers = {}  # scheduler key -> what scheduler-misuse needs (scheduler_built, scheduler_step)
        self._awaiting_step = set()  # optimizer keys whose scheduler stepped first: their step's line is wanted
        self._per_step = {}  # backward location -> [calls since the last step, root op, all on a mean loss]
        self.unscaled = {}  # backward location -> accumulation-not-scaled's entry
        self.frozen = {}  # ``module.requires_grad = False`` location -> freeze-ineffective's entry
        self.moved = {}  # (freeze location, step location) -> frozen parameters an optimizer step still changed
        self.losses = {}  # backward location -> the course of its loss (loss-diverging)
        self.dead_units = DeadUnits()  # ReLU units zero for the whole batch, on full iterations (dead-relu)
        self.cache_writes = CacheWrites()  # views of cached tensors written in place again (dataset-mutated-inplace)
        self._last_optimizer = None  # the last optimizer built: class, line, learning rate
        self.order = 0
        self.namer = None

    @property
    def backward_order(self):
        """The order of the last backward (0: none yet)."""
        return self._backward_order

    def _next(self):
        self.order += 1
        return self.order

    # ----- facts --------------------------------------------------------------------------------------------
    def call(self, key, path, cls, training, grad, iteration, location):
        """A new run of a mode-dependent module: called by the adapter when ``(training, grad)`` differs from its
        open run (or it has none); ``location`` is the user's line calling the module's root."""
        m = self.modules.get(key)
        if m is None:
            m = self.modules[key] = _Module(key, path, cls)
        if m.path is None:
            m.path = path
        if m.open is not None:
            self._close(m, False, iteration)  # another mode before any backward: those calls were not trained on
        else:
            self.touched.append(key)
        m.open = {"training": training, "grad": grad, "backward": None, "count": 1, "order": self._next(),
                  "first": {"iteration": iteration, "location": location}, "last_iteration": iteration}
        return m.open

    def backward(self, iteration):
        """A backward started: the open runs with grad on were what it went through."""
        self._backward_order = self._next()
        for key in self.touched:
            m = self.modules.get(key)
            if m is not None and m.open is not None:
                self._close(m, m.open["grad"], iteration)
        self.touched = []

    def switch(self, key, path, cls, mode, touches, iteration, location):
        """``module.train()`` / ``module.eval()`` (``mode``: "train" or "eval") at ``location``; ``touches``: the
        keys of the mode-dependent modules it set."""
        self.switch_count += 1
        entry = {"key": key, "path": path, "class": cls, "mode": mode, "touches": list(touches),
                 "order": self._next(), "iteration": iteration, "location": location}
        if len(self.switches) >= 2 * SWITCH_LIMIT:
            del self.switches[SWITCH_LIMIT]
        self.switches.append(entry)

    def functional_dropout(self, function, key, path, cls, grad, iteration, location, caller):
        """``F.dropout`` (``function``) left at ``training=True`` in the forward of a module in eval mode (key,
        path, class) at ``location``; ``caller``: the user's line calling the outermost module."""
        entry = self.dropouts.get((function, key, location))
        if entry is not None:
            entry["count"] += 1
            entry["last_iteration"] = iteration
            return
        self.dropouts[(function, key, location)] = {
            "function": function, "key": key, "path": path, "class": cls, "grad": grad, "count": 1,
            "order": self._next(), "iteration": iteration, "last_iteration": iteration, "location": location,
            "caller": caller}

    def optimizer_built(self, cls, ref, groups, location, iteration, last_variable, lr=None):
        """An optimizer of class ``cls`` was built at ``location`` over ``groups`` (parameter variable ids per group);
        ``last_variable``: the highest variable id made before it; ``lr``: its first group's learning rate."""
        self._last_optimizer = {"class": cls, "location": location, "lr": lr}
        self.optimizer_count += 1
        if len(self.optimizers) >= 2 * OPTIMIZER_LIMIT:
            del self.optimizers[OPTIMIZER_LIMIT]
        self.optimizers.append({"class": cls, "ref": ref, "groups": groups, "location": location,
                                "iteration": iteration, "order": self._next(), "last_variable": last_variable})

    def zero_grad(self, key, cls, find_location):
        """``zero_grad()`` of optimizer ``key`` (None: a module's, which clears every optimizer's parameters it
        holds); ``find_location()`` is asked only when a backward ran since that optimizer's last step (the
        order to report)."""
        last = self._stepped.get(key, 0) if key is not None else max(self._stepped.values(), default=0)
        if self._backward_order > last:
            self._zeroed[key] = (self._next(), find_location(), cls)

    def step(self, key, cls, find_location, iteration):
        """``step()`` of optimizer ``key``: a finding when a zero_grad came after the last backward since its
        previous step."""
        previous = self._stepped.get(key, 0)
        self._stepped[key] = self._next()
        self._step_counts[key] = self._step_counts.get(key, 0) + 1
        if self._per_step:
            self._accumulated(find_location, iteration)
        if key in self._awaiting_step:  # the step a scheduler's first step() came before: its line
            self._awaiting_step.discard(key)
            location = find_location()
            for s in self.schedulers.values():
                if s["optimizer_key"] == key and s["before"] is not None and s["before"]["step_location"] is None:
                    s["before"]["step_location"] = location
        if self._clipping:
            self._step_location = find_location()
            for entry in self.clips.values():  # a clip after the first step: that step's line, seen only now
                if entry["after_step"] and entry["step_location"] is None:
                    entry["step_location"] = self._step_location
        found = [z for z in (self._zeroed.get(key), self._zeroed.get(None)) if z is not None]
        if not found or self._backward_order <= previous:
            return
        order, location, owner = max(found, key=lambda z: z[0])
        self._zeroed.pop(key, None)
        if order < self._backward_order:
            return  # a backward after the zero_grad: the usual order
        step_location = find_location()
        entry = self.cleared.get((location, step_location))
        if entry is not None:
            entry["count"] += 1
            entry["last_iteration"] = iteration
        elif len(self.cleared) < 64:
            self.cleared[(location, step_location)] = {
                "optimizer": cls, "zero_grad_of": owner, "location": location, "step_location": step_location,
                "iteration": iteration, "last_iteration": iteration, "count": 1, "order": order}

    def clip(self, function, find_location, iteration):
        """A gradient-clipping call (``function``): a finding when no backward ran since the last step (it clips
        gradients a step already applied, or cleared ones, and the next step's are unclipped)."""
        self._clipping = True
        last_step = max(self._stepped.values(), default=0)
        if self._backward_order > last_step and self._backward_order:
            return  # after a backward, before its step: where clipping belongs
        location = find_location()
        entry = self.clips.get(location)
        if entry is not None:
            entry["count"] += 1
            entry["last_iteration"] = iteration
        elif len(self.clips) < 64:
            self.clips[location] = {"function": function, "location": location, "iteration": iteration,
                                    "last_iteration": iteration, "count": 1, "after_step": last_step > 0,
                                    "step_location": self._step_location, "order": self._next()}

    def carry(self, key, path, cls, argument, iteration, made_iteration, location):
        """A recurrent module (key, path, class) was called at ``location`` with ``argument`` (the caller's name
        for it, or None), an output of its own call at ``made_iteration`` that a backward has gone through since,
        still attached to that graph: backward now reaches every earlier iteration through it."""
        entry = self.carries.get((key, location))
        if entry is not None:
            entry["count"] += 1
            entry["last_iteration"] = iteration
        elif len(self.carries) < 64:
            self.carries[(key, location)] = {
                "key": key, "path": path, "class": cls, "argument": argument, "iteration": iteration,
                "made_iteration": made_iteration, "last_iteration": iteration, "count": 1, "order": self._next(),
                "location": location}

    def grad_leak(self, receiver, receiver_location, giver, giver_location, parameters, iteration, built=(None, None)):
        """Optimizer ``receiver`` stepped at ``receiver_location`` on gradients that a backward before optimizer
        ``giver``'s step (at ``giver_location``) had written into ``parameters`` (how many of its own), with
        another backward between the two steps and no ``zero_grad`` of the receiver: one loss trained the
        other's parameters too. ``built``: the lines that built the receiver and the giver."""
        entry = self.leaks.get((receiver_location, giver_location))
        if entry is not None:
            entry["count"] += 1
            entry["last_iteration"] = iteration
        elif len(self.leaks) < 64:
            self.leaks[(receiver_location, giver_location)] = {
                "optimizer": receiver, "location": receiver_location, "from_optimizer": giver,
                "from_location": giver_location, "parameters": parameters, "iteration": iteration,
                "built": built[0], "from_built": built[1],
                "last_iteration": iteration, "count": 1, "order": self._next()}

    def backward_root(self, location, op, mean):
        """A backward at ``location`` from a root made by ``op`` (``mean``: a loss averaged over its batch):
        counted until the next optimizer step."""
        entry = self._per_step.get(location)
        if entry is not None:
            entry[0] += 1
            entry[2] = entry[2] and mean
        elif len(self._per_step) < 16:
            self._per_step[location] = [1, op, mean]

    def _accumulated(self, find_location, iteration):
        """A step after backward calls: one line's backward run k > 1 times on a mean loss that nothing
        divided (the root is the loss itself) sums k mean gradients, k times the gradient of the mean."""
        per_step, self._per_step = self._per_step, {}
        for location, (calls, op, mean) in per_step.items():
            if calls < 2 or not mean:
                continue
            entry = self.unscaled.get(location)
            if entry is not None:
                entry["steps"] += 1
                entry["calls"] = max(entry["calls"], calls)
                entry["last_iteration"] = iteration
            elif len(self.unscaled) < 16:
                self.unscaled[location] = {"location": location, "op": op, "calls": calls, "steps": 1,
                                           "iteration": iteration, "last_iteration": iteration,
                                           "step_location": find_location()}

    def loss_value(self, location, value, iteration):
        """The loss backpropagated at ``location`` was ``value``: its lowest value so far, the first time it rose
        RISE times above that, and the first non-finite value after."""
        s = self.losses.get(location)
        if s is None:
            if len(self.losses) >= 16:
                return
            s = self.losses[location] = {"min": None, "min_iteration": None, "rise": None, "nonfinite": None,
                                         "last": None, "optimizer": self._last_optimizer}
        if value != value or value in (float("inf"), float("-inf")):
            if s["nonfinite"] is None:
                s["nonfinite"] = iteration
            return
        s["last"] = value
        if s["rise"] is not None:
            return
        if s["optimizer"] is not self._last_optimizer:  # a new optimizer: a new phase (fine-tuning), a new course
            s["min"], s["optimizer"] = None, self._last_optimizer
        if s["min"] is None or value < s["min"]:
            s["min"], s["min_iteration"] = value, iteration
        elif s["min"] > 0 and value >= RISE * s["min"]:
            s["rise"] = {"iteration": iteration, "value": value, "optimizer": self._last_optimizer}

    def _diverging(self, loc):
        """loss-diverging's facts: a positive loss that rose RISE times above its lowest value and then became
        NaN/Inf or ended at least that high and no lower than where it first crossed that rise (a loss that jumps
        once, a new task trained by the same line, then falls again is training, not diverging)."""
        found = []
        for location, s in self.losses.items():
            rise = s["rise"]
            if rise is None:
                continue
            ended_high = (s["last"] or 0) >= max(RISE * s["min"], rise["value"])
            if s["nonfinite"] is None and not ended_high:
                continue
            optimizer = rise["optimizer"] or {}
            found.append({"location": loc(location), "min": s["min"], "min_iteration": s["min_iteration"],
                          "rise_iteration": rise["iteration"], "rise_value": rise["value"],
                          "nonfinite_iteration": s["nonfinite"], "last": s["last"],
                          "optimizer": optimizer.get("class"), "optimizer_location": loc(optimizer.get("location")),
                          "lr": optimizer.get("lr")})
        return found

    def freeze_ineffective(self, path, cls, location, iteration, training, total, step_location, step_iteration):
        """``module.requires_grad = False`` at ``location`` (a plain attribute) and then a step given gradients
        of ``training`` (names) among its ``total`` parameters."""
        if location in self.frozen or len(self.frozen) >= 16:
            return
        self.frozen[location] = {"module": path, "class": cls, "location": location, "iteration": iteration,
                                 "parameters": list(training[:8]), "training": len(training), "total": total,
                                 "step_location": step_location, "step_iteration": step_iteration}

    def frozen_moved(self, location, iteration, names, stale, optimizer, step_location, step_iteration):
        """Parameters (``names``) frozen at ``location`` with their gradient left set were changed by a step of
        ``optimizer`` at ``step_location``; ``stale``: some of those gradients were not zero."""
        entry = self.moved.get((location, step_location))
        if entry is not None:
            entry["steps"] += 1
            entry["last_iteration"] = step_iteration
            entry["parameters"] = sorted(set(entry["parameters"]) | {n for n in names if n})[:8]
            entry["count"] = max(entry["count"], len(names))
            return
        if len(self.moved) < 16:
            self.moved[(location, step_location)] = {
                "location": location, "iteration": iteration, "parameters": sorted({n for n in names if n})[:8],
                "count": len(names), "stale": stale, "optimizer": optimizer, "step_location": step_location,
                "step_iteration": step_iteration, "last_iteration": step_iteration, "steps": 1}

    def scheduler_built(self, key, cls, optimizer_key, lr, location, iteration):
        """A learning-rate scheduler of class ``cls`` over optimizer ``optimizer_key`` was built at ``location``;
        ``lr``: its optimizer's first group's rate once built (the schedule's first value)."""
        if key not in self.schedulers and len(self.schedulers) >= SCHEDULER_LIMIT:
            return
        self.schedulers[key] = {"class": cls, "optimizer_key": optimizer_key, "location": location,
                                "iteration": iteration, "order": self._next(), "first_lr": lr, "steps": 0,
                                "optimizer_steps": self._step_counts.get(optimizer_key, 0), "before": None,
                                "collapse": None}

    def scheduler_step(self, key, cls, optimizer_key, lr, find_location, iteration):
        """The user called ``step()`` of scheduler ``key``, which set its optimizer's first rate to ``lr``. Its
        first step before any step of its optimizer since it was built: the schedule's first value is skipped
        (``before``). A rate that falls under COLLAPSED of its first value and stays there: ``collapse``, judged
        against the optimizer's steps when the document is made."""
        s = self.schedulers.get(key)
        if s is None:  # built before the trace began (or past the limit): followed from here
            if len(self.schedulers) >= SCHEDULER_LIMIT:
                return
            s = self.schedulers[key] = {"class": cls, "optimizer_key": optimizer_key, "location": None,
                                        "iteration": iteration, "order": 0, "first_lr": lr, "steps": 0,
                                        "optimizer_steps": self._step_counts.get(optimizer_key, 0),
                                        "before": None, "collapse": None}
        s["steps"] += 1
        iteration = iteration or 1  # (a step before any op of the first iteration is part of it)
        if s["steps"] == 1 and s["order"] and self._stepped.get(optimizer_key, 0) < s["order"]:
            s["before"] = {"location": find_location(), "iteration": iteration, "step_location": None}
            self._awaiting_step.add(optimizer_key)
        first = s["first_lr"]
        if lr is None or not first or first <= 0:
            return
        if lr > first * COLLAPSED:
            s["collapse"] = None  # (back up: a warm restart, a cycle)
        elif s["collapse"] is None:
            s["collapse"] = {"location": find_location(), "iteration": iteration, "lr": lr,
                             "scheduler_steps": s["steps"],
                             "optimizer_steps": self._step_counts.get(optimizer_key, 0) - s["optimizer_steps"]}

    def _scheduler_findings(self, loc):
        """scheduler-misuse's facts: a first ``step()`` before the optimizer's, and a rate collapsed for most of
        the training by a schedule stepped about as often as its optimizer (an epoch schedule stepped per
        batch)."""
        found = []
        for s in self.schedulers.values():
            base = {"class": s["class"], "built": loc(s["location"]), "first_lr": s["first_lr"]}
            if s["before"] is not None:
                b = s["before"]
                found.append(dict(base, kind="before", location=loc(b["location"]), iteration=b["iteration"],
                                  step_location=loc(b["step_location"])))
            c = s["collapse"]
            total = self._step_counts.get(s["optimizer_key"], 0) - s["optimizer_steps"]
            if c is None or total < 8 or 2 * s["steps"] < total:
                continue  # not collapsed, too short to judge, or stepped per epoch
            after = total - c["optimizer_steps"]
            if 2 * after > total:  # most of the optimizer's steps ran at a rate that no longer moves the weights
                found.append(dict(base, kind="collapse", location=loc(c["location"]), iteration=c["iteration"],
                                  lr=c["lr"], collapsed_after=c["optimizer_steps"], optimizer_steps=total,
                                  scheduler_steps=s["steps"]))
        return found

    def _close(self, m, backward, iteration):
        run = m.open
        m.open = None
        run["backward"] = bool(backward)
        run["last_iteration"] = iteration
        run["end"] = self.order  # (not a new number: anything after this gets a higher one)
        last = m.runs[-1] if m.runs else None
        if last is not None and all(last[k] == run[k] for k in ("training", "grad", "backward")):
            last["count"] += run["count"]
            last["last_iteration"] = run["last_iteration"]
            last["end"] = run["end"]
            return
        if len(m.runs) >= 2 * RUN_LIMIT:
            del m.runs[RUN_LIMIT]
            m.dropped += 1
        m.runs.append(run)

    # ----- the document ---------------------------------------------------------------------------------------
    def section(self, loc, variable_id=lambda key: None):
        """The ``training`` section, or None when none of its facts happened; ``variable_id(key)``: the document
        id of the live variable with that key, or None."""
        schedulers = self._scheduler_findings(loc)
        diverging = self._diverging(loc)
        mutated = self.cache_writes.section(loc)
        dead = self.dead_units.section(loc)
        if not (self.modules or self.switches or self.dropouts or self.optimizers or self.cleared or self.clips
                or self.carries or self.leaks or schedulers or self.unscaled or self.frozen or self.moved or diverging
                or mutated or dead):
            return None
        name = self.namer or (lambda key: None)
        modules = []
        for m in self.modules.values():
            runs = list(m.runs)
            if m.open is not None:
                runs.append(dict(m.open, backward=False, end=self.order))  # no backward after it before the end
            modules.append({"module": m.path or name(m.key) or m.cls, "class": m.cls, "dropped_runs": m.dropped,
                            "runs": [_run(r, loc) for r in runs]})
        paths = {m.key: m.path or name(m.key) or m.cls for m in self.modules.values()}
        switches = [{"module": s["path"] or name(s["key"]) or s["class"], "class": s["class"], "mode": s["mode"],
                     "touches": sorted({paths.get(k) or name(k) or "?" for k in s["touches"]}),
                     "order": s["order"], "iteration": s["iteration"], "location": loc(s["location"])}
                    for s in self.switches]
        dropouts = [{"function": d["function"], "module": d["path"] or name(d["key"]) or d["class"],
                     "class": d["class"], "grad": d["grad"], "count": d["count"], "order": d["order"],
                     "iteration": d["iteration"], "last_iteration": d["last_iteration"],
                     "location": loc(d["location"]), "caller": loc(d["caller"])}
                    for d in list(self.dropouts.values())[:64]]
        optimizers = [{"class": o["class"], "location": loc(o["location"]), "iteration": o["iteration"],
                       "order": o["order"], "last_variable": o["last_variable"],
                       "param_groups": [list(group) for group in o["groups"]]}  # (variable ids already)
                      for o in self.optimizers]
        return {"modules": modules, "switches": switches, "switch_count": self.switch_count,
                "functional_dropout": dropouts, "optimizers": optimizers, "optimizer_count": self.optimizer_count,
                "zero_grad_before_step": [dict(c, location=loc(c["location"]), step_location=loc(c["step_location"]))
                                          for c in self.cleared.values()],
                "clip_order": [dict(c, location=loc(c["location"]), step_location=loc(c["step_location"]))
                               for c in self.clips.values()],
                "hidden_state_carries": [{"module": c["path"] or name(c["key"]) or c["class"], "class": c["class"],
                                          **{k: c[k] for k in ("argument", "iteration", "made_iteration",
                                                               "last_iteration", "count", "order")},
                                          "location": loc(c["location"])} for c in self.carries.values()],
                "grad_leaks": [dict(c, location=loc(c["location"]), from_location=loc(c["from_location"]),
                                    built=loc(c["built"]), from_built=loc(c["from_built"]))
                               for c in self.leaks.values()],
                "scheduler_misuse": schedulers,
                "accumulation_not_scaled": [dict(u, location=loc(u["location"]), step_location=loc(u["step_location"]))
                                            for u in self.unscaled.values() if u["steps"] >= 2],
                "freeze_ineffective": [dict(f, location=loc(f["location"]), step_location=loc(f["step_location"]))
                                       for f in self.frozen.values()],
                "frozen_still_changing": [dict(f, location=loc(f["location"]), step_location=loc(f["step_location"]))
                                          for f in self.moved.values()],
                "loss_diverging": diverging, "dataset_mutated_inplace": mutated,
                "dead_relu": dead}


def _run(run, loc):
    first = run["first"]
    return {"training": run["training"], "grad": run["grad"], "backward": bool(run["backward"]),
            "count": run["count"], "order": run["order"], "end": run["end"],
            "first": {"iteration": first["iteration"], "location": loc(first["location"])},
            "last_iteration": run["last_iteration"]}
