"""Generate the docs' pictures from the samples (pictures are generated, never committed).

Run from the repository root: python docs/make_pictures.py [--out docs/images] [--format png]. Each sample in
samples/ runs under a trace; its last iteration's graph is drawn to <out>/<sample>.<format>, plus the variants
docs/pictures.md shows (forward view, saved tensors, collapsed depth), and a 10,000-node loop.
"""

import argparse
import contextlib
import io
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {
    "seed_backward_nonscalar": {"": {}, "-forward": {"forward": True}},
    "inplace_saved_tensor": {"": {}, "-saved": {"show_saved": True}},
    "clean_cnn": {"": {}, "-depth0": {"depth": 0}, "-grads": {"show_grads": True}},
}


def trace_sample(path):
    from gradviz.tracing import trace

    argv, cwd = sys.argv, os.getcwd()
    sys.argv = [str(path)]
    with trace() as tr, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except (Exception, SystemExit):  # a sample that fails on purpose still has its graph
            pass
        finally:
            sys.argv = argv
            os.chdir(cwd)
    doc = tr.to_dict()
    doc["script"] = f"samples/{path.name}"
    return doc


def main():
    from gradviz.rendering import render
    from gradviz.rendering.synthetic import loop_doc

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "docs" / "images"))
    parser.add_argument("--format", default="png", choices=["png", "svg", "pdf", "dot"])
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for sample in sorted((ROOT / "samples").glob("*.py")):
        doc = trace_sample(sample)
        if not doc.get("graphs"):
            print(f"{sample.name}: no graph recorded, skipped")
            continue
        for suffix, options in VARIANTS.get(sample.stem, {"": {}}).items():
            target = out / f"{sample.stem}{suffix}.{args.format}"
            render(doc, target, format=args.format, **options)
            print(target)
    target = out / f"loop_10000.{args.format}"
    render(loop_doc(3333), target, format=args.format)
    print(target)


if __name__ == "__main__":
    main()
