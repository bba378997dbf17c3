"""The documentation site builds with no warning (``mkdocs build --strict``), where the docs extra is installed.

Strict mode fails on what readers would meet as broken pages: a nav entry without its page, an API
reference whose docstring names a parameter the function does not have (griffe), a link MkDocs
cannot resolve. CI installs only the test extra, so there this skips; ``pip install ".[docs]"`` runs it.
"""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "site" / "twin-sessions" / "index.html").exists()
