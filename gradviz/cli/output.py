"""The one output object: every command prints through it and exits through its ``abort``.

Two rich consoles, one per stream. Plain messages are printed with markup and highlighting off and soft
wrapping on, so a value such as ``[1, 2]`` or a long path is printed as given and an error stays one line.
"""

import sys

import click


class Output:
    """Where a command's words go: the report to stdout, errors and warnings to stderr."""

    def __init__(self, quiet=False):
        from rich.console import Console

        self.quiet = quiet
        self.out = Console(file=sys.stdout, highlight=False, soft_wrap=False)
        self.err = Console(file=sys.stderr, highlight=False, soft_wrap=True)

    @property
    def is_terminal(self):
        return self.out.is_terminal

    def print(self, *renderables, **options):
        """Print renderables (tables, panels, text) built elsewhere; silent under ``--quiet``."""
        if not self.quiet:
            self.out.print(*renderables, **options)

    def line(self, text=""):
        """One line of plain text to stdout, printed as given (no markup), never wrapped."""
        if not self.quiet:
            self.out.print(text, markup=False, highlight=False, soft_wrap=True)

    def raw(self, text):
        """Text written to stdout byte for byte, even under ``--quiet`` (machine output such as JSON)."""
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()

    def note(self, text):
        """A one-line remark to stderr (``gradviz: ...``): shown even under ``--quiet``."""
        self.err.print(f"gradviz: {text}", markup=False, highlight=False, soft_wrap=True)

    def error(self, message):
        """A one-line error to stderr without exiting (the run goes on to finish its report)."""
        self.err.print(f"gradviz: error: {message}", markup=False, highlight=False, soft_wrap=True)

    def stderr_text(self, text):
        """Text to stderr as given (a trimmed traceback)."""
        self.err.file.write(text)
        self.err.file.flush()

    def abort(self, message, code=1):
        """Print ``gradviz: error: message`` on one line to stderr and exit with ``code``."""
        self.error(message)
        raise click.exceptions.Exit(code)


def one_line(text):
    """Collapse a message to one line, so an error never spills over several."""
    return " ".join(str(text).split())
