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
    if code is None:
        output.print(codes_table(CODES))
        output.line("")
        output.line("Run `gradviz explain CODE` for what a code means, a minimal example and the fix.")
        return
    if code not in CODES:
        output.abort(f"unknown diagnostic code `{code}`; codes: {', '.join(CODES)}")
    output.line(explain_code(code).rstrip("\n"))


def codes_table(codes):
    """The catalogue as a table: code, default severity, one-line title (catalogue order)."""
    from rich.table import Table

    table = Table(box=None, show_edge=False, pad_edge=False)
    table.add_column("code", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("what it means")
    for name, (severity, title) in codes.items():
        table.add_row(name, severity, title)
    return table
