"""The stage-1 claims write their figures into the verification report."""

import json

from theorycheck.cli import main


def test_stage1_figures_in_report(tmp_path):
    out = tmp_path / "rep"
    code = main(["verify", "--only", "stage1.minnorm-block,stage1.gd-minnorm", "--out", str(out), "--quiet"])
    assert code == 0
    figs = sorted(p.name for p in (out / "figures").iterdir())
    assert figs == [
        "stage1.gd-minnorm.heatmap.png",
        "stage1.gd-minnorm.trajectory.png",
        "stage1.minnorm-block.entries.png",
        "stage1.minnorm-block.heatmap.png",
    ]
    for name in figs:
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert all(f"figures/{name}" in md for name in figs)
    rows = json.loads((out / "results.json").read_text())["claims"]
    assert {r["id"] for r in rows} == {"stage1.minnorm-block", "stage1.gd-minnorm"}
    assert all(r["passed"] for r in rows)
