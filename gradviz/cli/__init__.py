"""The ``gradviz`` command line. Commands live one per module; they import the heavy parts lazily."""

import click

from .._version import __version__
from .explain import explain
from .graph import graph
from .output import OneLineUsageErrors
from .run import run
from .supported import supported
from .torchrun import torchrun


@click.group(cls=OneLineUsageErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gradviz")
def main():
    """gradviz: see your autograd graph, and why backprop went wrong."""


main.add_command(run)
main.add_command(graph)
main.add_command(explain)
main.add_command(supported)
main.add_command(torchrun)

if __name__ == "__main__":  # pragma: no cover
    main()
