"""graph-freed: backward through a graph whose saved buffers an earlier backward already freed."""

from ..backward_rules import failed_with, script_stopped
from ..records import related
from ..registry import Code, rule
from ..training_causes import carry_before, carry_cause, detach_text, shared_graph

GRAPH_FREED = Code("graph-freed", "error", "backward through a graph whose saved buffers were already freed",
                   """\
backward ran through a graph whose saved buffers an earlier backward had already freed ("Trying to backward
through the graph a second time").

To save memory, backward frees the values each node saved as soon as it has used them. A second backward
through the same nodes then has nothing to work with. This usually means part of the graph was built once,
outside the loop, and is reused every iteration, or that two losses share a subgraph and each calls backward.

The mistake:

    h = encoder(X)                # built once
    for step in range(100):
        loss = head(h).sum()
        loss.backward()           # the 2nd iteration goes back through h's freed graph

The fix: rebuild what you differentiate inside the loop (`h = encoder(X)` in the loop body), or, for two
losses on one graph, add them and call backward once: `(loss1 + loss2).backward()`.

Two common causes have a fix of their own, which gradviz then writes: a recurrent model's hidden state carried
from one batch to the next without `detach()` (see `hidden-state-not-detached`: write
`hidden = hidden.detach()` before the call), and a GAN whose discriminator loss reads the generator's output
without `detach()` (its backward frees the generator's graph before the generator's loss needs it: write
`discriminator(fake.detach())`; see `gan-fake-not-detached`).

`retain_graph=True` makes the error go away, but it is seldom the right fix: it keeps every saved buffer
alive (see `retained-graph`), and backward then accumulates into the same parameters twice.

In the picture: the freed nodes, and the line where the first backward ran.
""")


@rule(GRAPH_FREED, order=22)
def graph_freed(ctx, out):
    index = ctx.index
    for b in failed_with(index, "graph-freed"):
        _graph_freed(index, out, b)
    script_stopped(index, out, "graph-freed")


def _graph_freed(index, out, b):
    reach = index.reachable_from(b.get("root_nodes") or ())
    freed = sorted(n for n in reach if (index.nodes.get(n) or {}).get("freed_by") not in (None, b["id"]))
    by = sorted({index.nodes[n]["freed_by"] for n in freed})
    first = next((x for x in index.backwards if by and x["id"] == by[0]), None)
    ops = ", ".join(sorted({index.nodes[n]["op"] for n in freed})) or "its nodes"
    built = _earliest_location(index, freed)
    text = f"the backward at {index.where(first.get('location'))}" if first else "an earlier backward"
    message = (f"backward() goes through {ops} a second time, but {text} already freed their saved buffers.")
    hint = ("Rebuild the graph before each backward (run the forward pass inside the loop) or add the losses "
            "and call backward once; retain_graph=True is seldom the right fix — it keeps every buffer alive and "
            "accumulates into the same parameters twice.")
    cause = None
    carry = carry_before(index, b.get("iteration"))
    shared = None if carry is not None else shared_graph(index, first, freed)
    if carry is not None:
        sentence, hint, cause = carry_cause(index, carry)
        message += f" That graph was built at {index.where(built)}: {sentence}"
    elif shared is not None:
        node, _, var = shared
        name, fixed = detach_text(index, node, var)
        what = f"`{name}`" if name else "a tensor of that graph"
        message += (f" Both backward calls belong to one training step: the first one's loss reads {what} (built "
                    f"at {index.where(built)}) without `detach()` at {index.where(node.get('location'))}, so its "
                    "backward went into that graph and freed it.")
        hint = (f"Detach it where the first loss reads it: `{fixed or (name or 'fake') + '.detach()'}` at "
                f"{index.where(node.get('location'))}. retain_graph=True would hide the error and train that graph's "
                "parameters on the first loss too (gan-fake-not-detached).")
        cause = related(f"{name or 'tensor'} read here without detach()", node.get("location"))
    elif first is not None and first.get("iteration") != b.get("iteration"):
        message += (f" That part of the graph was built at {index.where(built)} (iteration {first.get('iteration')}) "
                    "and is reused in a later iteration.")
    out.add("graph-freed", message, hint, b.get("location"),
            related=[related("first backward ran here", first and first.get("location")),
                     related("graph built here", built), cause],
            nodes=freed, variables=list(b.get("roots") or ()),
            details={"backward": b["id"], "freed_by": by}, order=(1, b["id"]))


def _earliest_location(index, node_ids):
    for nid in sorted(node_ids):
        loc = index.nodes[nid].get("location")
        if loc:
            return loc
    return None
