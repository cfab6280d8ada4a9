"""Build valid trace documents by hand (docs/trace-format.md), without running the engine.

The renderers read documents only, so their tests and benchmarks can describe any graph shape directly: a
10,000-step loop, hostile names, a diagnostic on a given node. ``DocBuilder`` fills in the bookkeeping fields
(graph membership, roots, bytes, structures) the way the tracer does.
"""

import math

_ITEMSIZE = {"float32": 4, "float64": 8, "int64": 8, "int32": 4, "bool": 1, "uint8": 1}


def _nbytes(shape, dtype):
    return int(math.prod(shape)) * _ITEMSIZE.get(dtype, 4)


def _loc(line, text="", file="model.py", function="<module>"):
    return None if line is None else {"file": file, "line": line, "text": text, "function": function}


class DocBuilder:
    """Accumulates variables, nodes and events; ``finish()`` returns the document."""

    def __init__(self, script="model.py"):
        self.script = script
        self.variables, self.nodes, self.events, self.diagnostics, self.backwards = [], [], [], [], []
        self.modules = {}
        self.iteration = 0
        self._node_iteration = []
        self._line = 0

    # -- variables and ops -------------------------------------------------------------------------------------
    def _variable(self, **fields):
        var = {"id": len(self.variables), "name": None, "shape": [], "dtype": "float32", "bytes": 0,
               "requires_grad": False, "is_leaf": True, "is_parameter": False, "origin": "new", "node": None,
               "accumulator": None, "source": None, "volatile": False, "grad_mode": True, "module": [],
               "location": None, "graph": None}
        var.update(fields)
        var["shape"] = list(var["shape"])
        var["bytes"] = _nbytes(var["shape"], var["dtype"])
        self.variables.append(var)
        return var["id"]

    def _next_line(self, line):
        self._line = line if line is not None else self._line + 1
        return self._line

    def leaf(self, name, shape, requires_grad=True, parameter=False, dtype="float32", origin=None, source=None,
             line=None, text=""):
        """A leaf Variable (input, parameter, or a ``.data``/``detach`` cut when ``source`` is given)."""
        origin = origin or ("parameter" if parameter else "new")
        return self._variable(name=name, shape=shape, dtype=dtype, requires_grad=requires_grad,
                              is_parameter=parameter, origin=origin, source=source,
                              location=_loc(self._next_line(line), text))

    def module(self, path, class_name):
        self.modules[path] = class_name

    def _accumulator(self, var_id, module):
        var = self.variables[var_id]
        if var["accumulator"] is None:
            node_id = self._node("AccumulateGrad", "AccumulateGrad", [], [None], var["shape"], var["dtype"],
                                 module, var["location"])
            self.nodes[node_id]["variable"] = var_id
            var["accumulator"] = node_id
        return var["accumulator"]

    def _node(self, op, class_name, inputs, input_variables, shape, dtype, module, location, custom=False):
        node = {"id": len(self.nodes), "op": op, "custom": custom, "class_name": class_name, "inputs": inputs,
                "input_variables": input_variables, "outputs": [], "variable": None, "shape": list(shape),
                "dtype": dtype, "saved": [], "meta": {}, "module": list(module), "location": location,
                "graph": None, "freed_by": None, "nonfinite": None}
        self.nodes.append(node)
        self._node_iteration.append(self.iteration)
        return node["id"]

    def op(self, op, inputs, shape, module=(), saved=(), custom=False, class_name=None, name=None, line=None,
           text="", dtype="float32", meta=None):
        """Apply op ``op`` (e.g. ``"MulBackward"``) to Variable ids ``inputs``; returns the output Variable id."""
        edges = []
        for var_id in inputs:
            var = self.variables[var_id]
            if var["node"] is not None:
                edges.append([var["node"], 0])
            elif var["requires_grad"]:
                edges.append([self._accumulator(var_id, module), 0])
            else:
                edges.append([None, 0])
        location = _loc(self._next_line(line), text)
        class_name = class_name or op.removesuffix("Backward")
        node_id = self._node(op, class_name, edges, list(inputs), shape, dtype, module, location, custom)
        node = self.nodes[node_id]
        node["meta"] = dict(meta or {})
        for index, var_id in enumerate(saved):
            var = self.variables[var_id]
            node["saved"].append({"variable": var_id, "kind": "input", "index": index, "shape": list(var["shape"]),
                                  "bytes": var["bytes"], "version": 0})
        out = self._variable(name=name, shape=shape, dtype=dtype, requires_grad=True, is_leaf=False, origin="op",
                             node=node_id, module=list(module), location=location)
        node["outputs"] = [out]
        return out

    # -- events ------------------------------------------------------------------------------------------------
    def _event(self, kind, line=None, text="", **fields):
        event = {"id": len(self.events), "kind": kind, "location": _loc(self._next_line(line), text),
                 "iteration": self.iteration}
        event.update(fields)
        self.events.append(event)
        return event["id"]

    def grad_read(self, var_id, was_none, line=None, text=""):
        var = self.variables[var_id]
        return self._event("grad_read", line, text, variable=var_id, was_none=was_none, is_leaf=var["is_leaf"],
                           retains_grad=False)

    def inplace(self, var_id, op, saved_by=(), line=None, text=""):
        return self._event("inplace", line, text, variable=var_id, op=op, old_version=0, new_version=1, node=None,
                           saved_by=list(saved_by))

    def detach(self, source, result, how="data", line=None):
        return self._event("detach", line, source=source, result=result, how=how)

    def backward(self, root_var, retain_graph=False, norms=None, leaf_norms=None, line=None, text="loss.backward()",
                 free=True):
        """Record a backward from ``root_var`` visiting everything reachable; ``norms`` maps node id → float."""
        root_node = self.variables[root_var]["node"]
        visited, stack = [], [root_node] if root_node is not None else []
        seen = set(stack)
        while stack:
            node_id = stack.pop()
            visited.append(node_id)
            for parent, _ in self.nodes[node_id]["inputs"]:
                if parent is not None and parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        backward_id = len(self.backwards)
        if norms is None:
            norms = {node_id: 1.0 / (1 + index) for index, node_id in enumerate(visited)}
        if leaf_norms is None:
            leaf_norms = {self.nodes[n]["variable"]: norms.get(n, 0.0) for n in visited
                          if self.nodes[n]["op"] == "AccumulateGrad"}
        self.backwards.append({
            "id": backward_id, "iteration": self.iteration, "roots": [root_var], "root_nodes": [root_node],
            "retain_graph": retain_graph, "kind": "backward", "location": _loc(self._next_line(line), text),
            "visited": sorted(visited), "grad_norms": {str(k): float(v) for k, v in norms.items()},
            "leaf_grad_norms": {str(k): float(v) for k, v in leaf_norms.items()}, "gradient_from": None,
            "error": None})
        if free and not retain_graph:
            for node_id in visited:
                if self.nodes[node_id]["saved"]:
                    self.nodes[node_id]["freed_by"] = backward_id
        return backward_id

    def diagnostic(self, code, severity, message, nodes=(), variables=(), hint="", line=None, text="", links=(),
                   related=()):
        diag = {"id": len(self.diagnostics), "code": code, "severity": severity, "message": message, "hint": hint,
                "location": _loc(line, text), "related": list(related), "nodes": list(nodes),
                "variables": list(variables), "links": list(links), "count": 1, "details": {}}
        self.diagnostics.append(diag)
        return diag["id"]

    def next_iteration(self):
        """Start a new graph (one training iteration)."""
        self.iteration += 1

    # -- finishing ---------------------------------------------------------------------------------------------
    def _components(self):
        # Nodes connected through next_functions, split by the iteration they were created in.
        parent = list(range(len(self.nodes)))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for node in self.nodes:
            for source, _ in node["inputs"]:
                if source is not None:
                    parent[find(source)] = find(node["id"])
        groups = {}
        for node in self.nodes:
            groups.setdefault(find(node["id"]), []).append(node["id"])
        return sorted((sorted(ids) for ids in groups.values()), key=lambda ids: ids[0])

    def finish(self):
        graphs, structures, signatures = [], [], {}
        consumed = {source for node in self.nodes for source, _ in node["inputs"] if source is not None}
        node_iteration = self._node_iteration
        for ids in self._components():
            graph_id = len(graphs)
            for node_id in ids:
                self.nodes[node_id]["graph"] = graph_id
                for out in self.nodes[node_id]["outputs"]:
                    self.variables[out]["graph"] = graph_id
            signature = ";".join(f"{self.nodes[n]['op']}{self.nodes[n]['shape']}" for n in ids)
            struct_id = signatures.setdefault(signature, len(signatures))
            if struct_id == len(structures):
                structures.append({"id": struct_id, "signature": signature, "count": 0, "first_graph": graph_id,
                                   "last_graph": graph_id, "iterations": [0, 0], "node_count": len(ids)})
            iteration = min(node_iteration[n] for n in ids)
            saved = sum(s["bytes"] for n in ids for s in self.nodes[n]["saved"])
            freed = [self.nodes[n]["freed_by"] for n in ids if self.nodes[n]["freed_by"] is not None]
            graphs.append({"id": graph_id, "structure": struct_id, "iteration": iteration, "nodes": ids,
                           "roots": [n for n in ids if n not in consumed], "saved_bytes": saved,
                           "output_bytes": sum(self.variables[o]["bytes"] for n in ids
                                               for o in self.nodes[n]["outputs"]),
                           "freed_by": freed[0] if freed else None, "alive_at_end": True, "full": True})
            struct = structures[struct_id]
            struct["count"] += 1
            struct["last_graph"] = graph_id
            struct["iterations"] = [graphs[struct["first_graph"]]["iteration"], iteration]
        retained = [g for g in graphs if g["freed_by"] is None]
        series = [{"iteration": it, "retained_bytes": sum(g["saved_bytes"] for g in retained
                                                          if g["iteration"] <= it),
                   "graphs_alive": sum(1 for g in retained if g["iteration"] <= it)}
                  for it in range(self.iteration + 1)]
        return {
            "format": "gradviz-trace", "version": 1, "gradviz_version": "0.1.0", "script": self.script,
            "status": {"completed": True, "exception": None}, "modules": dict(self.modules),
            "variables": self.variables, "nodes": self.nodes, "graphs": graphs, "structures": structures,
            "backwards": self.backwards, "events": self.events, "diagnostics": self.diagnostics,
            "memory": {"peak_retained_bytes": max([s["retained_bytes"] for s in series] or [0]),
                       "final_retained_bytes": series[-1]["retained_bytes"] if series else 0, "series": series,
                       "graphs": [{"graph": g["id"], "saved_bytes": g["saved_bytes"],
                                   "output_bytes": g["output_bytes"], "freed_by": g["freed_by"],
                                   "freed_at_iteration": None if g["freed_by"] is None
                                   else self.backwards[g["freed_by"]]["iteration"]} for g in graphs]},
            "dropped": {"iterations": 0, "nodes": 0, "variables": 0, "events": 0, "note": ""},
        }


