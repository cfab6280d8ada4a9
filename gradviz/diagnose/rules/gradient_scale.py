"""exploding-grad / vanishing-grad: one layer's gradient norm far above or below the other layers'."""

import math
import statistics

from ...document.index import is_finite_number
from ..registry import Code, rule
from ..training_rules import reset_leaf

EXPLODING_GRAD = Code("exploding-grad", "info", "one layer's gradient norm is far above the others",
                      """\
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
""")
VANISHING_GRAD = Code("vanishing-grad", "info", "one layer's gradient norm is far below the others",
                      """\
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
""")

_FAR = 1e3  # a layer's gradient norm this many times above/below the others' median


@rule(EXPLODING_GRAD, VANISHING_GRAD, order=56)
def gradient_scale(ctx, out):
    """Per-layer gradient norms (the parameters' combined norm, grouped by module path) far outside the rest,
    judged on the last completed backward that reached three or more layers. Only the gradients an optimizer
    then steps with count: a GAN's generator backward also reaches the discriminator, whose gradients are reset
    before they are used."""
    index = ctx.index
    unused = _gradients_reset_unused(index)
    for b in reversed(index.backwards):
        layers = _layer_norms(index, b, unused.get(b.get("id"), set()))
        if len(layers) >= 3:
            break
    else:
        return
    for layer, (norm, params) in sorted(layers.items()):
        others = [n for name, (n, _) in layers.items() if name != layer]
        median = statistics.median(others)
        if median <= 0 or not math.isfinite(norm):
            continue
        ratio = norm / median
        if ratio >= _FAR:
            code, word = "exploding-grad", "above"
        elif ratio <= 1 / _FAR:
            code, word = "vanishing-grad", "below"
        else:
            continue
        factor = ratio if ratio >= 1 else (1 / ratio if ratio > 0 else math.inf)
        message = (f"layer `{layer}` has gradient norm {norm:.3g}, {factor:.3g}× {word} the median of the other "
                   f"layers ({median:.3g}) in backward at {index.where(b.get('location'))}.")
        hint = ("Check the layer's input scale and initialisation; use normalisation or residual connections; "
                "clip with `clip_grad_norm_` if it explodes.")
        out.add(code, message, hint, b.get("location"),
                nodes=[index.variables[p].get("accumulator") for p in params], variables=params,
                details={"layer": layer, "norm": norm, "median_others": median, "backward": b["id"]},
                order=(2, params[0]))


def _gradients_reset_unused(index):
    """``{backward id: {leaf ids}}``: the leaves a backward reached whose gradient is reset (``zero_grad``,
    ``p.grad = None``, ``p.grad.zero_()``) before an optimizer steps them, or that an optimizer steps elsewhere in
    the trace but not after this backward. The rest (stepped next, or no optimizer ever steps them: updated by
    hand) are the gradients that train something."""
    unused = {}
    timeline = index.timeline()
    # after the last record, a leaf some optimizer steps is not stepped again: its gradient is not used
    next_is_reset = {p: True for kind, rec in timeline if kind == "optimizer" and rec.get("event") == "step"
                     for p in rec.get("parameters") or ()}
    for kind, rec in reversed(timeline):
        if kind == "optimizer":
            reset = rec.get("event") == "zero_grad"
            if reset or rec.get("event") == "step":
                for p in rec.get("parameters") or ():
                    next_is_reset[p] = reset
        elif kind == "grad_write":
            next_is_reset[rec.get("variable")] = True
        elif kind == "inplace":
            leaf = reset_leaf(index, rec)
            if leaf is not None:
                next_is_reset[leaf] = True
        elif kind == "backward":
            unused[rec.get("id")] = {int(k) for k in rec.get("leaf_grad_norms") or {} if next_is_reset.get(int(k))}
    return unused


def _layer_norms(index, b, unused=frozenset()):
    if b.get("error"):
        return {}
    layers = {}
    for key, value in (b.get("leaf_grad_norms") or {}).items():
        v = index.variables.get(int(key)) or {}
        if not v.get("is_parameter") or not v.get("name") or v["id"] in unused:
            continue
        layer = v["name"].rsplit(".", 1)[0] if "." in v["name"] else v["name"]
        norm = float(value) if is_finite_number(value) else math.inf
        total, params = layers.get(layer, (0.0, []))
        layers[layer] = (total + norm * norm, params + [v["id"]])
    return {name: (math.sqrt(total), params) for name, (total, params) in layers.items()}
