"""``gradviz explain [CODE]``: the long explanation of a diagnostic, like ``rustc --explain``."""

import click


@click.command()
@click.argument("code", required=False)
def explain(code):
    """Explain diagnostic CODE (what it means, a minimal example, the fix); with no CODE, list the codes."""
    from ..diagnose import CODES
    from ..diagnose import explain as explain_code
    from .output import Output

    output = Output()
    codes = _code_names(CODES)
    if code is None:
        output.print(_codes_table(CODES))
        output.line("")
        output.line("Run `gradviz explain CODE` for the explanation of one.")
        return
    if code not in codes:
        output.abort(f"unknown diagnostic code `{code}`; codes: {', '.join(codes)}")
    output.line(explain_code(code).rstrip("\n"))


def _code_names(codes):
    return sorted(codes) if not isinstance(codes, (list, tuple)) else [_field(c, "code", c) for c in codes]


def _codes_table(codes):
    from rich.table import Table

    table = Table(title="Diagnostic codes", title_justify="left", show_edge=False)
    table.add_column("code", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("what it means")
    entries = codes.items() if isinstance(codes, dict) else [(_field(c, "code", c), c) for c in codes]
    for name, info in sorted(entries, key=lambda item: item[0]):
        table.add_row(name, str(_field(info, "severity", "")), str(_field(info, "title", _field(info, "summary", ""))))
    return table


def _field(info, name, default):
    if isinstance(info, dict):
        return info.get(name, default)
    return getattr(info, name, default)
