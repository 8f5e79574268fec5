"""The package version: its one source (pyproject.toml reads it through ``[tool.setuptools.dynamic]``).

A literal in a module without imports, so that setuptools reads it without importing the package
and any module can import it while the package initialises.
"""

#: The package version.
__version__ = "0.1.0"
