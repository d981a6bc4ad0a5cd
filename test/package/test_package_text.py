"""What the package's own text may hold: no dated measurement (figures and their dates live in
docs/PERFORMANCE.md) and no path to the project's paper folder (docstrings cite by author and year;
docs/REFERENCES.md gives each citation in full)."""

import pathlib
import re

from conftest import CHECKOUT

PACKAGE = pathlib.Path(CHECKOUT) / "robodyn_ros"
DATED = re.compile(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}|shared/papers")


def test_no_dated_measurement_or_paper_folder_in_the_package():
    hits = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()[:80]}"
            for path in sorted(PACKAGE.rglob("*")) if path.suffix in (".py", ".yaml", ".md", ".c", ".h")
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if DATED.search(line)]
    assert not hits, "\n".join(hits)


def test_the_references_cite_the_five_documents_in_full():
    text = (PACKAGE.parent / "docs" / "REFERENCES.md").read_text(encoding="utf-8")
    for needle in ("Garofalo, C. Ott, A. Albu-Schäffer", "S. Singh, R. P. Russell, P. M. Wensing", "J. Kwon",
                   "A. Müller, S. Kumar", "H.-A. Cărmizaru"):
        assert needle in text, needle
