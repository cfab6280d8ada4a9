"""param-not-in-optimizer: a parameter that backward gives gradients to, held by no optimizer, because it was
made after the optimizer was built (a head replaced, a layer added) or kept where ``model.parameters()`` never
looks (layers in a Python list). Read from the backward calls' leaf gradients, the optimizers' constructions
(``training.optimizers``) and their steps."""

from ...document.index import code_text
from ..records import related
from ..registry import Code, rule

PARAM_NOT_IN_OPTIMIZER = Code(
    "param-not-in-optimizer", "warning", "a parameter gets gradients but no optimizer holds it: it never trains",
    explanation="""\
Backward computes gradients for a parameter that no optimizer holds, so `optimizer.step()` never changes it: the
layer stays at its random initialisation while the rest of the model trains around it. Nothing raises. The two
usual causes:

- the parameter was made after the optimizer was built (a head replaced for fine-tuning, a layer added): the
  optimizer holds the old parameters, which no longer take part;
- the layers are kept in a plain Python list (or dict), which `nn.Module` does not register: `model.parameters()`
  never yields them, though `forward` uses them.

gradviz records every optimizer's construction (its line and parameter groups), every step's parameters and the
gradients each backward wrote, and reports each such parameter at the line that made it, with the optimizer's
line as related. A parameter left out of the optimizer on purpose (a backbone frozen by omission, made before
the optimizer and registered in the model) is not reported, nor one whose gradient the script reads or updates
by hand.

The mistakes:

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.fc = nn.Linear(512, 10)            # made after the optimizer: never trained

    self.blocks = [nn.Linear(64, 64) for _ in range(4)]   # a list: not registered

The fixes: build the optimizer once the model is complete (or `optimizer.add_param_group({"params":
model.fc.parameters()})`), and hold layers in `nn.ModuleList` / `nn.ModuleDict`:

    model.fc = nn.Linear(512, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    self.blocks = nn.ModuleList([nn.Linear(64, 64) for _ in range(4)])
""")

_MANUAL = ("inplace", "grad_read", "grad_write")


@rule(PARAM_NOT_IN_OPTIMIZER)
def param_not_in_optimizer(ctx, out):
    index = ctx.index
    training = ctx.doc.get("training") or {}
    built = training.get("optimizers") or []
    steps = [e for e in index.events_of("optimizer") if e.get("event") == "step"]
    if not built and not steps:
        return  # no optimizer seen: updates by hand, or none
    held = {vid for o in built for group in o.get("param_groups") or () for vid in group}
    held.update(vid for e in steps for vid in e.get("parameters") or ())
    first_grad = {}  # variable id -> the first backward that wrote its gradient
    for b in index.backwards:
        if b.get("error"):
            continue
        for key in b.get("leaf_grad_norms") or {}:
            first_grad.setdefault(int(key), b)
    handled = {e.get("variable") for e in index.events  # its gradient read, or it changed, after backward wrote it
               if e.get("kind") in _MANUAL and e.get("variable") in first_grad
               and e.get("seq", 0) > first_grad[e["variable"]].get("seq", 0) and "." not in (e.get("op") or "")}
    findings = {}  # creation line -> [cause, optimizer, [variable ids], backward]
    for vid in sorted(set(first_grad) - held - handled):
        v = index.variables.get(vid)
        if v is None or not v.get("is_parameter") or v.get("requires_grad_final") is False:
            continue
        later = [o for o in built if vid > o.get("last_variable", -1)]
        if built and len(later) == len(built):
            cause, optimizer = "after", built[-1]
        elif not _registered(index, v):
            cause, optimizer = "unregistered", (built[-1] if built else None)
        else:
            continue  # made before the optimizer and part of the model: left out on purpose
        loc = v.get("location")
        key = ((loc or {}).get("file"), (loc or {}).get("line"), cause)
        findings.setdefault(key, [cause, optimizer, [], first_grad[vid], loc])[2].append(vid)
    for cause, optimizer, vids, backward, loc in findings.values():
        _report(index, out, cause, optimizer, vids, backward, loc)


def _registered(index, v):
    """A parameter reached by a module's ``named_parameters()`` (its name is a known module's path + a name)."""
    name = v.get("name") or ""
    return "." in name and name.rsplit(".", 1)[0] in index.modules


def _report(index, out, cause, optimizer, vids, backward, loc):
    labels = ", ".join(index.var_label(v) for v in vids[:6]) + (f" and {len(vids) - 6} more" if len(vids) > 6 else "")
    text = code_text(loc)
    made = f"made at {index.where(loc)}" + (f" (`{text}`)" if text else "")
    opt_where = index.where(optimizer.get("location")) if optimizer else None
    opt_text = code_text(optimizer.get("location")) if optimizer else ""
    if cause == "after":
        why = (f"after the optimizer was built at {opt_where}: it holds the parameters the model had then, and "
               "these are not among them")
        hint = (f"Build the optimizer once the model is complete: move `{opt_text or 'the optimizer'}` below "
                f"{index.where(loc)}, or add them with `optimizer.add_param_group({{\"params\": [...]}})`.")
    else:
        why = ("by a layer the model does not register (kept in a plain list or dict?), so "
               "`model.parameters()` never yields them")
        fixed = _module_list(text)
        hint = (f"Hold the layers in `nn.ModuleList`: write `{fixed}`." if fixed else
                "Hold the layers in `nn.ModuleList` / `nn.ModuleDict` (or assign each as an attribute) so the model "
                "registers them and `model.parameters()` yields them.")
    message = (f"{labels}, {made}, get gradients from backward at {index.where(backward.get('location'))} but no "
               f"optimizer holds them: they were made {why}. `step()` never changes them; they stay at their "
               "initial values while the rest trains. Nothing raises.")
    out.add(PARAM_NOT_IN_OPTIMIZER.code, message, hint, loc,
            related=[related("optimizer built here", optimizer.get("location")) if optimizer else None,
                     related("gradients computed here", backward.get("location"))],
            variables=vids, details={"cause": cause, "parameters": [index.var_name(v) for v in vids]})


def _module_list(text):
    """``self.blocks = [nn.Linear(8, 8) for _ in range(3)]`` -> ``self.blocks = nn.ModuleList([...])``."""
    target, sep, value = (text or "").partition("=")
    value = value.strip()
    if not sep or target.rstrip().endswith(("=", "!", "<", ">")) or not (value.startswith("[")
                                                                          and value.endswith("]")):
        return None
    return f"{target.strip()} = nn.ModuleList({value})"
