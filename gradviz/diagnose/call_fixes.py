"""Rewrites of the user's line that take one call away (``F.softmax(self.fc(h), dim=1)`` -> ``self.fc(h)``): the
fix a hint writes when a line applied a function it should not have. None when the line has not exactly one such
call, or cannot be parsed on its own."""

import ast


def without_call(text, names):
    """``text`` with its one call of a function or method named in ``names`` (``softmax``, ``sigmoid``…)
    replaced by the tensor it was applied to: ``torch.sigmoid(x)`` and ``F.softmax(x, dim=1)`` by ``x``,
    ``x.softmax(1)`` by ``x``. None when there is not exactly one."""
    line = (text or "").strip()
    source = line[len("return "):] if line.startswith("return ") else line
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _called(c) in names]
    if len(calls) != 1:
        return None
    call = calls[0]
    if isinstance(call.func, ast.Attribute) and not _is_module_path(call.func.value):
        inner = call.func.value  # x.softmax(dim=1): the method's object
    elif call.args:
        inner = call.args[0]
    else:
        return None
    start, end = _offsets(source, call), _offsets(source, inner)
    rewritten = source[:start[0]] + source[end[0]:end[1]] + source[start[1]:]
    return (line[:len(line) - len(source)] + rewritten).strip()


def with_keyword(text, names, keyword):
    """``text`` with ``keyword`` (``training=self.training``) added to its one call of a function named in
    ``names``: ``F.dropout(h, 0.3)`` -> ``F.dropout(h, 0.3, training=self.training)``. None when the line has not
    exactly one such call."""
    line = (text or "").strip()
    source = line[len("return "):] if line.startswith("return ") else line
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _called(c) in names]
    if len(calls) != 1:
        return None
    start, end = _offsets(source, calls[0])
    rewritten = source[:end - 1].rstrip() + f", {keyword})" + source[end:]
    return (line[:len(line) - len(source)] + rewritten).strip()


def is_no_op(text):
    """``x = x``: a rewrite that leaves nothing to do (the line can go)."""
    try:
        tree = ast.parse((text or "").strip())
    except SyntaxError:
        return False
    body = tree.body
    return (len(body) == 1 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1
            and ast.dump(body[0].targets[0]).replace("Store()", "Load()") == ast.dump(body[0].value))


def _called(call):
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _is_module_path(node):
    """``torch``, ``F``, ``torch.nn.functional``: a namespace, not a tensor (a name that is a tensor is taken
    for one only when the function is called as a method with no positional argument)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("torch", "F", "nn", "functional", "np")


def _offsets(source, node):
    lines = source.splitlines(keepends=True)
    starts = [0]
    for text in lines:
        starts.append(starts[-1] + len(text))
    return (starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset)
