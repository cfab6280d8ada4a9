"""The built-in ops, one small ``Function`` class each, grouped by family."""
