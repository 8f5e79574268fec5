"""``theorycheck bench``: run the side-by-side ratio benchmarks ``benchmarks/bench_*.py`` of a source checkout,
each in its own process, their JSON results into ``--out`` (marked as theorycheck's)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from .._io import prepare_output_dir, read_marker, write_marker
from .common import command


def _benchmarks_dir(path) -> Path:
    if path:
        folder = Path(path)
        if not folder.is_dir():
            raise ValueError(f"--dir: benchmark folder {str(folder)!r} not found")
        return folder
    folder = Path(__file__).resolve().parents[2] / "benchmarks"  # beside the package in a source tree
    if not folder.is_dir():
        raise ValueError(
            "bench runs the developer benchmarks benchmarks/bench_*.py of a source tree (the sdist "
            "theorycheck-<version>.tar.gz has them): unpack it and pass --dir PATH/benchmarks; the solver "
            "benchmark of an installed theorycheck is 'theorycheck benchmark'"
        )
    return folder


def _call(cmd, **kw) -> int:
    """Run one benchmark script and return its exit code. It runs in its own session, so that a Ctrl-C in the
    terminal reaches this process only: the script is then terminated quietly (no traceback of its own) and
    the ``KeyboardInterrupt`` goes on to the one-line report of :func:`theorycheck.cli.common.run_command`."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    try:
        return proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def run(args) -> int:
    folder = _benchmarks_dir(args.dir)
    known = {f.stem[len("bench_") :]: f for f in sorted(folder.glob("bench_*.py"))}
    if not known:  # an empty folder, or the wrong one: nothing would run, and exit 0 would say all went well
        raise ValueError(
            f"--dir: {str(folder)!r} holds no benchmark scripts (bench_*.py); benchmarks live in a source checkout "
            "under benchmarks/"
        )
    if args.list:
        for name in known:
            print(name)
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {', '.join(known)}")
    out = prepare_output_dir(args.out, force=args.force, flag="--out") if args.out is not None else None
    env = dict(os.environ, **({"THEORYCHECK_BENCH_OUT": str(out)} if out is not None else {}))
    start, code = time.time(), 0
    for name in args.names or list(known):
        print(f"==> bench {name}", flush=True)
        rc = _call([sys.executable, str(known[name]), *shlex.split(args.extra)], cwd=folder, env=env)
        if rc:
            print(f"bench {name} exited with code {rc}", file=sys.stderr)
            code = 1
    if out is not None and out.is_dir():
        marker = read_marker(out)
        new = {p.name for p in out.glob("*.json") if p.name != ".theorycheck.json" and p.stat().st_mtime >= start - 1}
        write_marker(out, command=command(args), files=sorted(new | set(marker["files"] if marker else ())))
    return code
