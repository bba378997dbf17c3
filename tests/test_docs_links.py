"""Every relative link in README.md and docs/*.md reaches a file, and every #anchor a heading.

The pages link into each other by heading anchors (the twin's guide into its session log, the README's
results table into the guides); a heading renamed or moved to another page breaks those links silently.
Anchors are made as MkDocs makes them (Python-Markdown's ``toc`` slugify, restated here because CI
installs no Markdown: accents and Greek letters dropped to ASCII, punctuation dropped, lower case,
runs of spaces and hyphens one hyphen; a leading hyphen stays). GitHub's anchors for README differ
in places; the README links checked here are those into docs/.
"""

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCED = re.compile(r"```.*?```", re.S)
HEADING = re.compile(r"^#{1,6} (.*)$", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (its text with the inline code marks gone)."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def prose(page: Path) -> str:
    """The page without its code blocks (a ``#`` there is a comment, not a heading)."""
    return FENCED.sub("", page.read_text(encoding="utf-8"))


HEADINGS = ["Session 19: `--calibrate-thermal network` on three boards",
            "The ambient from the recording: is GPU-620707cb's miss its temperature?",
            "Where α comes from", "`--calibrate-cap probes`, second clean set: fails (twin vs real)"]


def test_slug_matches_mkdocs():
    assert slug(HEADINGS[0]) == "session-19-calibrate-thermal-network-on-three-boards"
    assert slug(HEADINGS[1]) == "the-ambient-from-the-recording-is-gpu-620707cbs-miss-its-temperature"
    assert slug(HEADINGS[2]) == "where-comes-from"
    assert slug(HEADINGS[3]).startswith("-calibrate-cap-probes-second-clean-set")


@pytest.mark.parametrize("heading", HEADINGS)
def test_slug_is_python_markdowns(heading):
    toc = pytest.importorskip("markdown.extensions.toc")
    assert slug(heading) == toc.slugify(heading.replace("`", ""), "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve(page):
    anchors = {p.resolve(): {slug(h) for h in HEADING.findall(prose(p))} for p in PAGES}
    broken = []
    for link in LINK.findall(prose(page)):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page.resolve()
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path in anchors and anchor not in anchors[path]:
            broken.append(f"{link}: no such heading")
    assert not broken, f"{page.name}: " + "; ".join(broken)
