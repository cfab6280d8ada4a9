"""Which drawn element ids the page finds in a picture's text (``html.drawn_ids``): the details it embeds."""

from gradviz.rendering.html import drawn_ids


def test_only_ids_that_start_a_word_count_as_drawn():
    text = 'xgv-n1 <g id="gv-n2"> _gv-v3 (gv&#45;e4) égv-n5 gv-v6,gv&#45;n70'
    assert drawn_ids({"g0": text, "skipped": None}) == {"n": {2, 70}, "v": {6}, "e": {4}}
