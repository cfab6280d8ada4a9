"""Strings in a document (names, paths, messages, source lines) are data from the traced script: shown on a
terminal, they must not act on it. ``terminal_safe`` is the one escaping every terminal reader applies."""

import re

# C0 and C1 controls (ESC starts a terminal sequence; in some terminals so does \x9b), DEL, the bidirectional
# overrides that reorder what is shown, and lone surrogates (a non-UTF-8 file name), which no terminal can encode.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match):
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def terminal_safe(text):
    """``text`` with every control character written as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``…), so
    it prints as one inert line; None stays None, anything else is ``str()``-ed."""
    if text is None:
        return None
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, text)
