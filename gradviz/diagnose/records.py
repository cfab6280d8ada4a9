"""Building diagnostic records: deduplication by code and location, severities, hints, links, final order."""

from ..document.index import loc_key
from ..document.vocabulary import SEVERITIES
from .registry import CODES


class Collector:
    """Gathers diagnostics from the rules; ``finish()`` returns them as documented records, in order."""

    def __init__(self):
        self._records = {}  # key -> record under construction
        self._links = []  # (key, key)

    def add(self, code, message, hint, location, *, severity=None, related=(), nodes=(), variables=(),
            details=None, order=(2, 0)):
        """Add one finding (or count it again if this code was already reported at this line); returns its key.

        ``order`` breaks ties between findings on the same line (e.g. an event id), so the final order
        follows what happened first."""
        default = CODES[code].severity
        severity = severity or default
        if severity not in SEVERITIES:
            raise ValueError(f"unknown severity {severity!r}")
        key = (code, *loc_key(location))
        found = self._records.get(key)
        if found is not None:
            found["count"] += 1
            _merge_ids(found["nodes"], nodes)
            _merge_ids(found["variables"], variables)
            return key
        self._records[key] = {
            "code": code,
            "severity": severity,
            "message": message,
            "hint": f"{hint} {hint_suffix(code)}",
            "location": location,
            "related": [r for r in related if r and r.get("location")],
            "nodes": _merge_ids([], nodes),
            "variables": _merge_ids([], variables),
            "links": [],
            "count": 1,
            "details": details or {},
            "_order": order,
        }
        return key

    def link(self, a, b):
        """Link two findings both ways (e.g. a nonscalar backward and the None read it was given)."""
        if a in self._records and b in self._records and a != b:
            self._links.append((a, b))

    def has(self, key):
        return key in self._records

    def finish(self):
        ordered = sorted(self._records.items(),
                         key=lambda kv: (*loc_key(kv[1]["location"]), kv[1]["_order"],
                                         SEVERITIES.index(kv[1]["severity"]), kv[1]["code"]))
        ids = {key: i for i, (key, _) in enumerate(ordered)}
        for a, b in self._links:
            _merge_ids(self._records[a]["links"], [ids[b]])
            _merge_ids(self._records[b]["links"], [ids[a]])
        result = []
        for key, rec in ordered:
            rec = dict(rec)
            del rec["_order"]
            rec["links"] = sorted(rec["links"])
            result.append({"id": ids[key], **rec})
        return result


def hint_suffix(code):
    """Every hint ends with the command that explains the code at length."""
    return f"(gradviz explain {code})"


_MAX_IDS = 200  # a diagnostic seen in every iteration of a long loop must not list every node it touched


def _merge_ids(target, new):
    have = set(target)
    for i in new:
        if i is not None and i not in have and len(target) < _MAX_IDS:
            target.append(i)
            have.add(i)
    return target


def related(role, location):
    return {"role": role, "location": location} if location else None
