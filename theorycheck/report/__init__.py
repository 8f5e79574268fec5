"""Claims and the verification report (``theorycheck verify``).

- :mod:`.claims`: the claim data types (:class:`Claim`, :class:`ClaimResult`), comparisons and
  :func:`over_seeds` (EMPIRICAL claims judged over several seeds);
- :mod:`.runner`: running the checks of a tier, in a process pool or any Executor, with the result cache;
- :mod:`.cache`: the result cache (keys over the claim's sources, parameters and versions);
- :mod:`.discovery`: where claims come from (built in, ``verify --claims PATH``, entry points ``theorycheck.claims``);
- ``._writer``: the console table, ``report.md`` / ``results.json``;
- :mod:`.plots`: every figure the package draws (data in, Figure out, no mathematics).
"""

from ._writer import format_table, select_claims, tier_summary, write_report
from .cache import CacheWarning, ResultCache, cache_dir
from .claims import SOURCES, TIERS, Claim, ClaimResult, compare_all, compare_close, compare_greater, over_seeds
from .discovery import ENTRY_POINT_GROUP, ClaimLoadError, Registry, collect, load_path
from .runner import ReportRow, decided_by, default_jobs, run_claims

__all__ = [
    "Claim",
    "ClaimResult",
    "SOURCES",
    "TIERS",
    "compare_close",
    "compare_greater",
    "compare_all",
    "over_seeds",
    "ReportRow",
    "decided_by",
    "ClaimLoadError",
    "Registry",
    "ENTRY_POINT_GROUP",
    "collect",
    "load_path",
    "run_claims",
    "default_jobs",
    "select_claims",
    "format_table",
    "tier_summary",
    "write_report",
    "ResultCache",
    "CacheWarning",
    "cache_dir",
]
