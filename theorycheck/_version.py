"""The package version (one definition; importable by any module without importing the package)."""

__version__ = "0.1.0"
