"""Fixes written for the user's own line: small, exact rewrites of one source line, or None when the line is not
the simple shape a rewrite is sure of (the hint then describes the fix in words)."""

import ast

from ..document.index import code_text, same_line

# In-place forms of the binary operators a freshly created tensor is usually scaled or shifted by.
_INPLACE = {ast.Mult: "mul_", ast.Div: "div_", ast.Add: "add_", ast.Sub: "sub_"}


def leaf_after_ops(text):
    """For ``w = torch.randn(3, requires_grad=True) * 0.1`` (a tensor created with ``requires_grad=True``, then
    transformed on the same line), the ways to make ``w`` itself the leaf, as source text:
    ``{"requires_grad_": "w = (torch.randn(3) * 0.1).requires_grad_()",
    "no_grad": ("w = torch.randn(3, requires_grad=True)", "w.mul_(0.1)") or None}``.
    None when the line is not one assignment with exactly one ``requires_grad=True`` keyword."""
    line = (text or "").strip()
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign) or len(tree.body[0].targets) != 1:
        return None
    assign = tree.body[0]
    found = [(call, kw) for call in ast.walk(assign.value) if isinstance(call, ast.Call)
             for kw in call.keywords if kw.arg == "requires_grad" and _is_true(kw.value)]
    if len(found) != 1:
        return None
    call, keyword = found[0]
    target = ast.get_source_segment(line, assign.targets[0])
    if call is assign.value:
        return None  # nothing is applied after the constructor: it is already a leaf
    value = _without(line, assign.value, call, keyword)
    if not isinstance(assign.value, (ast.Call, ast.Attribute, ast.Subscript, ast.Name)):
        value = f"({value})"
    fixes = {"requires_grad_": f"{target} = {value}.requires_grad_()", "no_grad": None}
    operand = _other_operand(assign.value, call)
    if operand is not None:
        created = ast.get_source_segment(line, call)
        fixes["no_grad"] = (f"{target} = {created}",
                            f"{target}.{_INPLACE[type(assign.value.op)]}({ast.get_source_segment(line, operand)})")
    return fixes


def requires_grad_after(text):
    """``w = w.t()`` -> ``w = w.t().requires_grad_()`` (the line's one assignment, asking for gradients of its
    result); None when the line is not one assignment."""
    line = (text or "").strip()
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign) or len(tree.body[0].targets) != 1:
        return None
    assign = tree.body[0]
    value = ast.get_source_segment(line, assign.value)
    if not isinstance(assign.value, (ast.Call, ast.Attribute, ast.Subscript, ast.Name)):
        value = f"({value})"
    return f"{ast.get_source_segment(line, assign.targets[0])} = {value}.requires_grad_()"


def _other_operand(op, call):
    """For ``call * k`` / ``call + k`` (or ``k * call``, ``k + call``) with a call-free ``k``, that ``k``."""
    if not isinstance(op, ast.BinOp) or type(op.op) not in _INPLACE:
        return None
    if op.left is call:
        other = op.right
    elif op.right is call and isinstance(op.op, (ast.Mult, ast.Add)):
        other = op.left
    else:
        return None
    return None if any(isinstance(n, ast.Call) for n in ast.walk(other)) else other


def _is_true(node):
    return isinstance(node, ast.Constant) and node.value is True


def _without(line, value, call, keyword):
    """The source of ``value`` with ``keyword`` (and the comma that joins it to its neighbours) removed from
    ``call``'s arguments."""
    args = sorted([*call.args, *call.keywords], key=lambda a: (a.lineno, a.col_offset))
    i = args.index(keyword)
    if i > 0:
        cut = (args[i - 1].end_col_offset, keyword.end_col_offset)
    elif len(args) > 1:
        cut = (keyword.col_offset, args[1].col_offset)
    else:
        cut = (keyword.col_offset, keyword.end_col_offset)
    start, end = value.col_offset, value.end_col_offset
    return line[start:cut[0]] + line[cut[1]:end]


def leaf_fix_hint(index, name, location, created):
    """How to make ``name`` (assigned at ``location`` from a tensor created with requires_grad=True at
    ``created``) the leaf itself, written for the user's line when it can (none-grad, optimize-non-leaf)."""
    line = index.where(location)
    if not same_line(location, created):
        fixed = requires_grad_after(code_text(location)) if same_line_assigns(location) else None
        then = f"write {line} as `{fixed}`" if fixed else f"call `.requires_grad_()` on the result at {line}"
        return (f"Make `{name}` itself the leaf: create the tensor at {index.where(created)} without "
                f"requires_grad=True and {then}; or keep requires_grad=True and apply the ops in place under "
                "`torch.no_grad()`.")
    fixes = leaf_after_ops(code_text(location)) if same_line_assigns(location) else None
    if fixes is None:
        return (f"Make `{name}` itself the leaf: at {line}, create the tensor without requires_grad=True, apply "
                "the ops, then call `.requires_grad_()` on the result; or create it with requires_grad=True and "
                "apply the ops in place under `torch.no_grad()`.")
    hint = f"Make `{name}` itself the leaf: write {line} as `{fixes['requires_grad_']}`"
    if fixes["no_grad"]:
        created, inplace = fixes["no_grad"]
        hint += f", or create it then scale it under no_grad: `{created}` then `with torch.no_grad(): {inplace}`"
    else:
        hint += ", or create it with requires_grad=True and apply the ops in place under `torch.no_grad()`"
    return hint + "."


def same_line_assigns(location):
    """Whether the source line of ``location`` is a whole statement (an assignment split over lines is not)."""
    text = code_text(location)
    return bool(text) and text.count("(") == text.count(")") and text.count("[") == text.count("]")
