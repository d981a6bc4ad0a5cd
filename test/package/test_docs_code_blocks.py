"""What the README and the guides in docs/ show a user to run, run: every ```python block executed, every shell
block either run here (the fast ones) or read from the doc by the test that already runs it (the expensive
ones: the demo, the identification of the real Panda, the own-robot workflow, the ROS 2 workspace), every
```yaml parameter block validated against the nodes' schemas; ```text blocks are output and formulas, not run.
And every relative link points to a file that exists, and to a heading it has."""
import os
import re
import subprocess
import sys

import pytest

from doc_blocks import CHECKOUT, code_blocks

DOCS = ["README.md"] + sorted(str(p.relative_to(CHECKOUT)) for p in (CHECKOUT / "docs").glob("*.md"))
LANGUAGES = ("python", "bash", "yaml", "text")
SHELL_DEADLINE = 300.0   # s for one fast block on a loaded two-core machine

# (doc, heading) of the shell blocks run here: commands of seconds
RUN_HERE = {
    ("docs/IDENTIFICATION.md", "The steps"),
    ("docs/MPC.md", "Wiring the `mpc` node"),
}
# (doc, heading) of the shell blocks that an existing test reads from the doc and runs (minutes each)
RUN_ELSEWHERE = {
    ("README.md", "Install and test (Python 3.10+)"): ".ci/run",
    ("README.md", "The demo"): "test/cli/test_demo.py",
    ("README.md", "Identifying the real Panda"): "test/estimation/test_replay_real_panda.py",
    ("README.md", "Your own robot"): "test/ros/test_own_robot_readme.py",
    ("docs/ADAPTIVE_CONTROL.md", "The payload scenario: a payload seen by the wrist sensor"): "test/cli/test_demo.py",
    ("docs/NODES.md", "In a ROS 2 workspace"): "test/ros/test_ros2_workspace.py",
}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def blocks(language):
    return [pytest.param(doc, heading, text, id=f"{doc}:{line}")
            for doc in DOCS for heading, lang, text, line in code_blocks(doc) if lang == language]


@pytest.mark.parametrize("doc", DOCS)
def test_every_block_has_a_language_and_every_shell_block_is_run(doc):
    for heading, language, _, line in code_blocks(doc):
        assert language in LANGUAGES, f"{doc}:{line}: a ```{language} block; label it one of {LANGUAGES}"
        if language == "bash":
            assert (doc, heading) in RUN_HERE or (doc, heading) in RUN_ELSEWHERE, \
                f"{doc}:{line}: the shell block under '{heading}' is run by no test"


@pytest.mark.parametrize(("doc", "heading"), sorted(RUN_ELSEWHERE))
def test_the_tests_named_for_a_block_read_it_from_its_doc(doc, heading):
    source = (CHECKOUT / RUN_ELSEWHERE[doc, heading]).read_text(encoding="utf-8")
    if RUN_ELSEWHERE[doc, heading] == ".ci/run":      # the README's test command, exactly
        command = [text for h, _, text, _ in code_blocks(doc) if h == heading][0].strip()
        assert source.rstrip().splitlines()[-1] == command
    else:
        assert doc in source and heading in source, f"{RUN_ELSEWHERE[doc, heading]} does not read {doc} '{heading}'"


@pytest.mark.parametrize(("doc", "heading", "text"), blocks("python"))
def test_python_blocks_run(doc, heading, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(text, f"{doc} ({heading})", "exec"), {"__name__": "__doc_block__"})


@pytest.mark.parametrize(("doc", "heading", "text"), [b for b in blocks("bash") if tuple(b.values[:2]) in RUN_HERE])
def test_fast_shell_blocks_run(doc, heading, text, tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    done = subprocess.run(["bash", "-eu", "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=SHELL_DEADLINE)
    assert done.returncode == 0, f"{doc} '{heading}' ended with {done.returncode}:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize(("doc", "heading", "text"), blocks("yaml"))
def test_parameter_blocks_are_valid_for_their_nodes(doc, heading, text, tmp_path):
    import yaml
    from robodyn_ros.ros.node_parameters import SCHEMAS, resolve_node_config, unknown_parameter_error
    from robodyn_ros.ros.parameters import load_params_yaml
    path = tmp_path / "params.yaml"
    path.write_text(text)
    nodes = list(yaml.safe_load(text))
    assert nodes and set(nodes) <= set(SCHEMAS), nodes
    for node in nodes:
        overrides = load_params_yaml(str(path), node)
        assert overrides, node
        assert unknown_parameter_error(node, overrides) is None, unknown_parameter_error(node, overrides)
        resolve_node_config(node, overrides)


def anchors(path):
    """The anchors GitHub gives the headings of the Markdown file ``path`` (headings inside blocks are not
    headings): lower case, punctuation dropped, spaces as hyphens."""
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        heading = None if fenced else re.match(r"#{1,6} +(.*?) *$", line)
        if heading:
            found.add(re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-"))
    return found


def broken_links(doc, text):
    """The relative links of ``text`` (the Markdown file ``doc``) to files that do not exist, or to a heading
    the file does not have."""
    folder = (CHECKOUT / doc).parent
    broken = []
    for target in LINK.findall(text):
        path, _, anchor = target.partition("#")
        if not path or re.match(r"[a-z]+:", path):
            continue
        resolved = (folder / path).resolve()
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_point_to_files(doc):
    assert not broken_links(doc, (CHECKOUT / doc).read_text(encoding="utf-8")), doc


def test_the_link_check_can_fail():
    text = ("[a](docs/NODES.md) [b](docs/NO_SUCH.md#x) [c](https://example.org) [d](#local) [e](docs/ALGORITHMS.md) "
            "[f](docs/NODES.md#in-a-ros-2-workspace) [g](docs/NODES.md#no-such-heading)")
    assert broken_links("README.md", text) == ["docs/NO_SUCH.md#x", "docs/NODES.md#no-such-heading"]
    assert broken_links("docs/MPC.md", "[r](../README.md) [s](MISSING.md)") == ["MISSING.md"]


def test_the_shell_blocks_are_found():
    """The block registry is not vacuous: each named (doc, heading) holds a shell block."""
    for doc, heading in [*RUN_HERE, *RUN_ELSEWHERE]:
        assert any(h == heading and lang == "bash" for h, lang, _, _ in code_blocks(doc)), (doc, heading)
