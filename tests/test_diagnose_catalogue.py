"""The catalogue: codes, severities, explain texts, the docs page, and the hint convention."""

from pathlib import Path

import pytest

import gradviz
from gradviz.diagnose import CODES, explain
from gradviz.diagnose.catalogue import EXPLANATIONS

DOC = Path(__file__).resolve().parent.parent / "docs" / "diagnostics.md"
REQUIRED = {"none-grad", "nonscalar-backward", "stale-version", "graph-freed", "retained-graph", "graph-cut",
            "unused-parameter", "no-requires-grad", "leaf-inplace", "volatile-deprecated", "nan-inf",
            "grad-accumulation", "exploding-grad", "vanishing-grad"}


def test_catalogue_has_every_required_code_with_a_severity():
    assert REQUIRED <= set(CODES)
    assert set(EXPLANATIONS) <= set(CODES)  # the others come from diagnose/rules/ modules
    for code, (severity, title) in CODES.items():
        assert code == code.lower() and " " not in code and "_" not in code
        assert severity in ("error", "warning", "info") and title
    assert CODES["exploding-grad"][0] == CODES["vanishing-grad"][0] == "info"
    assert CODES["nonscalar-backward"][0] == "error"


@pytest.mark.parametrize("code", sorted(CODES))
def test_explain_gives_example_and_fix(code):
    text = explain(code)
    assert text.startswith(f"{code} ({CODES[code][0]}): {CODES[code][1]}")
    assert "fix" in text.lower()
    assert "\n    " in text, "a minimal example, indented as code"
    assert gradviz.explain(code) == text


def test_unknown_code_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        explain("no-such-code")
    message = str(err.value)
    assert "`no-such-code`" in message
    assert all(code in message for code in CODES)


def test_docs_page_has_a_section_per_code():
    text = DOC.read_text()
    for code in CODES:
        assert f"\n## {code}\n" in text
    for cause in gradviz.diagnose.CAUSES:
        assert f"`{cause}`" in text


def test_explanations_say_what_the_seed_says():
    assert "`retain_graph=True` makes the error go away, but it is seldom the right fix" in explain("graph-freed")
    assert "two graphs bridged by hand" in explain("graph-cut")
    assert "total_loss += loss" in explain("retained-graph")
    assert "y1.backward(y1.grad)" in explain("none-grad")


def test_docs_page_is_generated_from_the_catalogue():
    from gradviz.diagnose.page import markdown

    assert DOC.read_text(encoding="utf-8") == markdown(), (
        "docs/diagnostics.md is out of date: run `python -m gradviz.diagnose.page docs/diagnostics.md`")


def test_generated_page_carries_every_explanation_and_fences_its_examples(tmp_path):
    from gradviz.diagnose.page import markdown, update_docs

    page = markdown()
    for code, (severity, title) in CODES.items():
        assert f"| [`{code}`](#{code}) | {severity} | {title} |" in page
        assert f"\n## {code}\n\n**{severity}** — {title}.\n" in page
    # an indented example becomes a fenced block; an indented list continuation stays text
    assert "```python\ny1 = model1(X)\ny2 = model2(y1)\n" in page
    assert "chains every iteration's graph to the\n    next one;" in page
    assert "**In the picture:** the Variable whose `.grad` was read" in page
    assert "a `severity` (`error`, `warning`, `info`)" in page
    target = tmp_path / "diagnostics.md"
    assert update_docs(target) is True and update_docs(target) is False
    assert target.read_text(encoding="utf-8") == page
