"""report.html in a real browser: headless Chromium shows the graph, clicking a node shows its details, clicking a
diagnostic highlights its nodes and steps through them, pan and zoom move the view, search and deep links land on
their node, a module box opens its inside, the memory chart's peak is report.json's, and the console stays free
of errors."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from gradviz.rendering.html import html_report
from gradviz.rendering.layout import dot_available
from tests.synthetic_docs import DocBuilder, block_chain, chained_models_doc, hostile_doc

CHROMIUM = "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed"),
    pytest.mark.skipif(shutil.which("chromedriver") is None, reason="chromedriver is not installed"),
    pytest.mark.skipif(not dot_available(), reason="Graphviz dot is not installed"),
]
webdriver = pytest.importorskip("selenium.webdriver")


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="gradviz-chromium-")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                 "--window-size=1440,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def open_report(browser, tmp_path, doc, fragment=""):
    path = tmp_path / "report.html"
    path.write_text(html_report(doc), encoding="utf-8")
    browser.get(path.as_uri() + fragment)
    return path


def severe(browser):
    return [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def test_graph_shows_and_clicking_a_node_shows_its_details(browser, tmp_path):
    from selenium.webdriver.common.by import By

    open_report(browser, tmp_path, chained_models_doc())
    node = browser.find_element(By.ID, "gv-n3")
    assert node.is_displayed() and node.size["width"] > 20
    assert "AddmmBackward" in node.text
    node.click()
    inspector = browser.find_element(By.ID, "inspector-body").text
    assert "AddmmBackward" in inspector
    for expected in ("(4, 2)", "float32", "32 B", "model.py:", "y1 = model1(X)", "saved tensors", "X", "0.2000",
                     "warning none-grad", "error nonscalar-backward"):
        assert expected in inspector, expected
    assert "gv-selected" in node.get_attribute("class")
    browser.find_element(By.ID, "gv-n0").click()
    assert "model1.weight" in browser.find_element(By.ID, "inspector-body").text
    assert severe(browser) == []


def test_clicking_a_diagnostic_highlights_its_nodes(browser, tmp_path):
    from selenium.webdriver.common.by import By

    open_report(browser, tmp_path, chained_models_doc())
    browser.find_element(By.ID, "diag-1").click()
    highlighted = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "g.node.gv-hl")]
    assert highlighted == ["gv-n3", "gv-e0"]           # y1's op and the note on its None .grad read
    assert "active" in browser.find_element(By.ID, "diag-1").get_attribute("class")
    assert severe(browser) == []


def test_hostile_names_render_as_text_without_errors(browser, tmp_path):
    from selenium.webdriver.common.by import By

    open_report(browser, tmp_path, hostile_doc())
    assert browser.execute_script("return document.scripts.length") == 2     # the data and the page's script
    node = browser.find_element(By.ID, "gv-n0")
    node.click()
    text = browser.find_element(By.ID, "inspector-body").text
    assert 'w"</script><script>alert(1)</script>&amp;' in text
    assert severe(browser) == []


def transform(browser):
    # svg-pan-zoom applies a change at the next animation frame: wait for two
    browser.execute_async_script("var done = arguments[0];"
                                 "requestAnimationFrame(function () { requestAnimationFrame(done); });")
    return browser.execute_script(
        "return document.querySelector('#stage .svg-pan-zoom_viewport').getAttribute('transform')")


def matrix_of(text):
    return [float(x) for x in text[len("matrix("):-1].split(",")]


def matrix(browser):
    return matrix_of(transform(browser))


def in_stage(browser, element_id):
    """Whether the element's centre is inside the graph's box on screen."""
    return browser.execute_script(
        "var s = document.getElementById('stage').getBoundingClientRect(),"
        " r = document.querySelector('#stage [id=\"' + arguments[0] + '\"]').getBoundingClientRect(),"
        " x = r.left + r.width / 2, y = r.top + r.height / 2;"
        "return x > s.left && x < s.right && y > s.top && y < s.bottom;", element_id)


def test_zoom_buttons_keys_and_dragging_change_the_view_transform(browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    open_report(browser, tmp_path, chained_models_doc())
    browser.find_element(By.ID, "fit").click()
    fitted = transform(browser)
    assert fitted.startswith("matrix(")
    browser.find_element(By.ID, "zoom-in").click()
    zoomed = transform(browser)
    scale = [float(x) for x in zoomed[7:-1].split(",")][0]
    assert zoomed != fitted and scale > float(fitted[7:-1].split(",")[0])
    stage = browser.find_element(By.ID, "stage")
    ActionChains(browser).move_to_element_with_offset(stage, 5, 5).click_and_hold().move_by_offset(120, 60) \
        .release().perform()
    dragged = [float(x) for x in transform(browser)[7:-1].split(",")]
    before = [float(x) for x in zoomed[7:-1].split(",")]
    assert dragged[4] == pytest.approx(before[4] + 120, abs=2) and dragged[5] == pytest.approx(before[5] + 60, abs=2)
    browser.find_element(By.TAG_NAME, "body").send_keys("0")       # fit again
    assert matrix(browser) == pytest.approx(matrix_of(fitted), abs=1e-4)
    assert severe(browser) == []


def test_search_finds_a_parameter_and_lands_on_it(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    doc = chained_models_doc()
    weight = next(v["id"] for v in doc["variables"] if v["name"] == "model2.weight")
    drawn_as = next(n["id"] for n in doc["nodes"] if n.get("variable") == weight)   # its AccumulateGrad leaf box
    open_report(browser, tmp_path, doc)
    box = browser.find_element(By.ID, "search")
    box.send_keys("model2.weight")
    hits = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#search-results .hit")]
    assert hits[0] == "model2.weight · parameter"
    box.send_keys(Keys.ENTER)
    selected = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-selected")]
    assert selected == [f"gv-n{drawn_as}"]
    assert in_stage(browser, f"gv-n{drawn_as}")
    inspector = browser.find_element(By.ID, "inspector-body").text
    assert "leaf\nmodel2.weight" in inspector and "(1, 2)" in inspector
    assert browser.execute_script("return window.gradvizViewer.textPx()") >= 10
    box.send_keys(Keys.ESCAPE)
    box.send_keys("y1 = model1")                                       # a source line finds its op
    assert browser.find_elements(By.CSS_SELECTOR, "#search-results .hit")[0].text.startswith("AddmmBackward")
    assert severe(browser) == []


def test_a_deep_link_opens_the_page_on_its_node(browser, tmp_path):
    from selenium.webdriver.common.by import By

    doc = chained_models_doc()
    y2 = next(n["id"] for n in doc["nodes"] if (n.get("location") or {}).get("text") == "y2 = model2(y1)")
    open_report(browser, tmp_path, doc, f"#node-g0-n{y2}")
    selected = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-selected")]
    assert selected == [f"gv-n{y2}"] and in_stage(browser, f"gv-n{y2}")
    assert browser.find_element(By.CSS_SELECTOR, "#inspector-body h3").text == "AddmmBackward"
    assert "y2 = model2(y1)" in browser.find_element(By.ID, "inspector-body").text
    browser.get((tmp_path / "report.html").as_uri() + "#diag-0")
    assert "active" in browser.find_element(By.ID, "diag-0").get_attribute("class")
    assert severe(browser) == []


def two_node_diagnostic_doc():
    b = DocBuilder("steps.py")
    w = b.leaf("w", [3], parameter=True)
    a = b.op("ExpBackward", [w], [3], name="a", text="a = w.exp()")
    c = b.op("MulBackward0", [a], [3], name="c", text="c = a * 2")
    loss = b.op("SumBackward0", [c], [], name="loss", text="loss = c.sum()")
    b.backward(loss)
    b.diagnostic("nan-inf", "warning", "`a` and `c` overflow", nodes=[a, c], line=2, text="a = w.exp()")
    b.diagnostic("stale-version", "error", "saved `a` changed", nodes=[c], line=9, text="c = a * 2")
    b.diagnostic("graph-cut", "info", "cut", nodes=[loss], line=1, text="w = ...")
    return b.finish()


def test_the_diagnostics_bar_comes_first_sorted_and_steps_through_nodes(browser, tmp_path):
    from selenium.webdriver.common.by import By

    doc = two_node_diagnostic_doc()
    open_report(browser, tmp_path, doc)
    entries = browser.find_elements(By.CSS_SELECTOR, "#diagbar .dentry")
    assert [e.get_attribute("id") for e in entries] == ["diag-1", "diag-0", "diag-2"]   # error, warning, info
    bar, stage = browser.find_element(By.ID, "diagbar").rect, browser.find_element(By.ID, "stage").rect
    assert bar["y"] < stage["y"] < 900                                  # message and graph on one screen
    assert entries[1].find_element(By.CSS_SELECTOR, ".msg code").text == "a"
    a, c = (n["id"] for n in doc["nodes"] if n["op"] in ("ExpBackward", "MulBackward0"))

    def selected():
        return [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-selected")]
    entries[1].click()
    assert entries[1].find_element(By.CLASS_NAME, "steppos").text == "1/2" and selected() == [f"gv-n{a}"]
    highlighted = {e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-hl")}
    assert highlighted == {f"gv-n{a}", f"gv-n{c}"}
    entries[1].find_element(By.CLASS_NAME, "next").click()
    assert entries[1].find_element(By.CLASS_NAME, "steppos").text == "2/2" and selected() == [f"gv-n{c}"]
    assert in_stage(browser, f"gv-n{c}")
    browser.find_element(By.TAG_NAME, "body").send_keys("n")           # wraps round
    assert entries[1].find_element(By.CLASS_NAME, "steppos").text == "1/2" and selected() == [f"gv-n{a}"]
    assert severe(browser) == []


def test_tab_reaches_diagnostics_and_nodes_and_a_diagnostics_link_survives_stepping(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    doc = two_node_diagnostic_doc()
    open_report(browser, tmp_path, doc)
    a, c = (n["id"] for n in doc["nodes"] if n["op"] in ("ExpBackward", "MulBackward0"))
    browser.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")
    reached = []
    for _ in range(40):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        reached.append(browser.execute_script("return document.activeElement.id"))
    assert {"diag-1", "diag-0", "diag-2"} <= set(reached)
    assert {f"gv-n{a}", f"gv-n{c}"} <= set(reached)
    # Enter on a focused node selects it; on a focused diagnostic, selects it
    browser.execute_script("document.getElementById(arguments[0]).focus()", f"gv-n{c}")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert selected_ids(browser) == [f"gv-n{c}"]
    browser.execute_script("document.getElementById('diag-0').focus()")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert "active" in browser.find_element(By.ID, "diag-0").get_attribute("class")
    assert browser.execute_script("return location.hash") == "#diag-0"   # not the node it stepped to
    browser.switch_to.active_element.send_keys(Keys.ENTER)               # again: the next node
    assert browser.find_element(By.CSS_SELECTOR, "#diag-0 .steppos").text == "2/2"
    assert browser.execute_script("return location.hash") == "#diag-0"
    assert severe(browser) == []


def test_the_memory_chart_peak_is_report_jsons_on_a_real_pytorch_leak(browser, tmp_path):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    script = tmp_path / "leak.py"
    script.write_text("import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
                      "model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                      "X = torch.randn(64, 10)\ny = X.sum(1, keepdim=True)\ntotal_loss = 0\n"
                      "for _ in range(8):\n    opt.zero_grad()\n    loss = nn.functional.mse_loss(model(X), y)\n"
                      "    loss.backward()\n    opt.step()\n    total_loss += loss\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    subprocess.run([sys.executable, "-m", "gradviz", "run", "--out", str(out), str(script)], cwd=tmp_path,
                   env=env, check=True, capture_output=True)
    memory = json.loads((out / "report.json").read_text())["memory"]
    browser.get((out / "report.html").as_uri())
    chart = browser.find_element(By.ID, "memory-chart")
    assert int(chart.get_attribute("data-peak-bytes")) == memory["peak_retained_bytes"] > 0
    peak = browser.find_element(By.ID, "memory-peak")
    assert int(peak.get_attribute("data-bytes")) == memory["peak_retained_bytes"]
    assert float(peak.get_attribute("y1")) == 14.0                # the chart's top: nothing in the series is above
    label = [t.text for t in chart.find_elements(By.TAG_NAME, "text") if t.text.startswith("peak ")]
    peak_bytes = memory["peak_retained_bytes"]
    tops = [p.get("peak_retained_bytes", p["retained_bytes"]) for p in memory["series"]]
    at = f" (iteration {memory['series'][tops.index(peak_bytes)]['iteration']})" if peak_bytes in tops else ""
    assert label == [f"peak {peak_bytes / 1024:.1f} KiB{at}"]
    alive = [p["graphs_alive"] for p in memory["series"]]
    assert alive[-1] > alive[0]                               # the leak: the live-graphs line climbs
    assert browser.find_element(By.ID, "memory-note").is_displayed()
    assert severe(browser) == []


def test_a_real_transformer_is_legible_and_a_module_box_opens_its_inside(browser, tmp_path):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import transformer_doc

    doc = transformer_doc()
    open_report(browser, tmp_path, doc)
    assert browser.execute_script("return window.gradvizViewer.textPx()") >= 10
    # the overview: the encoder's two layers folded into one box
    assert box_titles(browser) == ["model.0.layers.0–1 (TransformerEncoderLayer) × 2", "model.1 (Linear)"]
    encoder = open_box(browser, "model.0.layers.0–1 (TransformerEncoderLayer) × 2")   # unfolded on click
    assert encoder.startswith("g0-")
    assert browser.find_element(By.ID, "crumbs").text == "graph 0 › model.0.layers.0–1"
    assert box_titles(browser) == ["model.0.layers.0 (TransformerEncoderLayer)",
                                   "model.0.layers.1 (TransformerEncoderLayer)"]   # the layers, one by one
    drawn = len(browser.find_elements(By.CSS_SELECTOR, "#stage g.node"))
    assert visible_nodes(browser) == drawn                           # fitted to the stage: all of it in sight
    layer = open_box(browser, "model.0.layers.0 (TransformerEncoderLayer)")   # a layer's 41 ops fit: all drawn
    assert layer.startswith(encoder + "-")
    inside = {e.find_element(By.TAG_NAME, "text").get_attribute("textContent")
              for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node")}
    assert "ScaledDotProductFlashAttentionForCpuBackward0" in inside and "AddmmBackward0" in inside
    assert "root" not in inside                     # a part view's last op feeds the rest: it is not the loss
    assert browser.find_element(By.ID, "crumbs").text.endswith("model.0.layers.0–1 › model.0.layers.0")
    # the inspector in binary units (as the diagnostics), saved tensors named by what holds them
    attention = next(e for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node")
                     if e.find_element(By.TAG_NAME, "text").get_attribute("textContent").startswith("ScaledDot"))
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", attention)
    inspector = browser.find_element(By.ID, "inspector-body").text
    assert re.search(r"\bbytes\s+\d+\.\d KiB\b", inspector) and " kB" not in inspector
    names = [r.find_elements(By.TAG_NAME, "td")[0].text
             for r in browser.find_elements(By.CSS_SELECTOR, "#inspector-body table.saved tr")[1:]]
    assert names and not [n for n in names if n == "buffer" or re.fullmatch(r"v\d+", n)]
    assert "input 0 of ScaledDotProductFlashAttentionForCpu" in names
    for _ in range(2):  # Escape: back to the layers, the overview
        browser.find_element(By.TAG_NAME, "body").send_keys("\ue00c")
    assert browser.execute_script("return window.gradvizViewer.current().key") == "g0"
    # the last iteration is drawn like the first, so embedded once: a link to its node lands on its twin
    (structure,) = doc["structures"]
    attention = "ScaledDotProductFlashAttentionForCpuBackward0"
    first, last = ([n["id"] for n in doc["nodes"] if n["graph"] == g and n["op"] == attention]
                   for g in (structure["first_graph"], structure["last_graph"]))
    browser.get((tmp_path / "report.html").as_uri() + f"#node-g{structure['last_graph']}-n{last[0]}")
    selected = [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-selected")]
    assert selected == [f"gv-n{first[0]}"]
    assert browser.find_element(By.ID, "view-note").text == (
        f"node n{last[0]} of graph {structure['last_graph']} (iteration 1) is shown as n{first[0]} of graph "
        f"{structure['first_graph']}: the two graphs are drawn alike")
    assert severe(browser) == []


def box_titles(browser):
    from selenium.webdriver.common.by import By

    return [b.find_element(By.TAG_NAME, "text").get_attribute("textContent")
            for b in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-opens")]


def open_box(browser, title):
    """Click the module box titled ``title`` in the view on screen; returns the key of the view it opened."""
    from selenium.webdriver.common.by import By

    wait_unpacked(browser)
    boxes = browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-opens")
    box = boxes[box_titles(browser).index(title)]
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", box)
    return browser.execute_script("return window.gradvizViewer.current().key")


def fit_text_px(browser):
    """The rendered font size in px (font-size times the on-screen scale) of every text in the view's nodes,
    smallest first."""
    return sorted(browser.execute_script(
        "return Array.from(document.querySelectorAll('#stage g.node text')).map(function (t) {"
        "  return parseFloat(t.getAttribute('font-size')) * t.getScreenCTM().a; });"))


def visible_nodes(browser):
    """How many nodes of the view on screen are wholly inside the stage."""
    return browser.execute_script(
        "var s = document.getElementById('stage').getBoundingClientRect();"
        "return Array.from(document.querySelectorAll('#stage g.node')).filter(function (g) {"
        "  var r = g.getBoundingClientRect();"
        "  return r.top >= s.top && r.bottom <= s.bottom && r.left >= s.left && r.right <= s.right; }).length;")


@pytest.mark.parametrize("name, top_boxes", [
    ("transformer-4", ["model.0.layers.0–3 (TransformerEncoderLayer) × 4", "model.1 (Linear)"]),  # layers folded
    ("resnet-48", ["model.stem (Sequential)", "model.blocks (Sequential)", "model.head (Linear)"])])
def test_the_first_view_of_a_big_model_is_a_legible_overview_whose_boxes_open_down_to_every_op(
        browser, tmp_path, name, top_boxes):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    import viewer_models

    doc = (viewer_models.transformer_doc(layers=4, iterations=1) if name == "transformer-4"
           else viewer_models.resnet_doc(blocks=48, iterations=1))
    browser.set_window_size(1280, 800)
    try:
        open_report(browser, tmp_path, doc)
        assert browser.execute_script("return window.gradvizViewer.current().key") == "g0"
        sizes = fit_text_px(browser)
        assert sizes and sizes[0] >= 10                              # legible at fit, not zoomed onto one node
        drawn = len(browser.find_elements(By.CSS_SELECTOR, "#stage g.node"))
        assert visible_nodes(browser) == drawn and 3 <= drawn <= 12   # the whole model on one screen
        assert box_titles(browser) == top_boxes
        assert browser.find_element(By.ID, "crumbs").text == "graph 0"
        # open the first box with several ops, and inside it, until a view draws ops only: every op is drawn
        ops = {n["op"] for n in doc["nodes"] if n["graph"] == 0 and n["op"] != "AccumulateGrad"}
        seen, trail = set(), []
        title = top_boxes[0]
        for _ in range(6):
            trail.append(title.split(" (")[0])
            open_box(browser, title)
            assert browser.find_element(By.ID, "crumbs").text == " › ".join(["graph 0"] + trail)
            # what the box held, fitted to the stage: all of it in sight
            assert visible_nodes(browser) == len(browser.find_elements(By.CSS_SELECTOR, "#stage g.node"))
            seen |= {t.get_attribute("textContent")
                     for t in browser.find_elements(By.CSS_SELECTOR, "#stage g.node text")}
            inner = box_titles(browser)
            if not inner:
                break
            title = inner[0]
        assert not box_titles(browser) and seen & ops
        if name == "resnet-48":  # the blocks' view, too small to read at fit, is still fitted: 14 of 14, not 6
            browser.get((tmp_path / "report.html").as_uri())
            open_box(browser, "model.blocks (Sequential)")
            drawn = len(browser.find_elements(By.CSS_SELECTOR, "#stage g.node"))
            assert drawn > 6 and visible_nodes(browser) == drawn
        assert severe(browser) == []
    finally:
        browser.set_window_size(1440, 900)


def test_an_unrolled_lstms_overview_reads_at_10_px_at_fit_and_says_what_it_is_above_the_stage(browser, tmp_path):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import unrolled_lstm_lm_doc

    doc = unrolled_lstm_lm_doc()
    browser.set_window_size(1280, 800)
    try:
        open_report(browser, tmp_path, doc)
        assert browser.execute_script("return window.gradvizViewer.current().key") == "g0"
        sizes = fit_text_px(browser)
        assert sizes and sizes[0] >= 10                              # was 8.0 px: the page zoomed onto the top
        drawn = len(browser.find_elements(By.CSS_SELECTOR, "#stage g.node"))
        assert visible_nodes(browser) == drawn >= 8                   # the whole model in sight
        assert "model.cells.0 → model.cells.1 × 35" in box_titles(browser)
        assert browser.find_element(By.ID, "view-note").text.startswith("overview: modules below depth 1 as boxes")
        open_box(browser, "model.cells.0 → model.cells.1 × 35")     # the 35 steps open, each cell a box
        assert len(box_titles(browser)) == 70 and browser.find_element(By.ID, "view-note").text == ""
        assert severe(browser) == []
    finally:
        browser.set_window_size(1440, 900)


def test_search_lands_on_an_op_inside_an_unrolled_lstm_opening_what_encloses_it(browser, tmp_path):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import unrolled_lstm_lm_doc

    doc = unrolled_lstm_lm_doc()
    tanh = [n for n in doc["nodes"] if n["op"] == "TanhBackward0" and "model.cells.1" in (n.get("module") or [])]
    open_report(browser, tmp_path, doc)
    wait_unpacked(browser)
    browser.find_element(By.ID, "search").send_keys("TanhBackward0")
    hits = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#search-results .hit")]
    assert hits and not any("not drawn" in h for h in hits)
    browser.find_element(By.ID, "search").send_keys("\ue007")          # Enter: the first match
    first = int(browser.execute_script("return window.gradvizReport.data.search.filter(function (r) {"
                                       " return r[1] === 'TanhBackward0'; })[0][0]"))
    assert selected_ids(browser) == [f"gv-n{first}"] and in_stage(browser, f"gv-n{first}")
    assert browser.find_element(By.ID, "view-note").text == ""          # itself, not a box standing for it
    crumbs = browser.find_element(By.ID, "crumbs").text
    assert crumbs.startswith("graph 0 › model.cells.0 → model.cells.1 × 35")   # the fold around it opened
    # a deep link to any tanh of the second cell lands on that node
    browser.get((tmp_path / "report.html").as_uri() + f"#node-g0-n{tanh[-1]['id']}")
    wait_unpacked(browser)
    assert selected_ids(browser) == [f"gv-n{tanh[-1]['id']}"]
    assert severe(browser) == []


def diagnosed_blocks_doc(blocks=10, ops=12):
    """``blocks`` module calls of ``ops`` distinct ops under one ``net``, too big to read at fit; a diagnostic
    on an op inside block 6."""
    b, made = block_chain("blocks.py", blocks, ops)
    inside = made[6][4]   # block 6's fourth distinct op
    b.diagnostic("nan-inf", "warning", "`y` overflows", nodes=[inside], line=3, text="y = f(y)")
    return b.finish(), inside


def test_the_diagnostic_stays_in_sight_on_every_level_and_the_first_screen_is_the_overview(browser, tmp_path):
    from selenium.webdriver.common.by import By

    doc, inside = diagnosed_blocks_doc()
    open_report(browser, tmp_path, doc)
    wait_unpacked(browser)
    assert browser.execute_script("return window.gradvizViewer.current().key") == "g0"     # not the node's view
    assert "active" in browser.find_element(By.ID, "diag-0").get_attribute("class")
    # "net" alone would be the overview: it is drawn one level deeper, a box per block
    assert box_titles(browser) == [f"net.block{i} (Block)" for i in range(10)]
    marked = [e.find_element(By.TAG_NAME, "text").get_attribute("textContent")
              for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-hl-in")]
    assert marked == ["net.block6 (Block)"]                           # the box holding the diagnosed op
    browser.find_element(By.ID, "diag-0").click()                     # already selected: steps onto the op
    browser.find_element(By.CSS_SELECTOR, "#diag-0 .next").click()
    assert selected_ids(browser) == [f"gv-n{inside}"] and in_stage(browser, f"gv-n{inside}")
    assert "gv-hl" in browser.find_element(By.ID, f"gv-n{inside}").get_attribute("class")
    assert browser.execute_script("return location.hash") == "#diag-0"
    assert severe(browser) == []


def wait_unpacked(browser):
    """Wait until the page has inflated its packed views (it starts after the first view is on screen)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(lambda b: b.execute_script("return !!window.gradvizViewer.unpacked"))


