"""The code examples of README.md and docs/*.md: find them and run them as a reader would.

Which fenced blocks run
-----------------------
``python``
    Python; each page's blocks run in order in **one** namespace (a later block may use an
    earlier block's names). A block written as an interactive session (``>>>`` / ``...``
    prompts) runs its prompted statements one at a time as the interpreter does (a bare
    expression's value is printed); the lines without a prompt are its shown output.
``bash`` / ``sh``
    A shell script (``bash -e -o pipefail``).
``console``
    A shell session: each ``$ `` line (with its ``\\`` continuation lines) is a command; the
    lines after it are its shown output. ``$ cat FILE`` writes FILE with the shown output
    first (that is how a page shows an input file; a reader writes it as shown). A command
    must exit 0, unless its shown output has an ``error:`` line: then it must print one.

Blocks of any other language (``text``, ``json``, ``toml``, none) are shown output or file
contents and do not run. A block that cannot run here (it needs a real GPU, the network, or is
a sketch) says so in the markdown, on the line before its fence::

    <!-- skip: needs a GPU -->

Where they run
--------------
Each page runs in a fresh interpreter (``python tests/docs_pages.py [--diff] PAGE [FOLDER]``,
which prints what every block printed, or with ``--diff`` how that differs from the output the
page shows: use it to regenerate a page's shown output) in a temporary
folder that looks like a checkout: ``kernels/``, ``datasets/``, ``benchmarks/``, ``src/`` and
``tests/`` link to the repository's own (read-only use), and ``../shared`` to the
shared data, so paths written "from the repository root" work and every file the example
writes lands in the temporary folder; ``tests/`` is on ``sys.path`` (the fake NVML of
``tests/fake_pynvml.py``, as the pages say). The simulated GPU answers ``device="auto"``. A
``DeprecationWarning`` raised at the page's own code or inside ``powermodels`` is an error:
the pages use the current import paths and parameter names.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import resource
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the same folder as conftest.SHARED_DATA: imported by name, "conftest" can be tests/devices/conftest.py
SHARED_DATA = Path(os.environ.get("POWERMODELS_SHARED_DATA", REPO.parent / "shared" / "data"))
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUNNABLE = {"python", "bash", "sh", "console"}
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^`]*$")
_SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.+?)\s*-->\s*$")
#: repository folders an example may read (linked into the example's folder)
LINKED = ("kernels", "datasets", "benchmarks", "src", "tests")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # 1-based line of the first code line (after the fence)
    lang: str
    code: str
    skip: str | None = None

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in RUNNABLE and self.skip is None


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order, with its skip marker's reason (or None)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        body = [line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1:end]]
        before = i - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        skip = _SKIP.match(lines[before]) if before >= 0 else None
        found.append(Block(page, i + 2, match["lang"].lower(), "\n".join(body),
                           skip["reason"] if skip else None))
        i = end + 1
    return found


def interactive(block: Block) -> bool:
    """A Python block written as an interactive session (``>>>`` prompts)."""
    return any(line.startswith(">>>") for line in block.code.splitlines())


def python_source(block: Block) -> str:
    """The block's code, padded so that tracebacks give the markdown file's own line numbers."""
    code_lines = block.code.splitlines()
    if interactive(block):
        code_lines = [line[4:] if line[:4] in (">>> ", "... ") else "" for line in code_lines]
    return "\n" * (block.line - 1) + "\n".join(code_lines) + "\n"


def session_statements(block: Block) -> list[str]:
    """An interactive block's statements (a ``>>>`` line and its ``...`` lines), each padded to its
    markdown line, to run one at a time as the interpreter does (an expression's value is shown)."""
    statements: list[tuple[int, list[str]]] = []
    for number, line in enumerate(block.code.splitlines(), start=block.line):
        if line[:4] == ">>> " or line.rstrip() == ">>>":
            statements.append((number, [line[4:]]))
        elif (line[:4] == "... " or line.rstrip() == "...") and statements:
            statements[-1][1].append(line[4:])
    return ["\n" * (number - 1) + "\n".join(lines) + "\n" for number, lines in statements]


def console_commands(block: Block) -> list[tuple[str, str]]:
    """``(command, shown output)`` for each ``$ `` prompt of a console block."""
    commands: list[list[str]] = []
    outputs: list[list[str]] = []
    continuing = False
    for line in block.code.splitlines():
        if continuing:
            commands[-1].append(line)
        elif line.startswith("$ "):
            commands.append([line[2:]])
            outputs.append([])
        elif commands:
            outputs[-1].append(line)
        continuing = bool(commands) and line.rstrip().endswith("\\") and not outputs[-1]
    return [("\n".join(c), "\n".join(o)) for c, o in zip(commands, outputs)]


def example_env() -> dict[str, str]:
    """The environment of a page's commands: this interpreter's tools first, the checkout's code."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    env["PYTHONWARNINGS"] = "error::DeprecationWarning:__main__"
    env["OUT"] = str(Path.cwd() / "OUT")  # a GPU-machine command that slipped through writes here, not to /
    return env


def _run_shell(script: str, env: dict[str, str], *, shows_error: bool = False) -> str:
    """What ``script`` printed: its standard output, then its standard error (lines marked ``stderr|``).

    It must exit 0, unless the page shows it failing (``shows_error``): then it must print an
    ``error:`` line, whatever its exit status.
    """
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], env=env, text=True,
                          capture_output=True, check=False)
    printed = proc.stdout + "".join(f"stderr| {line}\n" for line in proc.stderr.splitlines())
    if shows_error and "error:" not in printed:
        raise RuntimeError(f"the page shows an error, but this printed none:\n{script}\n{printed}")
    if proc.returncode != 0 and not shows_error:
        raise RuntimeError(f"exit status {proc.returncode} from:\n{script}\n{printed}")
    return printed


def run_block(block: Block, namespace: dict, env: dict[str, str]) -> str:
    """Run one block (in the current folder); returns what it printed."""
    if block.lang == "python":
        out, err = io.StringIO(), io.StringIO()
        codes = ([compile(statement, str(block.page), "single") for statement in session_statements(block)]
                 if interactive(block) else [compile(python_source(block), str(block.page), "exec")])
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                for code in codes:
                    exec(code, namespace)  # noqa: S102 - running the documentation's own examples
        finally:
            printed = out.getvalue() + "".join(f"stderr| {line}\n" for line in err.getvalue().splitlines())
        return printed
    if block.lang == "console":
        printed = []
        for command, shown in console_commands(block):
            target = re.fullmatch(r"cat\s+(\S+)", command.strip())
            if target:  # the page shows a file: the reader writes it as shown
                Path(target[1]).write_text(shown + "\n", encoding="utf-8")
            shows_error = "error:" in shown
            printed.append(f"$ {command}\n{_run_shell(command, env, shows_error=shows_error)}")
        return "".join(printed)
    return _run_shell(block.code, env)


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the commands)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def shown_output(page_blocks: list[Block], index: int) -> list[str] | None:
    """What the page shows block ``index`` printing: a console block's own lines (with its
    commands), or the plain/``text`` block right after a Python block; None if nothing is shown."""
    block = page_blocks[index]
    if block.lang == "console":
        return block.code.splitlines()
    if block.lang == "python" and interactive(block):
        return [line for line in block.code.splitlines()
                if line[:4] not in (">>> ", "... ") and line.rstrip() not in (">>>", "...")]
    after = page_blocks[index + 1] if index + 1 < len(page_blocks) else None
    if block.lang == "python" and after is not None and after.lang in ("", "text"):
        return after.code.splitlines()
    return None


def run_page(page: Path, *, diff: bool = False) -> int:
    """Run ``page``'s runnable blocks in order in the current folder; 0 when every one ran.

    ``diff``: print, after each block, how what it printed differs from what the page shows
    (``stderr|`` marks dropped) instead of the printed text itself.
    """
    warnings.filterwarnings("error", category=DeprecationWarning, module="__main__")
    warnings.filterwarnings("error", category=DeprecationWarning, module="powermodels")
    env = example_env()
    namespace: dict = {"__name__": "__main__"}
    page_blocks = blocks(page)
    for index, block in enumerate(page_blocks):
        if block.lang in RUNNABLE and block.skip:
            print(f"--- {block.where} ({block.lang}) skipped: {block.skip}", flush=True)
        if not block.runs:
            continue
        start, cpu = time.perf_counter(), _cpu_s()
        try:
            printed = run_block(block, namespace, env)
        except BaseException:  # noqa: BLE001 - report which block failed, then stop
            print(f"--- {block.where} ({block.lang}) FAILED", flush=True)
            traceback.print_exc(file=sys.stdout)
            return 1
        print(f"--- {block.where} ({block.lang}) ran in {time.perf_counter() - start:.1f} s "
              f"({_cpu_s() - cpu:.1f} s CPU)", flush=True)
        shown = shown_output(page_blocks, index) if diff else None
        if shown is None:
            print(printed, end="" if printed.endswith("\n") or not printed else "\n", flush=True)
        else:
            got = [line.removeprefix("stderr| ") for line in printed.splitlines()]
            print("\n".join(difflib.unified_diff(shown, got, "shown", "printed", lineterm="", n=0))
                  or "(as shown)", flush=True)
    return 0


def prepare_folder(folder: Path, shared: Path | None) -> Path:
    """A checkout look-alike inside ``folder`` (``folder/repo``), the shared data beside it."""
    repo = folder / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        (repo / name).symlink_to(REPO / name, target_is_directory=True)
    if shared is not None and shared.is_dir():
        (folder / "shared").symlink_to(shared, target_is_directory=True)
    return repo


if __name__ == "__main__":
    # python tests/docs_pages.py [--diff] PAGE [FOLDER]: run PAGE's examples and print what each
    # printed, or with --diff how it differs from the page's shown output (to regenerate it);
    # without FOLDER, in a new temporary one
    args = [arg for arg in sys.argv[1:] if arg != "--diff"]
    page = Path(args[0]).resolve()
    if len(args) > 1:
        folder = Path(args[1])
    else:
        import tempfile

        folder = prepare_folder(Path(tempfile.mkdtemp(prefix="docs-examples-")), SHARED_DATA.parent)
        print(f"--- running in {folder}", flush=True)
    os.chdir(folder)
    # the page's own state folder (restore journal, learned α): never the user's ~/.local/state
    os.environ["POWERMODELS_STATE_DIR"] = str(Path.cwd() / ".state")
    sys.exit(run_page(page, diff="--diff" in sys.argv))
