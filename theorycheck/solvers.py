"""Optima of the population objectives, each returned as a :class:`SolveResult`.

Public face; each solver family lives in a small private module.
Every ``method=`` result carries residuals recomputed by our own numpy code.
"""

from ._result import STATUS_MESSAGES, SolveResult

__all__ = ["SolveResult", "STATUS_MESSAGES"]

from ._solve_attention import optimal_attention  # noqa: E402

__all__ += ["optimal_attention"]
