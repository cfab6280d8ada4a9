"""The structure drawn from the imports (module level and inside functions alike) has no circle outside the
engine core: the autograd engine, its ops and factories import each other by design; everything else is layered."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gradviz"
ENGINE_CORE = ("gradviz.autograd.", "gradviz.ops.", "gradviz.factories", "gradviz.generator", "gradviz.legacy")


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph():
    """{module: {gradviz modules it imports}}; ``from pkg import sub`` is an edge to ``pkg.sub``, not ``pkg``."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(filter(None, [package.rsplit(".", node.level - 1)[0] if node.level > 1
                                                  else package, node.module]))
                subs = [f"{base}.{a.name}" for a in node.names]
                found.update(subs if all(s in paths for s in subs) else [base])
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def circles(graph):
    """The strongly connected components of more than one module (Tarjan, without recursion)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle_and_nothing_else():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_outside_the_engine_core():
    outside = [c for c in circles(import_graph()) if not all(m.startswith(ENGINE_CORE) for m in c)]
    assert outside == []
