"""benchopt objective: theorycheck's certified problems (issue #23; SPEC §4.0-§4.3).

``evaluate_result(x)`` returns ``value = f(x)`` computed by :mod:`theorycheck.problems`, the exact
suboptimality ``f(x) - f*`` against the *certified* optimum (benchopt's own suboptimality uses the
best value any solver found), the certificate's gap, and for 2-d problems the iterate itself
(``alpha``, ``beta``) so that the recorded values can be re-evaluated outside benchopt.
"""

from benchopt import BaseObjective

from theorycheck import problems


class Objective(BaseObjective):
    # no ``url``: theorycheck has no public repository address yet (benchopt's url is optional)
    name = "theorycheck"
    min_benchopt_version = "1.5"
    requirements = ["pip:theorycheck"]
    parameters = {}
    sampling_strategy = "callback"

    def set_data(self, problem, size):
        self.problem = problems.get(problem, **size)

    def get_objective(self):
        return dict(problem=self.problem)

    def evaluate_result(self, x):
        p = self.problem
        out = dict(
            value=p.f(x),
            suboptimality=p.suboptimality(x),
            f_star=p.f_star,
            certificate_gap=p.certificate.gap,
            violation=p.violation(x),
        )
        if p.n == 2:
            out.update(alpha=float(x[0]), beta=float(x[1]))
        return out

    def get_one_result(self):
        return dict(x=self.problem.x0)
