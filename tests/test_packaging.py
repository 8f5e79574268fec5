"""Packaging: the wheel ships the math reference and ``py.typed``, the version has one source, the
citation file names the paper, and the sdist's manifest carries what its tests need.

The wheel is built once for this module (from a copy of the source tree, so that the checkout is
not written to) with ``pip wheel``, which builds in an isolated environment (setuptools >= 77 from
the package index, as any install of the checkout does).
"""

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import theorycheck

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PAPER_TITLE = "How Do Transformers Learn Topic Structure: Towards a Mechanistic Understanding"
#: What a wheel build reads; the tests and benchmarks are sdist-only.
BUILD_INPUTS = (
    "theorycheck",
    "_theorycheck_cli.py",
    "proofs_numeric",
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "MANIFEST.in",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("theorycheck-*.whl")
    with zipfile.ZipFile(whl) as zf:
        yield zf


def test_wheel_ships_spec_and_py_typed(wheel):
    names = set(wheel.namelist())
    assert {"theorycheck/SPEC.md", "theorycheck/py.typed", "theorycheck/__init__.py", "_theorycheck_cli.py"} <= names
    data = "theorycheck/problems/data/lda_wiki10.npy"  # the fitted-LDA problem model (package data)
    assert data in names and wheel.read(data) == (ROOT / data).read_bytes()
    assert wheel.read("theorycheck/SPEC.md") == (ROOT / "theorycheck" / "SPEC.md").read_bytes()
    assert any(n.startswith("proofs_numeric/") for n in names)  # `theorycheck verify` runs the claims
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_wheel_metadata(wheel):
    (meta_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    meta = wheel.read(meta_name).decode()
    assert re.search(rf"^Version: {re.escape(theorycheck.__version__)}$", meta, re.M)
    assert re.search(r"^License-Expression: MIT$", meta, re.M)
    assert re.search(r"^License-File: LICENSE$", meta, re.M)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel.namelist())
    assert (
        "theorycheck = _theorycheck_cli:main" in wheel.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    )


def test_version_has_one_source():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "theorycheck._version.__version__"}
    # a literal in a module without imports: setuptools reads it without importing the package
    source = (ROOT / "theorycheck" / "_version.py").read_text()
    (literal,) = re.findall(r'^__version__ = "([^"]+)"$', source, re.M)
    assert not [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert literal == theorycheck.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", theorycheck.__version__)


def test_version_equals_installed_metadata():
    try:
        installed = importlib.metadata.version("theorycheck")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("theorycheck is not installed (run from a checkout on PYTHONPATH)")
    assert installed == theorycheck.__version__


def test_package_data_and_license_configuration():
    setuptools_cfg = PYPROJECT["tool"]["setuptools"]
    assert {"SPEC.md", "py.typed"} <= set(setuptools_cfg["package-data"]["theorycheck"])
    assert (ROOT / "theorycheck" / "py.typed").is_file() and (ROOT / "theorycheck" / "SPEC.md").is_file()
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639: the expression only
    for pattern in project["license-files"]:
        assert list(ROOT.glob(pattern)), pattern
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    requires = PYPROJECT["build-system"]["requires"]
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77 for r in requires)


def test_dev_dependency_group():
    groups = PYPROJECT["dependency-groups"]
    included = {g["include-group"] for g in groups["dev"] if isinstance(g, dict)}
    assert {"test", "lint", "typing"} <= included <= set(groups)
    ruff_pins = [r for g in groups.values() for r in g if isinstance(r, str) and r.startswith("ruff")]
    assert ruff_pins == ["ruff==0.17.6"]
    assert "ruff==0.17.6" in PYPROJECT["project"]["optional-dependencies"]["test"]
    assert 'additional_dependencies: ["ruff==0.17.6"]' in (ROOT / ".pre-commit-config.yaml").read_text()


def test_sdist_manifest_carries_what_the_tests_need():
    manifest = (ROOT / "MANIFEST.in").read_text().split("\n")
    for line in ("graft tests", "graft benchmarks", "graft proofs_numeric"):
        assert line in manifest
    for name in ("CITATION.cff", "CHANGELOG.md", "README.md", "LICENSE"):
        assert (ROOT / name).is_file()
        assert any(ln.startswith("include ") and name in ln.split() for ln in manifest), name


def test_citation_names_the_paper_and_the_software():
    text = (ROOT / "CITATION.cff").read_text()
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load(text)
    assert cff["cff-version"] == "1.2.0"
    assert cff["type"] == "software" and cff["version"] == theorycheck.__version__
    assert cff["license"] == PYPROJECT["project"]["license"]
    paper = cff["preferred-citation"]
    assert paper["title"] == PAPER_TITLE and paper["year"] == 2023 and paper["volume"] == 202
    assert [(a["given-names"], a["family-names"]) for a in paper["authors"]] == [
        ("Yuchen", "Li"),
        ("Yuanzhi", "Li"),
        ("Andrej", "Risteski"),
    ]


def test_changelog_has_an_unreleased_section():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in text
    assert re.search(r"^## \[Unreleased\]$", text, re.M)