# -- ready-made documents (tests, the rendering benchmark, docs) ---------------------------------------------------
def chained_models_doc():
    """The seed question: ``y1 = model1(X); y2 = model2(y1)``, then ``y1.grad`` read as None after backward."""
    b = DocBuilder("seed_chained.py")
    b.module("model1", "Linear")
    b.module("model2", "Linear")
    x = b.leaf("X", [4, 3], requires_grad=False, text="X = torch.randn(4, 3)")
    w1 = b.leaf("model1.weight", [2, 3], parameter=True)
    b1 = b.leaf("model1.bias", [2], parameter=True)
    w2 = b.leaf("model2.weight", [1, 2], parameter=True)
    b2 = b.leaf("model2.bias", [1], parameter=True)
    t1 = b.op("TBackward", [w1], [3, 2], module=["model1"])
    y1 = b.op("AddmmBackward", [b1, x, t1], [4, 2], module=["model1"], saved=[x, t1], name="y1",
              text="y1 = model1(X)")
    t2 = b.op("TBackward", [w2], [2, 1], module=["model2"])
    y2 = b.op("AddmmBackward", [b2, y1, t2], [4, 1], module=["model2"], saved=[y1, t2], name="y2",
              text="y2 = model2(y1)")
    loss = b.op("MeanBackward", [y2], [], name="loss", text="loss = y2.mean()")
    b.backward(loss)
    read = b.grad_read(y1, True, text="y1.backward(y1.grad)")
    none = b.diagnostic("none-grad", "warning", "y1.grad is None: y1 is not a leaf", variables=[y1],
                        hint="call y1.retain_grad() before backward", line=read + 12, text="y1.backward(y1.grad)")
    b.diagnostic("nonscalar-backward", "error", "grad can be implicitly created only for scalar outputs",
                 variables=[y1], links=[none], line=read + 12, text="y1.backward(y1.grad)",
                 hint="the gradient passed was y1.grad, which is None")
    return b.finish()


