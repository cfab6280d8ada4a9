"""The one output object: every command prints through it and exits through its ``abort``.

Two rich consoles, one per stream. Plain messages are printed with markup and highlighting off and soft
wrapping on, so a value such as ``[1, 2]`` or a long path is printed as given and an error stays one line.
"""

import contextlib
import io
import os
import sys

import click


class Output:
    """Where a command's words go: the report to stdout, errors and warnings to stderr."""

    def __init__(self, quiet=False):
        self.quiet = quiet
        self.out = _console(sys.stdout, soft_wrap=False)
        self.err = _console(sys.stderr, soft_wrap=True)

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


def _console(file, soft_wrap):
    """A rich console that, when its reader goes away (``gradviz run x.py | head -1``), stops printing quietly
    instead of exiting with status 1 as rich does: the exit status stays the script's."""
    from rich.console import Console

    class QuietOnBrokenPipe(Console):
        def on_broken_pipe(self):
            _to_devnull(self.file)
            self.quiet = True

    return QuietOnBrokenPipe(file=file, highlight=False, soft_wrap=soft_wrap)


def one_line(text):
    """Collapse a message to one line, so an error never spills over several."""
    return " ".join(str(text).split())


@contextlib.contextmanager
def broken_pipe_safe():
    """Stop printing quietly when the reader of stdout went away (``gradviz run x.py | head -1``).

    As the Python docs recommend for SIGPIPE: point stdout at devnull so the interpreter's final flush cannot
    fail again, and carry on; the exit status stays the script's, the files are already written.
    """
    try:
        yield
    except BrokenPipeError:
        for stream in (sys.stdout, sys.stderr):
            _to_devnull_if_broken(stream)


def _to_devnull_if_broken(stream):
    try:
        stream.flush()
        return
    except (BrokenPipeError, ValueError):
        pass
    except OSError:
        return
    _to_devnull(stream)


def _to_devnull(stream):
    """Point ``stream``'s file descriptor at devnull, so that later writes and the final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


@contextlib.contextmanager
def script_stdout_to_stderr():
    """For ``--json-only``: while the script runs, whatever it writes to stdout goes to stderr — its
    ``print``s, ``sys.__stdout__``, and its child processes (``os.system``, ``subprocess``), which inherit file
    descriptor 1 — so that afterwards stdout carries the JSON document alone."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__):
        _flush(stream)
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptor 1 or 2 (closed by the caller): the Python-level redirect still holds
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__):
            _flush(stream)  # what the script left buffered belongs to stderr too
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _flush(stream):
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):
        pass


def tolerate_unencodable():
    """Print names the terminal's encoding cannot carry (a non-UTF-8 file name arrives as lone surrogates) as
    ``\\udcff`` escapes instead of failing. Called after the script ran: its own prints behave as under
    ``python``."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, io.UnsupportedOperation):
            pass


class OneLineUsageErrors(click.Group):
    """The command group, with click's usage errors (an unknown option, a bad option value) as one line,
    ``gradviz: error: ...``, exit status 2, like every other gradviz error; click's usage block and blank line
    would otherwise make them four."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "gradviz"
            message = one_line(exc.format_message()).rstrip(".")
            click.echo(f"gradviz: error: {message} (see `{command} --help`)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):  # Ctrl-C outside a script: 130, as for a script
                click.echo("gradviz: error: interrupted (Ctrl-C)", err=True)
                sys.exit(130)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(status if isinstance(status, int) else 0)
