"""Options more than one command takes, declared once."""

import click


def _check_rankdir(ctx, param, value):
    if value is None:  # the default: no need to load the rendering package (and numpy) before the script runs
        return None
    from ..rendering.graph import check_rankdir

    try:
        return check_rankdir(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def rankdir_option(default_text):
    """``--rankdir LR|TB|BT|RL`` (any case), shared by ``graph`` and ``run``."""
    return click.option("--rankdir", metavar="LR|TB|BT|RL", default=None, callback=_check_rankdir,
                        help=f"Layout direction: LR left to right, TB top to bottom…  {default_text}")
