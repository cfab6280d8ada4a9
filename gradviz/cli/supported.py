"""``gradviz supported [PREFIX]``: the PyTorch names gradviz's engine provides (what ``run --torch`` exposes)."""

import click


@click.command()
@click.argument("prefix", required=False, default="")
def supported(prefix):
    """List the supported PyTorch names, one per line, dotted in full; with PREFIX (`torch.nn`, `torch.Tensor.ad`,
    or `nn.Linear` for short), only the names that start with it."""
    from .output import Output
    from .torch_shim import supported_names

    output = Output()
    wanted = prefix if prefix == "torch" or prefix.startswith("torch.") or not prefix else f"torch.{prefix}"
    names = supported_names(wanted)
    if not names:
        output.abort(f"no supported PyTorch name starts with `{wanted}`; `gradviz supported` lists them all")
    for name in names:
        output.line(name)
