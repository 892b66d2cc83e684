"""The package version (its own module, so that any layer can read it without import cycles)."""

__version__ = "0.1.0"
