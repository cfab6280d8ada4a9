"""report.html in headless Chromium: the page's size and how long it takes until the first view is on screen,
for real-PyTorch ResNet-style nets (8 and 48 residual blocks), a 2-layer TransformerEncoder and a synthetic
5,000-node trace with nothing to fold (50 module calls of 100 distinct ops), against the page
another checkout writes for the same trace (``--baseline PATH``, e.g. the main branch) loaded in the same
browser, alternately, so machine noise hits both alike.

    python benchmarks/bench_report_html.py --rounds 7 --baseline /work/main
    python benchmarks/bench_report_html.py --run --rounds 5 --baseline /tmp/base   # gradviz run's drawing step

Load time is the browser's own: navigation start to the viewer's ``ready`` mark (the first view drawn, pan/zoom
on), or to the load event for a page without it; "all ms" to its ``unpacked`` mark (every packed view inflated,
so every box opens at once). "open ms": then every view below the top ones is opened in turn (its first
opening: the page lays a part view out then, an older page clones dot's SVG), the median and the longest over
the views. Each figure is the median over rounds.

``--run`` times what ``gradviz run`` does once the script has been traced: ``artifacts.write_all`` (report.json,
the picture files, report.html with its views), in a fresh process per round, this checkout's and the baseline's
alternately; wall seconds, and the CPU seconds of the process and of its ``dot`` children (the machine is shared:
CPU time is what the change moves, wall time what the user waits).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

CASES = {"resnet-8": ("resnet_doc", {"blocks": 8}), "resnet-48": ("resnet_doc", {"blocks": 48}),
         "transformer-2": ("transformer_doc", {"layers": 2}),
         "wide-5000": ("big_doc", {})}  # 5,000 nodes in 50 module calls, none alike: the page-size worst case
WRITE = "import json, sys; from gradviz.rendering.html import html_report; " \
        "open(sys.argv[2], 'w', encoding='utf-8').write(html_report(json.load(open(sys.argv[1]))))"
RUN = ("import json, os, sys, time; from gradviz.cli.artifacts import write_all; doc = json.load(open(sys.argv[1]));"
       " t = os.times(); w = time.perf_counter(); write_all(doc, sys.argv[2], fmt=sys.argv[3]); e = os.times();"
       " print(json.dumps([time.perf_counter() - w, e.user + e.system - t.user - t.system,"
       " e.children_user + e.children_system - t.children_user - t.children_system]))")


def write_page(checkout, doc_path, page_path):
    """report.html for the trace at ``doc_path`` as ``checkout``'s gradviz writes it; seconds it took."""
    import time

    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=checkout)
    # from the trace's folder: `python -c` puts the working folder first on sys.path
    subprocess.run([sys.executable, "-c", WRITE, doc_path, page_path], env=env, check=True,
                   cwd=os.path.dirname(doc_path))
    return time.perf_counter() - start


