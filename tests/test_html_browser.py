"""report.html in a real browser: headless Chromium shows the graph, clicking a node shows its details, clicking a
diagnostic highlights its nodes, and the console stays free of errors."""

import os
import shutil
import tempfile

import pytest

from gradviz.rendering.html import html_report
from gradviz.rendering.layout import dot_available
from gradviz.rendering.synthetic import chained_models_doc, hostile_doc

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
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def open_report(browser, tmp_path, doc):
    path = tmp_path / "report.html"
    path.write_text(html_report(doc), encoding="utf-8")
    browser.get(path.as_uri())
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
    assert browser.execute_script("return document.scripts.length") == 2
    node = browser.find_element(By.ID, "gv-n0")
    node.click()
    text = browser.find_element(By.ID, "inspector-body").text
    assert 'w"</script><script>alert(1)</script>&amp;' in text
    assert severe(browser) == []
