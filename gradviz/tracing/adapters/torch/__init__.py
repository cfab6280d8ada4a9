"""The adapter that observes real PyTorch: the only code in gradviz that touches torch's internals."""