def run_step(checkout, doc_path, out_dir, fmt):
    """[wall s, python CPU s, dot CPU s] of ``write_all`` as ``checkout``'s gradviz runs it."""
    env = dict(os.environ, PYTHONPATH=checkout)
    done = subprocess.run([sys.executable, "-c", RUN, doc_path, out_dir, fmt], env=env, check=True,
                          cwd=os.path.dirname(doc_path), capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_run(args, docs):
    print(f"gradviz run's drawing step (write_all), {args.rounds} rounds alternating, medians; "
          f"cores: {os.cpu_count()}")
    print(f"{'case':<18}{'fmt':>4}{'wall s':>8}{'cpu s':>7}{'dot s':>7}{'base wall':>10}{'base cpu':>9}"
          f"{'base dot':>9}{'wall ratio':>11}{'cpu ratio':>10}")
    for name, doc_path in docs.items():
        for fmt in args.formats.split(","):
            checkouts = {"new": ROOT, "base": args.baseline}
            times = {key: [] for key in checkouts}
            for round_ in range(args.rounds):
                for key in (list(checkouts) if round_ % 2 == 0 else list(checkouts)[::-1]):
                    out = tempfile.mkdtemp(prefix=f"gradviz-run-{key}-")
                    times[key].append(run_step(checkouts[key], doc_path, out, fmt))
                    shutil.rmtree(out, ignore_errors=True)
            new, base = ([statistics.median(t[i] for t in times[key]) for i in range(3)] for key in checkouts)
            print(f"{name:<18}{fmt:>4}{new[0]:>8.2f}{new[1]:>7.2f}{new[2]:>7.2f}{base[0]:>10.2f}{base[1]:>9.2f}"
                  f"{base[2]:>9.2f}{new[0] / base[0]:>11.2f}{(new[1] + new[2]) / (base[1] + base[2]):>10.2f}",
                  flush=True)


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={tempfile.mkdtemp()}",
                 "--window-size=1440,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def load_ms(driver, page):
    """(ms to the first view, ms until every view is usable: the packed ones inflated) of ``page``."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("file://" + page)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "var v = window.gradvizViewer, r = window.gradvizReport;"
        "return !v || !r || !r.data.packed || v.unpacked !== undefined;"))  # (an older page packs nothing)
    return driver.execute_script(
        "var v = window.gradvizViewer, load = performance.getEntriesByType('navigation')[0].loadEventEnd;"
        "if (v && v.ready) { return [v.ready, v.unpacked || v.ready]; }"
        "return [load, load];")


def open_ms(driver):
    """ms each view below the top ones takes to open the first time (``mount``), on the page just loaded."""
    return driver.execute_script(
        "var out = [];"
        "window.gradvizReport.data.views.forEach(function (v) {"
        "  if (!v.parent || v.same_as) { return; }"
        "  var t = performance.now(); window.gradvizViewer.mount(v.key); out.push(performance.now() - t); });"
        "return out;")


def opening(rounds):
    """(median over rounds of the views' median opening ms, of their longest) from ``open_ms``'s rounds."""
    return statistics.median(statistics.median(o) for o in rounds), statistics.median(max(o) for o in rounds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", help="another checkout whose report.html to load side by side")
    parser.add_argument("--run", action="store_true", help="time gradviz run's drawing step instead (needs "
                        "--baseline)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--formats", default="svg,png", help="--run: picture formats to time")
    args = parser.parse_args()
    import test_render_html_viewer
    import viewer_models

    makers = {"resnet_doc": viewer_models.resnet_doc, "transformer_doc": viewer_models.transformer_doc,
              "big_doc": test_render_html_viewer.big_doc}

    work = tempfile.mkdtemp(prefix="gradviz-bench-html-")
    cases = {name: CASES[name] for name in args.cases.split(",")}
    if args.run:
        if not args.baseline:
            parser.error("--run compares with another checkout: give --baseline PATH")
        docs = {}
        for name, (maker, kwargs) in cases.items():
            docs[name] = os.path.join(work, f"{name}.json")
            with open(docs[name], "w", encoding="utf-8") as f:
                json.dump(makers[maker](**kwargs), f)
        try:
            bench_run(args, docs)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    driver = browser()
    print(f"chromium headless 1440x900, {args.rounds} rounds, medians; cores: {os.cpu_count()}")
    print(f"{'case':<15}{'nodes':>7}{'page':>10}{'write s':>9}{'load ms':>9}{'all ms':>8}{'open ms':>9}{'max':>6}"
          + (f"{'base page':>11}{'base ms':>9}{'ratio':>7}{'base open':>11}{'max':>6}" if args.baseline else ""))
    try:
        for name, (maker, kwargs) in cases.items():
            doc = makers[maker](**kwargs)
            doc_path = os.path.join(work, f"{name}.json")
            with open(doc_path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            pages = {"new": os.path.join(work, f"{name}.html")}
            wrote = write_page(ROOT, doc_path, pages["new"])
            if args.baseline:
                pages["base"] = os.path.join(work, f"{name}-base.html")
                write_page(args.baseline, doc_path, pages["base"])
            times, opens = {key: [] for key in pages}, {key: [] for key in pages}
            for round_ in range(args.rounds):
                for key in (list(pages) if round_ % 2 == 0 else list(pages)[::-1]):
                    times[key].append(load_ms(driver, pages[key]))
                    opens[key].append(open_ms(driver) or [0.0])

            new = statistics.median(t[0] for t in times["new"])
            every = statistics.median(t[1] for t in times["new"])
            line = (f"{name:<15}{len(doc['nodes']):>7}{os.path.getsize(pages['new']) / 1e6:>8.2f}MB{wrote:>9.1f}"
                    f"{new:>9.0f}{every:>8.0f}{opening(opens['new'])[0]:>9.0f}{opening(opens['new'])[1]:>6.0f}")
            if args.baseline:
                base = statistics.median(t[0] for t in times["base"])
                line += (f"{os.path.getsize(pages['base']) / 1e6:>9.2f}MB{base:>9.0f}{new / base:>7.2f}"
                         f"{opening(opens['base'])[0]:>11.0f}{opening(opens['base'])[1]:>6.0f}")
            print(line, flush=True)
    finally:
        driver.quit()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
