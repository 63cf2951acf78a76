"""The package's version, in one place for the build and the code."""

__version__ = "0.1.0"
