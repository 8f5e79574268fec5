"""The report's figures drawn in worker processes (issue #39 item 5: about 12 s of drawing no longer added serially
to the end of ``theorycheck verify``): the same files, byte for byte, as drawn in this process; a claim that cannot be
pickled is drawn here."""

from __future__ import annotations

from proofs_numeric import CLAIMS
from theorycheck.report import Claim, ClaimResult, _writer, run_claims, write_report

CHEAP_WITH_PLOTS = ("attention.kstar", "stage1.minnorm-block", "stage1.gd-minnorm", "embedding.min-norm-gram")


def _lambda_claim() -> Claim:
    def plot(results):
        plt = _writer.mpl("matplotlib.pyplot")
        fig, ax = plt.subplots()
        ax.plot([0, 1], [results[0].measured, 1.0])
        return {"line": fig}

    return Claim(
        "zz.local-plot", "s", "DERIVED", "t", lambda p, inject=None: ClaimResult(True, 0.0, 0.5, 1.0), ({},),
        lambda p: {}, plot=plot,
    )  # fmt: skip


def test_figures_drawn_in_workers_are_the_same_bytes(tmp_path, monkeypatch):
    claims = [c for c in CLAIMS if c.id in CHEAP_WITH_PLOTS] + [_lambda_claim()]
    assert len(claims) == len(CHEAP_WITH_PLOTS) + 1 and len(CHEAP_WITH_PLOTS) >= _writer.PARALLEL_FIGURES_MIN
    rows = run_claims(claims, progress=False)
    pools = []

    def process_pool(jobs):
        pools.append(jobs)
        return real_pool(jobs)

    real_pool = _writer.process_pool
    monkeypatch.setattr(_writer, "process_pool", process_pool)
    serial = write_report(rows, tmp_path / "serial", jobs=1) / "figures"
    assert pools == []
    parallel = write_report(rows, tmp_path / "parallel", jobs=2) / "figures"
    assert pools == [2]  # the four picklable claims went to two workers
    names = sorted(p.name for p in serial.iterdir())
    assert names == sorted(p.name for p in parallel.iterdir())
    assert "zz.local-plot.line.png" in names and len(names) >= len(claims)
    for name in names:
        assert (serial / name).read_bytes() == (parallel / name).read_bytes(), name
    md = (tmp_path / "parallel" / "report.md").read_text()
    assert all(f"figures/{name}" in md for name in names)
