"""Every ``SPEC §X.Y`` citation in the code, the claims, the tests and the README resolves to a
numbered section of ``theorycheck/SPEC.md`` (the repository's own math reference)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "theorycheck" / "SPEC.md"


def _sections() -> set[str]:
    heads = re.findall(r"^#+ §(\d+(?:\.\d+)?)", SPEC.read_text(), re.M)
    return set(heads)


def _citations():
    files = [
        ROOT / "README.md",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("theorycheck/**/*.py"),
        *ROOT.glob("proofs_numeric/*.py"),
    ]
    files += [*ROOT.glob("tests/*.py"), *ROOT.glob("benchmarks/*.py")]
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in re.finditer(r"\bSPEC\b[^\n]*", line):
                for sec in re.findall(r"§\s?(\d+(?:\.\d+)?)", m.group(0)):
                    yield f.relative_to(ROOT), n, sec


def test_spec_has_the_cited_sections():
    assert {"0", "1.1", "2.1", "4.0", "4.1", "4.2", "4.3", "4.5", "5.4", "6"} <= _sections()


def test_every_citation_resolves():
    known = _sections()
    cites = list(_citations())
    assert len(cites) > 100, "citations were not found: did the pattern change?"
    missing = [f"{f}:{n}: §{s}" for f, n, s in cites if s not in known]
    assert not missing, "citations without a section in SPEC.md:\n" + "\n".join(missing)


def test_no_citation_of_the_external_working_spec():
    offenders = [
        str(f.relative_to(ROOT))
        for f in [
            ROOT / "README.md",
            *ROOT.glob("docs/**/*.md"),
            *ROOT.glob("theorycheck/**/*.py"),
            *ROOT.glob("proofs_numeric/*.py"),
        ]
        if "PAPER_SPEC" in f.read_text()
    ]
    assert not offenders
