"""Where diagnostics register themselves: a code's catalogue entry and the rule that reports it, side by side.

A rule module declares its codes with ``Code(...)`` (code, default severity, one-line title, the long explanation
``gradviz explain`` prints) and its function with ``@rule(...)``; importing the module registers both. The
package ``gradviz.diagnose.rules`` imports every module it holds, so a new diagnostic is one file there (plus
its tests); ``diagnose()``, ``gradviz explain`` and docs/diagnostics.md read only this registry.

A rule is ``function(ctx, out)``: ``ctx`` is the run's ``RuleContext`` (the document's index, and what earlier
rules left for later ones), ``out`` the ``Collector`` its findings go to. Rules run in ``order`` (ties by
registration); a job-level rule (``scope="job"``) runs once over every rank's document instead.

The catalogue (``catalogue()``: ``gradviz explain``'s list, the docs page) lists the codes in the order of the
first rule that reports them, across both scopes, so a family of rules stays together there as it runs together.
"""

from dataclasses import dataclass, field

CODES = {}  # code -> Code, in registration order
RULES = []  # Rule, in registration order (``rules()`` sorts them by ``order``)


@dataclass(frozen=True)
class Code:
    """One diagnostic code's catalogue entry. Codes are stable kebab-case names: never rename one."""
    code: str
    severity: str
    title: str
    explanation: str

    def __post_init__(self):
        from ..document.vocabulary import SEVERITIES

        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.code}: unknown severity {self.severity!r}")
        have = CODES.get(self.code)
        if have is not None and have != self:
            raise ValueError(f"diagnostic code {self.code!r} registered twice")
        CODES.setdefault(self.code, self)  # (the same entry again, from a module imported anew, changes nothing)


@dataclass(frozen=True)
class Rule:
    function: object
    codes: tuple  # the Code entries it may report
    order: int
    scope: str  # "process": one document; "job": every rank's document at once

    @property
    def name(self):
        return self.function.__name__


def rule(*codes, order=100, scope="process"):
    """Register the decorated ``function(ctx, out)`` as the rule reporting ``codes`` (``Code`` entries)."""
    for c in codes:
        if not isinstance(c, Code):
            raise TypeError(f"rule codes are Code entries, not {c!r}")
    if scope not in ("process", "job"):
        raise ValueError(f"unknown rule scope {scope!r}")

    def register(function):
        RULES.append(Rule(function, tuple(codes), order, scope))
        return function

    return register


@dataclass
class RuleContext:
    """What one diagnose run's rules share: the document, its index, and facts earlier rules hand to later ones
    (``shared``, keyed by the producing rule's name). A job rule gets no single document (``doc`` and ``index``
    are None) but every rank's, in rank order: ``docs``, with their ``ranks``."""
    doc: dict
    index: object
    shared: dict = field(default_factory=dict)
    docs: tuple = ()
    ranks: tuple = ()


def rules(scope="process"):
    """The registered rules of ``scope``, in run order."""
    _load()
    return sorted((r for r in RULES if r.scope == scope), key=lambda r: r.order)


def catalogue():
    """Every registered ``Code``, in catalogue order: by the first rule (in ``order``, then registration, either
    scope) that reports it, a rule's codes in the order it lists them; codes no rule reports come last."""
    _load()
    position = {}
    for r in sorted(RULES, key=lambda r: r.order):  # (stable: ties stay in registration order)
        for c in r.codes:
            position.setdefault(c.code, len(position))
    return sorted(CODES.values(), key=lambda c: position.get(c.code, len(position)))


def _load():
    from . import rules as package

    package.load()
