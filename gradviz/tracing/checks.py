"""The budget and the records of the backward checks (wrong-backward): which custom Functions were checked,
with what result, and what was not checked and why. Engine-neutral: adapters run the probes
(``backward_check.py``) and report here through the builder."""

BUDGET = 64  # checks per run at most; each costs a forward/backward of the Function per input


class BackwardChecks:
    def __init__(self, enabled=True, budget=None):
        self.enabled = enabled
        self.budget = BUDGET if budget is None else budget
        self.checks = []  # documented records, in the order they ran
        self._seen = set()  # (function key, signature) already checked
        self.repeats = 0  # applications with a signature already checked (not checked again)
        self.over_budget = 0  # first applications left unchecked because the budget was spent

    def wanted(self, function_key, signature):
        """Whether to check this application: the first one per Function and input signature, within budget."""
        if not self.enabled:
            return False
        key = (function_key, signature)
        if key in self._seen:
            self.repeats += 1
            return False
        self._seen.add(key)
        if len(self.checks) >= self.budget:
            self.over_budget += 1
            return False
        return True

    def record(self, node_id, class_name, signature, result, location, backward_location):
        """One check's outcome (a ``backward_check.CheckResult``) for the node it was applied as."""
        m = result.mismatch
        self.checks.append({
            "id": len(self.checks), "class_name": class_name, "node": node_id, "location": location,
            "backward_location": backward_location, "signature": [str(p) for p in signature],
            "status": result.status, "reason": result.reason, "dtype": result.dtype,
            "checked_inputs": list(result.checked_inputs),
            "input": None if m is None else m.index, "input_name": None if m is None else m.name,
            "relative_error": None if m is None else m.relative_error,
            "backward_value": None if m is None else m.backward_value,
            "numerical_value": None if m is None else m.numerical_value,
        })

    def section(self, location_dict):
        """The document's ``backward_checks`` section (locations through ``location_dict``)."""
        return {"enabled": self.enabled, "budget": self.budget, "repeats": self.repeats,
                "over_budget": self.over_budget,
                "checks": [dict(c, location=location_dict(c["location"]),
                                backward_location=location_dict(c["backward_location"])) for c in self.checks]}