def loop_doc(steps, reuse_input=True):
    """``h = tanh(h @ W + x)`` unrolled ``steps`` times: W (and x, when ``reuse_input``) used at every step."""
    b = DocBuilder("rnn_loop.py")
    w = b.leaf("W", [8, 8], parameter=True, text="W = nn.Parameter(torch.randn(8, 8))")
    x = b.leaf("x", [1, 8], requires_grad=True, text="x = torch.randn(1, 8, requires_grad=True)")
    h = b.leaf("h0", [1, 8], requires_grad=False)
    for _ in range(steps):
        step_x = x if reuse_input else b.leaf("x_t", [1, 8], requires_grad=True)
        m = b.op("MmBackward", [h, w], [1, 8], saved=[h, w], line=10, text="h = torch.tanh(h @ W + x)")
        a = b.op("AddBackward", [m, step_x], [1, 8], line=10)
        h = b.op("TanhBackward", [a], [1, 8], line=10)
    loss = b.op("SumBackward", [h], [], name="loss", line=11, text="loss = h.sum()")
    b.backward(loss, line=12)
    return b.finish()


def hostile_doc():
    """Names and source lines built to break DOT, HTML and JSON embedding if anything is left unescaped."""
    b = DocBuilder('evil"<script>.py')
    bad = 'w"</script><script>alert(1)</script>&amp;\\n\n<b>ünï☃</b>\x07'
    b.module('net<"&>', "Evil</script>Module")
    w = b.leaf(bad, [2, 2], parameter=True, text='w = "<!--" + \'\\"\'')
    x = b.leaf("x]}>", [2, 2], requires_grad=False)
    y = b.op("MulBackward", [w, x], [2, 2], module=['net<"&>'], saved=[w, x], name="y<&>", text="y = w * x # </b>")
    custom = b.op('Evil"FnBackward', [y], [2, 2], custom=True, class_name='Evil"Fn<>', module=['net<"&>'])
    loss = b.op("SumBackward", [custom], [], name="l\\oss")
    b.backward(loss)
    b.grad_read(y, True, text="y.grad  # '<\"&>'")
    b.diagnostic("none-grad", "warning", f"{bad}.grad is None </script>", variables=[y], line=3,
                 text="print(y.grad) # </script><!--", hint='use "retain_grad()" & <friends>')
    return b.finish()


