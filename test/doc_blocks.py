"""The fenced code blocks of the project's Markdown files, for the tests that run what the docs show: a doc
edit that breaks a command fails the test that reads it."""
import pathlib
import re
import shlex

CHECKOUT = pathlib.Path(__file__).resolve().parents[1]
HEADING = re.compile(r"^#{1,6} +(.*?) *$")


def code_blocks(name):
    """Every fenced block of the Markdown file ``name`` (relative to the checkout) as ``(heading, language,
    text, line)``: the nearest heading above it (outside blocks), the fence's language, the block's text and
    the line number of its opening fence."""
    blocks, heading, fence = [], "", None
    for number, line in enumerate((CHECKOUT / name).read_text(encoding="utf-8").splitlines(), 1):
        if fence is None:
            if line.startswith("```"):
                fence, language, start = [], line[3:].strip(), number
            elif HEADING.match(line):
                heading = HEADING.match(line).group(1)
        elif line.startswith("```"):
            blocks.append((heading, language, "\n".join(fence) + "\n", start))
            fence = None
        else:
            fence.append(line)
    assert fence is None, f"{name}: the block opened on line {start} is never closed"
    return blocks


def code_block(name, heading, language="bash"):
    """The one ``language`` block under ``heading`` in ``name``."""
    found = [text for h, lang, text, _ in code_blocks(name) if h == heading and lang == language]
    assert len(found) == 1, f"{name}: {len(found)} ```{language} blocks under '{heading}', expected one"
    return found[0]


def command_lines(block):
    """A shell block's commands: backslash continuations joined, comments and blank lines dropped."""
    lines, pending = [], ""
    for line in block.splitlines():
        line = pending + line.split("  #")[0].rstrip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
        elif line.strip() and not line.lstrip().startswith("#"):
            lines.append(line.strip())
    return lines


def command_argv(block, program):
    """The arguments after ``program`` (e.g. ``"robodyn demo"``) of the block's one command line that runs
    it, also after ``&&``."""
    found = [part.strip() for line in command_lines(block) for part in line.split("&&")
             if part.strip().startswith(program + " ")]
    assert len(found) == 1, f"{len(found)} '{program}' commands in the block, expected one:\n{block}"
    return shlex.split(found[0])[len(program.split()):]
