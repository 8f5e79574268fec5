"""theorycheck: exact, certified numerical checks of how transformers learn topic structure.

Li, Li, Risteski, "How Do Transformers Learn Topic Structure: Towards a Mechanistic
Understanding", ICML 2023. The mathematics is specified in ``theorycheck/SPEC.md`` (package data;
``theorycheck spec SECTION`` prints a section).

>>> import theorycheck as tc
>>> tm = tc.TopicModel(T=10, v=10, tau=3)
>>> mk = tc.Masking(p_m=0.15, p_c=0.1, p_r=0.1)

Subpackages: :mod:`~theorycheck.population` (N -> inf objects), :mod:`~theorycheck.solvers`
(optima), :mod:`~theorycheck.nn` (the transparent transformer and its trainer),
:mod:`~theorycheck.analysis` (statistics, dynamics, landscapes), :mod:`~theorycheck.report`
(claims and the verification report), :mod:`~theorycheck.realdata` (optional ``nlp`` extra).

The facade is lazy (PEP 562, as scipy's): ``import theorycheck`` imports nothing but the version, and
each name below is imported on first access (``tc.population`` imports the population subpackage and
its Numba kernels then). So the console command answers ``--help`` and ``--version`` without loading
numpy, scipy or Numba, and a program pays only for the subpackages it uses. The table ``_LAZY`` is the
facade's whole content (``theorycheck._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_facade
from ._version import __version__

if TYPE_CHECKING:  # the names the facade offers, for type checkers and IDEs (not executed)
    from . import analysis, models, population, solvers
    from . import diagnostics as diagnostics  # the subpackages below are served too (not in __all__)
    from . import nn as nn
    from . import problems as problems
    from . import realdata as realdata
    from . import report as report
    from . import sampling as sampling
    from . import spec as spec
    from . import strategies as strategies
    from ._validate import TheorycheckWarning
    from .analysis import dynamics, landscape, stats
    from .models import GeneralTopicModel, Masking, TopicModel

__all__ = [
    "TopicModel",
    "Masking",
    "GeneralTopicModel",
    "TheorycheckWarning",
    "models",
    "population",
    "solvers",
    "analysis",
    "stats",
    "dynamics",
    "landscape",
    "__version__",
]

#: Facade name -> (module, attribute): ``tc.NAME`` is ``getattr(import_module(module), attribute)``, or the module
#: itself when the attribute is ``None``, imported on first access (:mod:`theorycheck._lazy`).
_LAZY: dict[str, tuple[str, str | None]] = {
    "TopicModel": (".models", "TopicModel"),
    "Masking": (".models", "Masking"),
    "GeneralTopicModel": (".models", "GeneralTopicModel"),
    "TheorycheckWarning": ("._validate", "TheorycheckWarning"),
    "stats": (".analysis", "stats"),
    "dynamics": (".analysis", "dynamics"),
    "landscape": (".analysis", "landscape"),
    "models": (".models", None),
    "population": (".population", None),
    "sampling": (".sampling", None),
    "solvers": (".solvers", None),
    "problems": (".problems", None),
    "analysis": (".analysis", None),
    "nn": (".nn", None),
    "report": (".report", None),
    "realdata": (".realdata", None),
    "strategies": (".strategies", None),
    "diagnostics": (".diagnostics", None),
    "spec": (".spec", None),
}

__getattr__, __dir__ = lazy_facade(__name__, _LAZY)
