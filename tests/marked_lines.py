"""Where a test expects a report to point: the line of a test file marked by a comment, found by its text, so
the expectation moves with the line."""


def marked_line(path, text):
    """The number of the first line of file ``path`` containing ``text``; a line that asks for it (a ``_line_of``
    call, which quotes the same text) is not the marked line."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return number
    raise AssertionError(f"no line of {path} contains {text!r}")
