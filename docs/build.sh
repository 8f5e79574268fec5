#!/usr/bin/env bash
# Build the documentation site: every warning is an error, every cross-reference must resolve (-n: nitpicky;
# conf.py lists the few third-party types ignored, with reasons), every tutorial is executed.
# Usage: bash docs/build.sh [extra sphinx-build options]; output in docs/_build/html.
# Uses the python on PATH unless $PYTHON is set (CI: .venv/bin/python).
set -euo pipefail
PYTHON=${PYTHON:-python}
if [[ "$PYTHON" == */* ]]; then PYTHON=$(realpath -s "$PYTHON"); fi  # a relative path still works after the cd
cd "$(dirname "$0")"
rm -rf api/generated api/theorycheck*.rst  # autosummary stubs are regenerated from the facades' __all__
exec "$PYTHON" -m sphinx -W -n --keep-going -j "${DOCS_JOBS:-2}" -b html . _build/html "$@"
