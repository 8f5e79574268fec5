"""Issue 36: the edge results of searches (nothing found within the range, against a consecutive scan: an
independent route to the same answer), and an output rule at an unusual user file."""

from __future__ import annotations

import os

import pytest

from theorycheck import Masking
from theorycheck._io import atomic_directory
from theorycheck.analysis.identity_phase import BETA_ZERO, beta_boundary, identity_beta_star


def test_identity_boundary_is_the_first_T_of_a_consecutive_scan_and_T_max_plus_one_when_none():
    """T = 10, v = 2, tau = 3 at p = .15/.05/.05 (SPEC §4.3(b): beta* > 0 up to T = 10): the bisection's T0 is the
    first T of the scan with beta* <= 0; below it (T_max = 5, 9, 10) nothing is found and the answer is T_max + 1,
    not T_max (which would claim a sign change at T_max)."""
    mk = Masking(0.15, 0.05, 0.05)
    v, tau = 2, 3
    scan = [T for T in range(tau, 14) if identity_beta_star(T, v, tau, mk) <= BETA_ZERO]
    assert scan and scan == list(range(scan[0], 14))  # one sign change on the scan
    T0 = scan[0]
    assert beta_boundary(v, tau, mk, T_max=13) == T0
    for T_max in (5, T0 - 2, T0 - 1):
        assert beta_boundary(v, tau, mk, T_max=T_max) == T_max + 1
    assert beta_boundary(v, tau, mk, T_max=T0) == T0


def test_merge_refuses_a_dangling_symlink_of_the_user(tmp_path):
    """Issue 36 ("output rules with unusual user files"): a symlink of the user's whose target does not exist
    (``exists()`` is False) at a name the report writes is refused like a file, and left as it was."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    link = out / "results.json"
    link.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(ValueError, match="results.json; nothing was written"):
        with atomic_directory(out, force=True) as tmp:
            (tmp / "results.json").write_text("{}")
    assert link.is_symlink() and os.readlink(link) == str(tmp_path / "nowhere.json")
    assert not (tmp_path / "nowhere.json").exists()
