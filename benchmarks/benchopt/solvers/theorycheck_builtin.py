"""benchopt solver: theorycheck's built-in solvers (``theorycheck.problems.SOLVERS``) as one
parametrised benchopt solver (``-s "theorycheck[method=L-BFGS-B]"``).

The protocol maps one to one: our ``callback(x)`` stores ``x`` and calls benchopt's callback, which
evaluates the objective and says whether to go on (sampling strategy ``"callback"``). The solver sees the
problem through theorycheck's sealed oracle (``f``, ``grad``, ``hvp``, ``x0``, ...: what ``theorycheck
benchmark`` gives it), never the problem object with its certificate.
"""

import numpy as np
from benchopt import BaseSolver

from theorycheck import problems
from theorycheck.problems._oracle import Meter, ProblemInfo, make_oracle


class _Stop(Exception):
    pass


class Solver(BaseSolver):
    name = "theorycheck"
    requirements = ["pip:theorycheck"]
    sampling_strategy = "callback"
    parameters = {"method": ["L-BFGS-B", "Newton-CG", "gd", "Nelder-Mead", "closed-form"]}

    def skip(self, problem):
        ok, why = problems.SOLVERS[self.method].applies(ProblemInfo.of(problem))
        return (not ok), (why or None)

    def set_objective(self, problem):
        self.problem = make_oracle(problem, Meter(3600.0, 10**12, problem.n), problem.x0)
        self.x = problem.x0

    def run(self, cb):
        def callback(x):
            self.x = np.array(x, dtype=float, copy=True)
            if not cb():
                raise _Stop

        self.x = self.problem.x0
        if not cb():
            return
        try:
            self.x = np.asarray(problems.SOLVERS[self.method](self.problem, problems.Budget(3600.0), callback))
            cb()
        except _Stop:
            pass

    def get_result(self):
        return dict(x=self.x)
