"""What a ``snapshot(...)`` call was given, the same for every engine's snapshot: values, or lists and tuples of
them, nested."""


def flattened(items):
    """The values in ``items``, depth first, with every list and tuple opened."""
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from flattened(item)
        else:
            yield item
