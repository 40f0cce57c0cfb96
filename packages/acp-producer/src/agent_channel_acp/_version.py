"""The package version, kept import-cheap."""

__version__ = "0.2.0"
