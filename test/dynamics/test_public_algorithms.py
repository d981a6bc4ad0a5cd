"""docs/ALGORITHMS.md runs: every ``python`` block of it is executed on its own (a fresh namespace), so a
change of a public name, a call shape or a result that the page shows fails here, and every public
function of the package is called in some block."""
import os
import re

import pytest

import robodyn_ros as rd


def _find_page(name):
    """``docs/<name>`` of the checkout, looked for upwards from this file (the tests may sit in a folder)."""
    here = os.path.dirname(os.path.abspath(__file__))
    while True:
        path = os.path.join(here, "docs", name)
        if os.path.isfile(path):
            return path
        parent = os.path.dirname(here)
        if parent == here:
            raise FileNotFoundError(f"docs/{name} not found above {__file__}")
        here = parent


PAGE = _find_page("ALGORITHMS.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# public names that are types, or whose call compiles C for seconds (shown in the kernels' docs)
NOT_SHOWN = {"Model", "ModelError", "OnlineEstimate", "OnlineEstimator", "compile_kernels"}


def blocks():
    """``[(section heading, code)]`` of the page's python blocks, in order."""
    text = open(PAGE, encoding="utf-8").read()
    out = []
    for match in BLOCK.finditer(text):
        headings = re.findall(r"^## (.+)$", text[:match.start()], re.M)
        out.append((headings[-1] if headings else "top", match.group(1)))
    return out


@pytest.mark.parametrize("heading, code", blocks(), ids=[h for h, _ in blocks()])
def test_block_runs(heading, code):
    exec(compile(code, f"{PAGE} ({heading})", "exec"), {"__name__": "algorithms_page"})


def test_every_public_function_is_shown():
    code = "\n".join(c for _, c in blocks())
    missing = [n for n in rd.__all__ if n not in NOT_SHOWN and not re.search(rf"\brd\.{n}\(", code)]
    assert len(blocks()) >= 10 and not missing, f"public functions without a call on the page: {missing}"


def test_the_checks_can_fail(tmp_path):
    """A block that raises fails, and a name never called is reported."""
    with pytest.raises(AssertionError):
        test_block_runs("broken", "import numpy as np\nassert np.allclose(1.0, 2.0)\n")
    assert not re.search(r"\brd\.dM_dq\(", "rd.dM_dq_other(model, q)")
