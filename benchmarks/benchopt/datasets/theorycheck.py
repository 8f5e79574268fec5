"""benchopt dataset: one problem of :mod:`theorycheck.problems` at one rung of its size ladder."""

from benchopt import BaseDataset

from theorycheck import problems


class Dataset(BaseDataset):
    name = "theorycheck"
    requirements = ["pip:theorycheck"]
    parameters = {
        "problem": ["stage1-value/lsq:paper", "stage1-value/block:paper", "gram/factor:paper",
                    "attention-ab/block:paper", "attention-ab/identity:paper"],
        "level": [0, 1],
    }  # fmt: skip
    test_parameters = {"problem": ["attention-ab/block:paper"], "level": [0]}

    def get_data(self):
        p = problems.get(self.problem, level=self.level)
        return dict(problem=self.problem, size=p.size)
