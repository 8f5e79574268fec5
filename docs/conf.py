"""Sphinx configuration of theorycheck's documentation site (build: ``docs/build.sh``; see docs/contributing.md)."""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

import theorycheck  # noqa: E402

project = "theorycheck"
author = "the theorycheck developers"
copyright = "the theorycheck developers (MIT licence)"
release = theorycheck.__version__
version = release

extensions = [
    "myst_nb",  # MyST Markdown pages and executed MyST-Markdown notebooks (the tutorials); includes myst_parser
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.mathjax",
    "sphinx_copybutton",
    "theorycheck_docs",  # docs/_ext: SPEC page and its labels, citation links, API pages, measured figures
    "theorycheck_pages",  # docs/_ext: the command-line reference (from the parsers) and the BibTeX (CITATION.cff)
    "theorycheck_examples",  # docs/_ext: every docstring example and guide example run, their outputs checked
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints", "_ext", "_templates"]
templates_path = ["_templates"]

# MyST: $...$ and $$...$$ math, amsmath environments, ::: fences, {ref} labels of the SPEC page.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_dmath_double_inline = True
suppress_warnings = ["myst.header"]  # SPEC.md is hand-laid: a subsection may follow a top-level heading directly

# Tutorials: executed at every build, in order, each in its own kernel; an error fails the build.
nb_execution_mode = "force"
nb_execution_timeout = 240
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# API reference: autosummary pages for the names in each facade's __all__ (docs/_ext/theorycheck_docs.py).
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"member-order": "bysource"}
# Types in the signatures (from the annotations), short names (``ArrayLike``, not ``numpy.typing.ArrayLike``), one
# parameter a line when a signature is long. numpydoc's Parameters sections state the same types in words, with
# their ranges (tests/test_docstrings.py checks that the two agree). ``ArrayLike`` stays one name instead of the
# union numpy defines it as (every module annotating with it has ``from __future__ import annotations``).
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_type_aliases = {"ArrayLike": "~numpy.typing.ArrayLike"}  # "~": shown as ``ArrayLike``
python_use_unqualified_type_names = True
python_maximum_signature_line_length = 80
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"theorycheck {release}"
html_copy_source = False
html_show_sourcelink = False
# Search results quote the matching passage: searchtools.js fetches each result's page and reads its main content
# (furo's ``<article role="main">``), so snippets need no copied sources (tests/test_docs.py checks the build).
html_show_search_summary = True
html_static_path = ["_static"]
nb_execution_in_temp = True  # tutorials write their files (reports, claims) into a temporary folder

# Strict cross-references (docs/build.sh runs with -n): every Python reference must resolve. Ignored here: types of
# other projects only, each with its reason. The build is offline (no intersphinx inventories), so the standard
# library's classes have no page to link to.
nitpick_ignore = [
    # The standard library's types named by annotations: no inventory to link to offline.
    *(
        ("py:class", name)
        for name in (
            "collections.abc.Callable",
            "collections.abc.Iterable",
            "collections.abc.Sequence",
            "concurrent.futures.Executor",
            "concurrent.futures._base.Executor",
            "os.PathLike",
            "pathlib.Path",
            "Path",
        )
    ),
    # numpy's types named by annotations (numpy's inventory is online only). ``ArrayLike`` is a type alias
    # (autodoc_type_aliases above); the random generators are named at their defining module.
    *(
        ("py:class", name)
        for name in (
            "numpy.ndarray",
            "np.ndarray",
            "numpy.dtype",
            "numpy.typing.ArrayLike",
            "ArrayLike",  # the same, in the signatures of @overload variants (autodoc writes them as in the source)
            "numpy.random.Generator",
            "numpy.random._generator.Generator",
            "numpy.random.SeedSequence",
            "numpy.random.bit_generator.SeedSequence",
        )
    ),
    # hypothesis (the ``test`` extra): the strategies of theorycheck.strategies return its SearchStrategy.
    ("py:class", "hypothesis.strategies.SearchStrategy"),
    # the private base of realdata.MissingExtraError (theorycheck._validate), named by show-inheritance
    ("py:class", "MissingExtra"),
]
