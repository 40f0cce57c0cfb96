"""The package version, kept import-cheap."""

__version__ = "0.1.0"