def selected_ids(browser):
    from selenium.webdriver.common.by import By

    return [e.get_attribute("id") for e in browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-selected")]


def test_search_lands_on_a_node_that_was_inside_a_folded_loop(browser, tmp_path):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import resnet_doc

    doc = resnet_doc(blocks=8, iterations=1)
    conv = next(n for n in doc["nodes"] if n["op"] == "ConvolutionBackward0"
                and "model.blocks.5.conv2" in (n.get("module") or []))
    open_report(browser, tmp_path, doc)
    top = browser.execute_script("return window.gradvizViewer.current().key")
    assert browser.find_elements(By.CSS_SELECTOR, f'#stage [id="gv-n{conv["id"]}"]') == []   # folded away
    wait_unpacked(browser)
    box = browser.find_element(By.ID, "search")
    box.send_keys("blocks.5.conv2")
    hits = browser.find_elements(By.CSS_SELECTOR, "#search-results .hit")
    texts = [e.text for e in hits]
    assert texts[0] == "model.blocks.5.conv2.weight · parameter"          # parameters first, then the ops
    assert texts[1].startswith("ConvolutionBackward0 · model.blocks.5.conv2")
    assert not any("not drawn" in t for t in texts)
    box.send_keys(Keys.ARROW_DOWN, Keys.ENTER)
    key = browser.execute_script("return window.gradvizViewer.current().key")
    assert key != top and key.startswith(top + "-")                  # a view below the fold
    assert selected_ids(browser) == [f"gv-n{conv['id']}"] and in_stage(browser, f"gv-n{conv['id']}")
    assert browser.execute_script("return window.gradvizViewer.textPx()") >= 10
    assert browser.find_element(By.CSS_SELECTOR, "#inspector-body h3").text == "ConvolutionBackward0"
    assert "model.blocks.5.conv2" in browser.find_element(By.ID, "crumbs").text
    # the fold itself opens the loop unfolded: its dashed "× N" cluster is a click away in model.blocks' view
    browser.execute_script("window.gradvizViewer.mount(arguments[0])", top)
    open_box(browser, "model.blocks (Sequential)")
    fold = browser.find_element(By.CSS_SELECTOR, "#stage g.cluster.gv-opens")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", fold)
    assert browser.find_element(By.ID, "crumbs").text.endswith("unfolded")
    assert severe(browser) == []


def test_a_deep_link_into_a_packed_view_and_every_module_of_a_5000_node_run_opens(browser, tmp_path):
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    from test_render_html_viewer import big_doc

    doc = big_doc()
    last = max(n["id"] for n in doc["nodes"] if n["op"] == "Op97Backward0")   # in block 49, the last box
    open_report(browser, tmp_path, doc, f"#node-g0-n{last}")
    wait_unpacked(browser)
    assert browser.execute_script("return window.gradvizViewer.current().key") == "g0-b0-b49"
    assert selected_ids(browser) == [f"gv-n{last}"] and in_stage(browser, f"gv-n{last}")
    browser.find_element(By.TAG_NAME, "body").send_keys("\ue00c")     # Escape: back to net's 50 boxes
    assert len(browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-opens")) == 50
    for number in (0, 24, 49):
        box = browser.find_elements(By.CSS_SELECTOR, "#stage g.node.gv-opens")[number]
        box_id = box.get_attribute("id")
        browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", box)
        assert browser.execute_script("return window.gradvizViewer.current().key") == "g0-b0-" + box_id[3:]
        texts = [t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, "#stage g.node text")]
        assert "MulBackward0" in texts and "Op97Backward0" in texts
        browser.find_element(By.TAG_NAME, "body").send_keys("\ue00c")
    assert browser.find_elements(By.ID, "cap-note") == [] or "0 nodes" in browser.find_element(By.ID, "cap-note").text
    assert severe(browser) == []


def test_a_node_past_max_nodes_is_drawn_in_the_view_the_more_box_opens(browser, tmp_path):
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    from test_render_html_viewer import chain_doc

    doc = chain_doc()
    first = next(n["id"] for n in doc["nodes"] if n["op"] == "Op0Backward0")
    path = tmp_path / "report.html"
    path.write_text(html_report(doc, view_options={"max_nodes": 60}), encoding="utf-8")
    browser.get(path.as_uri())
    wait_unpacked(browser)
    more = browser.find_element(By.ID, "gv-more")
    assert "more nodes" in more.text and "gv-opens" in more.get_attribute("class")
    browser.find_element(By.ID, "search").send_keys("y0 = f0(y)")
    hit = browser.find_elements(By.CSS_SELECTOR, "#search-results .hit")[0]
    assert hit.text.startswith("Op0Backward0") and "not drawn" not in hit.text
    browser.find_element(By.ID, "search").send_keys("\ue007")          # Enter
    assert browser.execute_script("return window.gradvizViewer.current().key") == "g0-more-more"
    assert selected_ids(browser) == [f"gv-n{first}"] and in_stage(browser, f"gv-n{first}")
    assert severe(browser) == []


REAL_MODELS = {"transformer-2": ("transformer_doc", {}), "resnet-8": ("resnet_doc", {"blocks": 8}),
               "resnet-48": ("resnet_doc", {"blocks": 48}), "lstm-lm": ("lstm_lm_doc", {}),
               "structures-20": ("many_structures_doc", {})}


@pytest.mark.parametrize("name", sorted(REAL_MODELS))
def test_done_when_on_real_pytorch_models(browser, tmp_path, name):
    """Issue 17's "done when" on real PyTorch: diagnostics and a legible graph on the first screen, every node of
    every drawn graph found and landed on, the memory chart's peak report.json's, no console errors."""
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    import viewer_models

    maker, kwargs = REAL_MODELS[name]
    doc = getattr(viewer_models, maker)(**kwargs)
    open_report(browser, tmp_path, doc)
    bar, stage = browser.find_element(By.ID, "diagbar").rect, browser.find_element(By.ID, "stage").rect
    assert bar["y"] < stage["y"] < 900 - 200                          # both on the first 1440x900 screen
    if doc["diagnostics"]:
        assert browser.find_elements(By.CSS_SELECTOR, ".dentry.active")   # the first one is shown at once
    # node labels as rendered (their boxes on screen), those in the stage: none under 10 px
    heights = browser.execute_script(
        "var s = document.getElementById('stage').getBoundingClientRect();"
        "return Array.from(document.querySelectorAll('#stage g.node text')).map(function (t) {"
        "  return t.getBoundingClientRect(); }).filter(function (r) {"
        "  return r.bottom > s.top && r.top < s.bottom && r.right > s.left && r.left < s.right; })"
        ".map(function (r) { return r.height; });")
    assert len(heights) >= 5 and min(heights) >= 10
    wait_unpacked(browser)
    drawn = set(browser.execute_script("return window.gradvizReport.data.views.map(function (v) { return v.graph; })"))
    ids = [[n["id"], n["graph"]] for n in doc["nodes"] if n["graph"] in drawn]
    lost = browser.execute_script(
        "var V = window.gradvizViewer; return arguments[0].filter(function (p) {"
        "  var place = V.locate('n', p[0], p[1]);"
        "  return !place || (place.standsIn !== null && place.standsIn !== undefined); });", ids)
    assert lost == []                                                # each drawn under its own id somewhere
    sample = ids[::max(1, len(ids) // 25)]
    missed = browser.execute_script(
        "var V = window.gradvizViewer; return arguments[0].filter(function (p) {"
        "  var g = V.focus(V.locate('n', p[0], p[1])); return !g || !g.classList.contains('gv-selected'); });",
        sample)
    assert missed == []
    chart = browser.find_element(By.ID, "memory-chart")
    assert int(chart.get_attribute("data-peak-bytes")) == doc["memory"]["peak_retained_bytes"] > 0
    assert severe(browser) == []


def page_graphs(path):
    """{view key: graph data} of the part views a page lays out itself (views.py embeds them packed)."""
    import base64
    import zlib

    page = path.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="gv-data">(.*?)</script>', page, re.S).group(1))
    return {v["key"]: json.loads(zlib.decompress(base64.b64decode(data["packed"][v["key"]])).decode("utf-8"))
            for v in data["views"] if v.get("layout") == "page"}


def drawn_geometry(browser):
    """The view on screen's nodes and module boxes as {id: (x, y, width, height)} in the drawing's units, and
    its edges' ids."""
    return browser.execute_script("""
        function boxes(selector) {
          var out = {};
          document.querySelectorAll('#stage ' + selector).forEach(function (g) {
            var b = g.querySelector(':scope > :is(path, ellipse, polygon)').getBBox();
            out[g.id] = [b.x, b.y, b.width, b.height];
          });
          return out;
        }
        return {nodes: boxes('g.node'), clusters: boxes('g.cluster'),
                edges: Array.from(document.querySelectorAll('#stage g.edge')).map(function (g) { return g.id; })};
    """)


def overlap(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def inside(a, box):
    return box[0] <= a[0] and a[0] + a[2] <= box[0] + box[2] and box[1] <= a[1] and a[1] + a[3] <= box[1] + box[3]


def test_part_views_are_laid_out_in_the_page_readably_and_search_lands_inside_a_closed_box(browser, tmp_path):
    pytest.importorskip("torch")
    from selenium.webdriver.common.by import By

    sys.path.insert(0, os.path.dirname(__file__))
    from viewer_models import transformer_doc

    doc = transformer_doc()
    path = open_report(browser, tmp_path, doc)
    graphs = page_graphs(path)
    assert len(graphs) >= 3   # the layers' fold unfolded, each layer, its attention: none laid out by dot
    wait_unpacked(browser)
    for key, graph in graphs.items():
        browser.execute_script("window.gradvizViewer.mount(arguments[0])", key)
        drawn = drawn_geometry(browser)
        # every node and edge of the view's data, under the ids dot's views carry
        assert sorted(drawn["nodes"]) == sorted(n[0] for n in graph["nodes"]), key
        assert drawn["edges"] == [f"edge{i + 1}" for i, e in enumerate(graph["edges"]) if e[0] != e[1]], key
        assert sorted(drawn["clusters"]) == sorted(c[1] for c in graph["clusters"]), key
        nodes = list(drawn["nodes"].items())
        assert [(a, b) for i, (a, p) in enumerate(nodes) for b, q in nodes[i + 1:] if overlap(p, q)] == [], key
        # edges flow up the page (rankdir BT, as the top view): a head above its tail unless they share a row
        by_name = {n[1]: drawn["nodes"][n[0]] for n in graph["nodes"]}
        for tail, head, *_, constraint, minlen, _ in graph["edges"]:
            if constraint and minlen:
                assert by_name[head][1] + by_name[head][3] <= by_name[tail][1], (key, tail, head)
        # each node inside its module box, each box inside its parent's, sibling boxes apart
        boxes = {c[0]: (drawn["clusters"][c[1]], c[2]) for c in graph["clusters"]}
        for node in graph["nodes"]:
            if node[12]:
                assert inside(drawn["nodes"][node[0]], boxes[node[12]][0]), (key, node[0])
        for name, (box, parent) in boxes.items():
            if parent:
                assert inside(box, boxes[parent][0]), (key, name)
            siblings = [b for other, (b, p) in boxes.items() if p == parent and other != name]
            assert not [b for b in siblings if overlap(box, b)], (key, name)
    # search lands on an op drawn only inside a box that is closed on the first screen, opening its view
    browser.get(path.as_uri())
    wait_unpacked(browser)
    assert browser.execute_script("return window.gradvizViewer.current().key") == "g0"
    attention = next(n["id"] for n in doc["nodes"] if n["op"].startswith("ScaledDotProduct"))
    assert not browser.find_elements(By.CSS_SELECTOR, f'#stage [id="gv-n{attention}"]')
    browser.find_element(By.ID, "search").send_keys("ScaledDotProduct")
    browser.find_element(By.ID, "search").send_keys("\ue007")          # Enter: the first match
    assert selected_ids(browser) == [f"gv-n{attention}"] and in_stage(browser, f"gv-n{attention}")
    assert browser.execute_script("return window.gradvizViewer.current().key") in graphs
    assert severe(browser) == []


# random graphs for layout.js, made in the page (a fixed seed): nodes in nested boxes, edges any way round (cycles,
# same-row edges, edges left out of the ranking); returns what breaks the layout's promises, as text
LAYOUT_FUZZ = """
var seed = 7, broken = [];
function rnd() { seed = (seed * 16807) % 2147483647; return seed / 2147483647; }
for (var trial = 0; trial < arguments[0]; trial++) {
  var n = 1 + Math.floor(rnd() * 40), nc = Math.floor(rnd() * 6), clusters = [], nodes = [], edges = [];
  for (var c = 0; c < nc; c++) {
    clusters.push(["c" + c, "gv-c" + c, c && rnd() < 0.5 ? "c" + Math.floor(rnd() * c) : null,
                   [["box " + c, 1, 10, ""]], "rounded", "#ffffff", "#888888"]);
  }
  for (var i = 0; i < n; i++) {
    nodes.push(["gv-n" + i, "n" + i, "op", rnd() < 0.2 ? "ellipse" : "box", "filled", "#eeeeee", "#555555", 1, 1,
                11, [["Op" + i, 1, 0, ""], ["(4)", 0, 9, ""]], "", nc && rnd() < 0.7 ? "c" + Math.floor(rnd() * nc)
                : null]);
  }
  for (var e = 0; e < n * 1.5; e++) {
    edges.push(["n" + Math.floor(rnd() * n), "n" + Math.floor(rnd() * n), "solid", "#555555", 1, "",
                rnd() < 0.9 ? 1 : 0, rnd() < 0.15 ? 0 : 1, "normal"]);
  }
  var g = window.gradvizLayout.layout({title: "t", subtitle: [], rankdir: rnd() < 0.5 ? "BT" : "TB", legend: [],
                                       nodes: nodes, edges: edges, clusters: clusters});
  var real = g.nodes.filter(function (v) { return !v.dummy; });
  real.forEach(function (u, p) {
    if (!isFinite(u.x) || !isFinite(u.y)) { broken.push(trial + ": " + u.id + " has no place"); }
    real.slice(p + 1).forEach(function (v) {
      if (Math.abs(u.x - v.x) < (u.w + v.w) / 2 && Math.abs(u.y - v.y) < (u.h + v.h) / 2) {
        broken.push(trial + ": " + u.id + " overlaps " + v.id);
      }
    });
  });
  g.clusters.forEach(function (c) {
    if (!isFinite(c.lo)) { return; }
    c.nodes.forEach(function (v) {
      if (v.x - v.w / 2 < c.x0 || v.x + v.w / 2 > c.x1 || v.y - v.h / 2 < c.y0 || v.y + v.h / 2 > c.y1) {
        broken.push(trial + ": " + v.id + " outside " + c.name);
      }
    });
    g.clusters.forEach(function (d) {
      if (d.index > c.index && d.parent === c.parent && isFinite(d.lo) &&
          c.x0 < d.x1 && d.x0 < c.x1 && c.y0 < d.y1 && d.y0 < c.y1) {
        broken.push(trial + ": " + c.name + " meets " + d.name);
      }
    });
  });
}
return broken.slice(0, 5).concat([broken.length + " broken"]);
"""


def test_the_page_layout_keeps_its_promises_on_random_graphs(browser, tmp_path):
    # nodes apart, each inside its module box, sibling boxes apart, on 400 random graphs with nested boxes and
    # cycles (sibling boxes in one order on every row, or their constraints go round and nodes overlap)
    open_report(browser, tmp_path, chained_models_doc())
    assert browser.execute_script(LAYOUT_FUZZ, 400) == ["0 broken"]
