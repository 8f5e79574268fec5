"""Claims and the verification report (``theorycheck verify``).

- :mod:`.claims`: the claim data types (:class:`Claim`, :class:`ClaimResult`) and comparisons;
- :mod:`._writer`: running claims, the console table, ``report.md`` / ``results.json``;
- :mod:`.plots`: every figure the package draws (data in, Figure out, no mathematics).
"""

from ._writer import ReportRow, format_table, run_claims, select_claims, write_report
from .claims import SOURCES, Claim, ClaimResult, compare_all, compare_close, compare_greater

__all__ = [
    "Claim",
    "ClaimResult",
    "SOURCES",
    "compare_close",
    "compare_greater",
    "compare_all",
    "ReportRow",
    "run_claims",
    "select_claims",
    "format_table",
    "write_report",
]
