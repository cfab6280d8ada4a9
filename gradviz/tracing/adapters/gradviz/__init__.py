"""The adapter that observes gradviz's own engine, on full and light iterations."""
