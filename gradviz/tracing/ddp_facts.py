"""The document's ``ddp`` section: what one rank's DistributedDataParallel did, kept as plain data.

The torch adapter's DDP watcher (``adapters/torch/ddp.py``) reports facts here through ``TraceBuilder.ddp``; the
job-level rules (``diagnose/ddp_rules.py``) compare the sections of every rank. Per-forward and per-step records
are kept for the first and last ``KEEP`` of each, so a long run stays bounded (and, among the steps, the first and
last ``KEEP`` of those whose gradients were fingerprinted, which the ranks' gradients are compared at);
``unused`` and ``accumulation`` summarise every forward and every step, whatever was kept.
"""

KEEP = 32


class _Ends:
    """The first and the last ``KEEP`` records of a sequence, and how many there were."""

    def __init__(self):
        self.first = []
        self.last = []
        self.count = 0

    def add(self, record):
        self.count += 1
        if len(self.first) < KEEP:
            self.first.append(record)
            return
        self.last.append(record)
        if len(self.last) > KEEP:
            del self.last[0]

    def records(self):
        return self.first + self.last


class DdpFacts:
    def __init__(self):
        self.process = None
        self.modules = {}  # path -> module record
        self.forwards = _Ends()
        self.backward_count = 0  # forwards whose backward reached some parameter
        self.steps = _Ends()
        self.sampled_steps = _Ends()  # the steps with gradient fingerprints (full iterations)
        self.unused = {}  # (module path, parameter) -> {"count", "first_forward", "iteration", "location", "skipped"}
        self.accumulation = {"steps": 0, "unsynchronised_micro_steps": 0, "extra_syncs": 0, "first": None}
        self.errors = []

    def add(self, kind, fields, iteration):
        record = dict(fields, iteration=iteration) if kind in ("forward", "step", "error") else dict(fields)
        if kind == "process":
            self.process = record
        elif kind == "module":
            record.setdefault("call_sites", {})
            self.modules[record["path"]] = record
        elif kind == "call_site":  # where a wrapped submodule holding parameters was first called
            module = self.modules.get(record["module"])
            if module is not None:
                module["call_sites"].setdefault(record["submodule"], record["location"])
        elif kind == "forward":
            self.forwards.add(record)
            self.backward_count += bool(record.get("backward"))
            self._note_unused(record)
        elif kind == "step":
            self.steps.add(record)
            if record.get("gradients"):
                self.sampled_steps.add(record)
            self._note_accumulation(record)
        elif kind == "error" and len(self.errors) < 20:
            self.errors.append(record)

    def _note_unused(self, record):
        skipped = set(record.get("skipped", ()))
        owners = self.modules.get(record["module"], {}).get("owners", {})
        for name in record.get("unused", ()):
            entry = self.unused.get((record["module"], name))
            if entry is None:
                self.unused[(record["module"], name)] = {
                    "module": record["module"], "parameter": name, "count": 1, "first_forward": record["forward"],
                    "iteration": record["iteration"], "location": record["location"],
                    "owner_called": owners.get(name) not in skipped}
            else:
                entry["count"] += 1

    def _note_accumulation(self, record):
        acc = self.accumulation
        acc["steps"] += 1
        for micro in record.get("micro", ()):
            acc["unsynchronised_micro_steps"] += micro["backwards"] - micro["synced"]
            extra = max(micro["synced"] - 1, 0)
            if extra:
                acc["extra_syncs"] += extra
                if acc["first"] is None:
                    acc["first"] = dict(micro, step=record["step"], iteration=record["iteration"],
                                        step_location=record["location"])

    def _kept_steps(self):
        kept = {r["step"]: r for r in self.steps.records()}
        kept.update((r["step"], r) for r in self.sampled_steps.records())
        return [kept[step] for step in sorted(kept)]

    def section(self, loc):
        """The ``ddp`` section (``loc`` turns a Location into its dict), or None when no DDP module was seen."""
        if not self.modules and self.process is None:
            return None

        def located(record, *keys):
            out = dict(record)
            for key in keys:
                if key in out:
                    out[key] = loc(out[key])
            return out

        modules = []
        for m in self.modules.values():
            m = dict(m)
            m["call_sites"] = {path: loc(where) for path, where in m["call_sites"].items()}
            modules.append(m)
        acc = dict(self.accumulation)
        if acc["first"] is not None:
            acc["first"] = located(acc["first"], "location", "step_location")
        return {
            "process": self.process and dict(self.process),
            "modules": modules,
            "forwards": [located(r, "location") for r in self.forwards.records()],
            "forward_count": self.forwards.count,
            "backward_count": self.backward_count,
            "steps": [dict(located(r, "location", "reduce_location"),
                           micro=[located(m, "location") for m in r.get("micro", ())])
                      for r in self._kept_steps()],
            "step_count": self.steps.count,
            "unused": [located(e, "location") for e in self.unused.values()],
            "accumulation": acc,
            "errors": [located(e, "location") for e in self.errors],
        }
