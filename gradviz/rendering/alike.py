"""One layout for views drawn alike: a ResNet's 48 blocks, an MLP's Linear layers, a transformer's layers.

Two views whose DOT sources differ only in their digits (node ids, module indices, shapes) are laid out alike by
``dot``: same statements in the same order, and a digit is as wide as any other in Helvetica, so every label has
the same size. The second view's SVG is then the first's with the first's words (``n117``, ``layers.0``,
``(64, 256)``'s numbers) replaced by the second's, in the places ``dot`` copies text from the source: element
ids, texts, tooltips, titles and comments, never coordinates. When a word of the first stands for two different
words of the second, the view is laid out on its own.
"""

import re

_DIGIT = re.compile(r"\d")
_NUMBER = re.compile(r"[\d.]+")
_WORD = re.compile(r"(?<!&#)(?<![\w.])[\w.]*\d[\w.]*")  # a dotted word holding a digit (``layers.2.norm1``), not
# an entity's number (``&#45;``)
# where dot's SVG holds text from the source: ids, tooltips, texts, titles, comments
_COPIED = re.compile(r'(?<= id=")[^"]*|(?<=xlink:title=")[^"]*|(?<=>)[^<]*(?=</text>)|(?<=<title>)[^<]*'
                     r"|(?<=<!-- ).*?(?= -->)")


def key(source):
    """What two sources laid out alike share: the source with every digit a 0."""
    return _DIGIT.sub("0", source)


def words(first, second):
    """{word of ``first``: word of ``second``} for sources with the same ``key``, or None when a word of the
    first stands for two different words of the second."""
    out = {}
    for mine, theirs in zip(_WORD.findall(first), _WORD.findall(second)):
        if out.setdefault(mine, theirs) != theirs:
            return None
    return out


def translated(svg, first, second):
    """The SVG of ``second`` from the SVG of ``first`` (sources with the same ``key``), or None when their
    words do not map one way (``words``)."""
    mapping = words(first, second)
    if mapping is None:
        return None
    changed = {mine: theirs for mine, theirs in mapping.items() if mine != theirs}
    if not changed:
        return svg
    if not any(_NUMBER.fullmatch(word) for word in changed):
        # no changed word can be (part of) a coordinate, which is digits and dots only: one pass over the whole
        # SVG for just those words, three times faster than word by word in each copied place
        words_alike = re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(word) for word in
                                                           sorted(changed, key=len, reverse=True)) + r")(?![\w.])")
        return words_alike.sub(lambda word: changed[word.group(0)], svg)
    return _COPIED.sub(lambda region: _WORD.sub(lambda word: changed.get(word.group(0), word.group(0)),
                                                region.group(0)), svg)