def residual_doc(blocks=2):
    """A residual net's graph: a stem, then ``blocks`` blocks ``relu(bn(conv(relu(conv(x)))) + x)`` under
    ``net.layers.<i>`` with their parameters, then a linear head and a mean: the shape whose block clusters
    once laid out as a diagonal staircase."""
    b = DocBuilder("resnet.py")
    b.module("net", "ResNet")
    b.module("net.stem", "Conv2d")
    x = b.leaf("x", [2, 3, 8, 8], requires_grad=False, text="x = torch.randn(2, 3, 8, 8)")
    w = b.leaf("net.stem.weight", [4, 3, 3, 3], parameter=True)
    h = b.op("ConvolutionBackward0", [x, w], [2, 4, 8, 8], module=["net", "net.stem"], saved=[x, w], line=20,
             text="h = self.stem(x)")
    for i in range(blocks):
        block = f"net.layers.{i}"
        b.module(block, "BasicBlock")
        skip = h
        for conv in ("conv1", "conv2"):
            b.module(f"{block}.{conv}", "Conv2d")
            b.module(f"{block}.bn{conv[-1]}", "BatchNorm2d")
            weight = b.leaf(f"{block}.{conv}.weight", [4, 4, 3, 3], parameter=True)
            h = b.op("ConvolutionBackward0", [h, weight], [2, 4, 8, 8], module=["net", block, f"{block}.{conv}"],
                     saved=[h, weight], line=10)
            gamma = b.leaf(f"{block}.bn{conv[-1]}.weight", [4], parameter=True)
            h = b.op("NativeBatchNormBackward0", [h, gamma], [2, 4, 8, 8],
                     module=["net", block, f"{block}.bn{conv[-1]}"], saved=[h, gamma], line=11)
            if conv == "conv1":
                h = b.op("ReluBackward0", [h], [2, 4, 8, 8], module=["net", block], line=12)
        h = b.op("AddBackward0", [h, skip], [2, 4, 8, 8], module=["net", block], line=13, text="out = out + x")
        h = b.op("ReluBackward0", [h], [2, 4, 8, 8], module=["net", block], line=14)
    b.module("net.fc", "Linear")
    fc = b.leaf("net.fc.weight", [10, 4], parameter=True)
    pooled = b.op("MeanBackward1", [h], [2, 4], module=["net"], line=21)
    out = b.op("MmBackward0", [pooled, fc], [2, 10], module=["net", "net.fc"], saved=[pooled, fc], line=22)
    loss = b.op("MeanBackward0", [out], [], name="loss", line=30, text="loss = net(x).mean()")
    b.backward(loss, line=31)
    return b.finish()


def block_chain(script, blocks, ops):
    """``blocks`` module calls under ``net``, each a parameter's ``MulBackward0`` then ``ops - 2`` distinct ops,
    chained one into the next, and a loss summing the last: the shape the viewer's tests grow to any size (nothing
    folds). Returns the builder, for diagnostics and ``finish``, and each block's op ids in order."""
    b = DocBuilder(script)
    b.module("net", "Net")
    y = b.leaf("x", (4,), requires_grad=False)
    made = []
    for i in range(blocks):
        b.module(f"net.block{i}", "Block")
        y = b.op("MulBackward0", [y, b.leaf(f"net.block{i}.weight", (4,), parameter=True)], (4,),
                 module=["net", f"net.block{i}"])
        block = [y]
        for j in range(ops - 2):
            y = b.op(f"Op{j}Backward0", [y], (4,), module=["net", f"net.block{i}"])
            block.append(y)
        made.append(block)
    b.backward(b.op("SumBackward0", [y], ()))
    return b, made


def four_blocks_doc():
    """``block_chain``'s document of 4 blocks of 10 ops under ``net.block0..3``: big enough for a page to draw an
    overview and part views of it."""
    b, _ = block_chain("blocks.py", 4, 10)
    return b.finish()
