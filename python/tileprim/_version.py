"""The package's version, beneath every module that reads it (the kernel cache is kept per
version)."""

__version__ = "0.1.0"
