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
"""

from . import analysis, models, population, solvers
from ._validate import TheorycheckWarning
from .analysis import dynamics, landscape, stats
from .models import GeneralTopicModel, Masking, TopicModel

#: The version: its one source (pyproject.toml reads it, ``[tool.setuptools.dynamic]``). A literal, so that
#: setuptools reads it without importing the package.
__version__ = "0.1.0"

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
