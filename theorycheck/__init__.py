"""theorycheck: exact, certified numerical checks of how transformers learn topic structure.

Li, Li, Risteski, "How Do Transformers Learn Topic Structure: Towards a Mechanistic
Understanding", ICML 2023. The mathematics is specified in PAPER_SPEC.md.

>>> import theorycheck as tc
>>> tm = tc.TopicModel(T=10, v=10, tau=3)
>>> mk = tc.Masking(p_m=0.15, p_c=0.1, p_r=0.1)
"""

from . import population, solvers
from ._validate import TheorycheckWarning
from .config import Masking, TopicModel

__version__ = "0.1.0"

__all__ = ["TopicModel", "Masking", "TheorycheckWarning", "population", "solvers", "__version__"]

from . import landscape  # noqa: E402

__all__ += ["landscape"]
from . import stats  # noqa: E402

__all__ += ["stats"]
from . import dynamics  # noqa: E402

__all__ += ["dynamics"]
