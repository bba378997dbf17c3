"""README.md and docs/*.md: every ``python``, ``bash`` and ``console`` example runs (issue 23).

Each page's blocks run in order in one fresh interpreter on the simulated GPU, in a temporary
folder that looks like a checkout (tests/docs_pages.py says how blocks are chosen and run, and
the ``<!-- skip: reason -->`` marker a page puts before a block that cannot run here). A
``DeprecationWarning`` from the pages' own code or from ``powermodels`` fails the page. Pages
run two at a time, the slow ones first: 96-123 s wall and ~120 s of CPU on the shared 2-core
machine (load 2-3), recordings.md alone ~48 s of CPU; with ``-m 'not slow'`` ~68 s of CPU.
Under pytest-xdist (the README's ``-n auto``) each page runs in its own test on the worker xdist
gives it (``--dist loadgroup`` is not used: with pytest 9.2 it stops grouping, pytest-xdist#1386).

To see what a page's examples print, or (``--diff``) how it differs from the output the page
shows (to regenerate it)::

    PYTHONPATH=src python tests/docs_pages.py [--diff] docs/PAGE.md
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from docs_pages import (PAGES, REPO, RUNNABLE, SHARED_DATA, blocks, console_commands, prepare_folder, python_source,
                        session_statements)

#: pages whose examples take long on 2 cores, with the reason (only shrinks)
SLOW: dict[str, str] = {
    "docs/recordings.md": "five calibrate runs (a simulated natural-DVFS recording, four real recordings refitted): "
                          "~48 s of CPU, 73 s wall alone on the shared 2-core machine",
}
#: pages run side by side (each is one mostly single-threaded interpreter; 2 cores)
WORKERS = min(2, os.cpu_count() or 1)

RUN_PAGES = [page for page in PAGES if any(block.runs for block in blocks(page))]


def _page_param(page):
    name = str(page.relative_to(REPO))
    marks = [pytest.mark.slow] if name in SLOW else []
    return pytest.param(page, id=name, marks=marks)


def _lacks_shared_data(page: Path) -> bool:
    """The page's examples read ../shared/data (public data, not in the repository) and it is absent."""
    return not SHARED_DATA.is_dir() and any("../shared/" in b.code for b in blocks(page) if b.runs)


def _run_page(page: Path, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "tests" / "docs_pages.py"), str(page), str(folder)],
                          cwd=folder, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=600, check=False)


class _OnDemand(dict):
    """page -> a finished future of its run, the page run when first asked for."""

    def __init__(self, tmp_path_factory):
        super().__init__()
        self._tmp = tmp_path_factory

    def __missing__(self, page):
        future = Future()
        future.set_result(_run_page(page, prepare_folder(self._tmp.mktemp(page.stem), SHARED_DATA.parent)))
        self[page] = future
        return future


