"""``Flatten``: merge dims ``start_dim..end_dim`` (by default all but the batch dim); ``Unflatten`` splits one."""

from ..module import Module


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (which may hold one -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type " + type(unflattened_size).__name__)
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        d = self.dim % input.ndim
        return input.reshape(tuple(input.shape[:d]) + self.unflattened_size + tuple(input.shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
