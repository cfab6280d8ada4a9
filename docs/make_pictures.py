"""Generate the docs' pictures from the samples (pictures are generated, never committed).

Run from the repository root: python docs/make_pictures.py [--out docs/images] [--format png]. Each sample in
samples/ runs under a trace; its last iteration's graph is drawn to <out>/<sample>.<format>, plus the variants
docs/pictures.md shows (forward view, saved tensors, collapsed depth), and a 10,000-node loop. With PyTorch
installed, the real-size models of tests/render_models.py (ResNets, a transformer, a BERT-like encoder) are drawn
too: ``<model>.<format>`` as gradviz draws it by default (after), ``<model>-before.<format>`` with the layout options
of before issue 17 (``before_spec``), and the ``-full``, ``-forward``, ``-architecture`` and ``-lr`` views.

``python docs/make_pictures.py --sizes`` draws nothing: it prints the laid-out size (``dot -Tjson``) of each real
model's pictures, the table in docs/pictures.md. It uses only options every version has, so the same command run
on an older checkout (``PYTHONPATH=<old checkout>``) gives the "before" column.
"""

import argparse
import contextlib
import io
import json
import os
import runpy
import subprocess
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


def real_model_docs():
    """{name: trace document} of one training step of each real-size model (needs PyTorch)."""
    sys.path.insert(0, str(ROOT))
    from tests import render_models as models

    built = {"resnet8": models.resnet((2, 2, 2, 2)), "resnet48": models.resnet((12, 12, 12, 12)),
             "transformer": models.transformer(layers=2), "bert": models.bert(layers=4)}
    return {name: models.traced_step(*model) for name, model in built.items()}


REAL_VIEWS = {  # picture suffix -> build_graph options (the default picture first)
    "": {}, "-full": {"node_budget": None}, "-forward": {"forward": True, "node_budget": None},
    "-architecture": {"architecture": True}, "-lr": {"rankdir": "LR"},
}
PAGE_MODELS = {"transformer4": ("transformer_doc", {"layers": 4}), "resnet48": ("resnet_doc", {"blocks": 48}),
               "lstm35": ("unrolled_lstm_lm_doc", {})}
PAGE_WINDOW = (1280, 800)


def screenshot_pages(out, suffix):
    """report.html's first screen for a 4-layer transformer, a 48-block ResNet and a 2-layer LSTM language model
    unrolled over 35 steps (tests/viewer_models.py) in headless Chromium at 1280x800:
    ``<out>/page-<model><suffix>.png``; prints the node text's size at fit and the nodes in sight. The gradviz
    imported draws the page: ``PYTHONPATH=<old checkout>`` gives the before."""
    import shutil
    import tempfile

    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    import gradviz
    from gradviz.rendering.html import html_report

    sys.path.insert(0, str(ROOT / "tests"))
    import viewer_models

    profile = tempfile.mkdtemp(prefix="gradviz-pictures-")
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                 f"--window-size={PAGE_WINDOW[0]},{PAGE_WINDOW[1]}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        for name, (maker, kwargs) in PAGE_MODELS.items():
            page = Path(profile) / f"{name}.html"
            page.write_text(html_report(getattr(viewer_models, maker)(iterations=1, **kwargs)), encoding="utf-8")
            driver.get(page.as_uri())
            sizes = driver.execute_script(
                "return Array.from(document.querySelectorAll('#stage g.node text')).map(function (t) {"
                "  return parseFloat(t.getAttribute('font-size')) * t.getScreenCTM().a; });")
            seen = driver.execute_script(
                "var s = document.getElementById('stage').getBoundingClientRect();"
                "var all = document.querySelectorAll('#stage g.node');"
                "return [Array.from(all).filter(function (g) { var r = g.getBoundingClientRect();"
                "  return r.top >= s.top && r.bottom <= s.bottom && r.left >= s.left && r.right <= s.right; })"
                "  .length, all.length];")
            target = out / f"page-{name}{suffix}.png"
            driver.save_screenshot(str(target))
            print(f"{target}: gradviz {gradviz.__version__} from {Path(gradviz.__file__).parent.parent}, smallest "
                  f"node text {min(sizes):.1f} px, {seen[0]} of {seen[1]} nodes wholly in sight")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


SIZE_VIEWS = {"backward (default)": {}, "forward": {"forward": True}}


def before_spec(doc):
    """The picture as gradviz drew it before issue 17, reproduced by options: every op (no depth chosen for a node
    budget) and each parameter a rank above its op (``minlen`` 1), which sets a residual net's block clusters side
    by side in a diagonal staircase. (The old forward view, linked through misaligned ``input_variables``, is
    not reproducible: the document is fixed now.)"""
    from gradviz.rendering import build_graph

    spec = build_graph(doc, node_budget=None)
    for edge in spec.edges:
        edge.minlen = 1
    return spec


def draw_real_models(out, fmt):
    from gradviz.rendering import render, to_dot

    docs = real_model_docs()
    for name, doc in docs.items():
        for suffix, options in REAL_VIEWS.items():
            target = out / f"{name}{suffix}.{fmt}"
            render(doc, target, format=fmt, budget=60, **options)  # a generous budget: rasterizing is slow too
            print(target)
        target = out / f"{name}-before.{fmt}"
        # scaled to fit 60 inches: the staircase of resnet48 is 19,453 pt wide (400 million pixels at 96 dpi)
        target.write_bytes(subprocess.run(["dot", f"-T{fmt}", "-Gsize=60,60", "-Gdpi=96"],
                                          input=to_dot(before_spec(doc)).encode(), capture_output=True,
                                          check=True).stdout)
        print(target)


def print_sizes():
    from gradviz.rendering import build_graph, to_dot

    print("| model | view | nodes drawn | laid out (pt) |\n|---|---|---|---|")
    for name, doc in real_model_docs().items():
        for view, options in SIZE_VIEWS.items():
            spec = build_graph(doc, **options)
            done = subprocess.run(["dot", "-Tjson"], input=to_dot(spec).encode(), capture_output=True, check=True)
            x0, y0, x1, y1 = (float(v) for v in json.loads(done.stdout)["bb"].split(","))
            print(f"| {name} | {view} | {len(spec.nodes)} | {x1 - x0:,.0f} × {y1 - y0:,.0f} |")


def main():
    from gradviz.rendering import render
    from tests.synthetic_docs import loop_doc

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "docs" / "images"))
    parser.add_argument("--format", default="png", choices=["png", "svg", "pdf", "dot"])
    parser.add_argument("--sizes", action="store_true", help="print the real models' picture sizes, draw nothing")
    parser.add_argument("--page", action="store_true", help="only report.html's first screen of two real models "
                        "(needs selenium, chromium and chromedriver)")
    parser.add_argument("--suffix", default="", help="--page: added to each screenshot's name (-before)")
    args = parser.parse_args()
    if args.sizes:
        print_sizes()
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.page:
        screenshot_pages(out, args.suffix)
        return
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
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: the real-size models are not drawn")
        return
    draw_real_models(out, args.format)


if __name__ == "__main__":
    main()