@pytest.fixture(scope="module")
def page_runs(request, tmp_path_factory):
    """Every selected page started at once on ``WORKERS`` threads; page -> future of its run.

    Under pytest-xdist (the README's ``-n auto``) each worker collects every test but runs only
    some, so starting every page here would run each page on every worker: a page then runs
    in its own test instead, and the workers are the parallelism.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        yield _OnDemand(tmp_path_factory)
        return
    selected = [item.callspec.params["page"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_page_examples_run"
                and not _lacks_shared_data(item.callspec.params["page"])]
    selected.sort(key=lambda page: str(page.relative_to(REPO)) not in SLOW)  # the longest start first
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {page: pool.submit(_run_page, page, prepare_folder(
            tmp_path_factory.mktemp(page.stem), SHARED_DATA.parent)) for page in selected}
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("page", [_page_param(page) for page in RUN_PAGES])
def test_page_examples_run(page, page_runs):
    if _lacks_shared_data(page):
        pytest.skip(f"{page.name} reads ../shared/data, absent here ({SHARED_DATA})")
    proc = page_runs[page].result()
    assert proc.returncode == 0, f"{page.relative_to(REPO)}: an example failed\n{proc.stdout[-6000:]}"


#: pages whose blocks may be skipped only for these reasons (a skip marker's reason starts with one):
#: their promise is "every output is real, from this checkout on the simulated GPU"
ONLY_SKIPPED_FOR: dict[str, tuple[str, ...]] = {
    "docs/guarantees.md": ("needs a GPU", "runs part of the test suite"),
}


def test_pages_that_promise_real_output_skip_only_what_cannot_run_here():
    """docs/guarantees.md skipped 7 blocks for files "made off the page"; a reader could not rerun them."""
    for name, reasons in ONLY_SKIPPED_FOR.items():
        skipped = [block for block in blocks(REPO / name) if block.skip is not None]
        bad = [f"{block.where}: {block.skip}" for block in skipped if not block.skip.startswith(reasons)]
        assert not bad, f"make these blocks run (set up what they need on the page), or skip only for {reasons}: {bad}"


def test_every_skip_says_why_and_the_readme_runs_something():
    for page in PAGES:
        for block in blocks(page):
            if block.skip is not None:
                assert block.skip.strip(), f"{block.where}: a skip marker needs a reason"
    readme = [b for b in blocks(REPO / "README.md") if b.runs]
    assert {b.lang for b in readme} >= {"python", "console"}


def test_blocks_are_read_as_a_reader_reads_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- skip: needs a GPU -->\n```python\nimport cupy\n```\n\n"
                    "```console\n$ cat spec.json\n{\"a\": 1}\n$ powermodels measure \\\n"
                    "    --kernel fp32\nfp32 ...\n```\n\n```pycon\n>>> x = 1\n```\n\n"
                    "```python\n>>> x = 2\n>>> print(x)\n2\n```\n", encoding="utf-8")
    skipped, console, other, session = blocks(page)
    assert skipped.skip == "needs a GPU" and not skipped.runs and skipped.line == 5
    assert console_commands(console) == [("cat spec.json", '{"a": 1}'),
                                         ("powermodels measure \\\n    --kernel fp32", "fp32 ...")]
    assert other.lang not in RUNNABLE
    source = python_source(session)
    assert source.splitlines()[session.line - 1:] == ["x = 2", "print(x)", ""]
    statements = session_statements(session)  # run one at a time, as the interpreter does
    assert [st.strip() for st in statements] == ["x = 2", "print(x)"]
    assert statements[1].count("\n") == session.line + 1  # on its own markdown line


def test_an_old_import_path_fails_the_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nimport powermodels.harness.runner\n```\n", encoding="utf-8")
    proc = _run_page(page, prepare_folder(tmp_path / "run", None))
    assert proc.returncode == 1
    assert "DeprecationWarning: powermodels.harness.runner moved to powermodels.measuring.runner" in proc.stdout


def test_every_shell_session_is_a_console_block():
    # a block of "$ " prompts that is not ```console would escape this test silently
    untagged = [block.where for page in PAGES for block in blocks(page)
                if block.lang not in RUNNABLE and block.code.lstrip().startswith("$ ")]
    assert not untagged, ("shell sessions are ```console blocks (run by this test, or marked "
                          f"<!-- skip: why --> before the fence): {untagged}")


#: top-level modules of ``powermodels`` that docs/api.md leaves out, with the reason (only shrinks)
NOT_ON_THE_API_PAGE: dict[str, str] = {
    "cli": "the command line: the topic pages and `powermodels COMMAND --help` describe it",
    "cli_options": "argparse helpers of the command line",
    "commands": "the command line's sub-commands (thin callers of the workflows)",
    "deprecation": "warnings for renamed parameters, used inside the package",
    "harness": "deprecated aliases of measuring/workloads/campaigns (issue 23)",
    "files": "atomic, durable file writes used inside the package",
    "reporting": "plain-text table helpers of the CLI and benchmarks",
    "utils": "estimator discovery for the common sklearn checks (tests)",
    "validation": "input checks behind the CLI's and the specs' one-line errors",
    "microbench": "the microbenchmark sources and profiling behind calibrate-instructions "
                  "(docs/instruction-energy.md)",
}
#: packages without ``__all__`` whose page entries are chosen submodules, with the reason
SOME_SUBMODULES: dict[str, str] = {
    "measuring": "users reach runner, sampler and counter internals through powermodels.api, the meter "
                 "and the protocols; the page shows those and measuring.program",
    "integrations": "each integration is listed by itself",
}


def _moved(sub) -> bool:
    """Whether a submodule found by pkgutil is only a deprecated alias of a moved module."""
    path = Path(sub.module_finder.path) / f"{sub.name}.py"
    return path.is_file() and "moved_module(" in path.read_text(encoding="utf-8")


def test_the_api_page_covers_every_public_module():
    """recording, thermal, twin and the workflows had no entry on the API page."""
    import importlib
    import pkgutil

    import powermodels

    page = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    entries = set(re.findall(r"^::: (powermodels(?:\.\w+)*)\s*$", page, flags=re.M))
    missing = []
    for module in pkgutil.iter_modules(powermodels.__path__):
        name = f"powermodels.{module.name}"
        if module.name.startswith("_") or module.name in NOT_ON_THE_API_PAGE:
            continue
        if not any(e == name or e.startswith(name + ".") for e in entries):
            missing.append(name)
        elif module.ispkg and module.name not in SOME_SUBMODULES \
                and not hasattr(importlib.import_module(name), "__all__"):
            # the package's own entry shows only its docstring: each submodule needs its own
            package = importlib.import_module(name)
            # a deprecated path (``deprecation.moved_module``) is documented at its new home
            missing += [f"{name}.{sub.name}" for sub in pkgutil.iter_modules(package.__path__)
                        if not sub.name.startswith("_") and f"{name}.{sub.name}" not in entries
                        and not _moved(sub)]
    assert not missing, f"docs/api.md has no `::: MODULE` entry for {missing} (or say why in NOT_ON_THE_API_PAGE)"
    assert not set(NOT_ON_THE_API_PAGE) - {m.name for m in pkgutil.iter_modules(powermodels.__path__)}
