"""A benchmark's figures kept with their date and the machine's load: ``robodyn bench WHICH --record
FILE`` appends one section to a Markdown file (docs/PERFORMANCE.md in this repository), so measured
numbers live beside their conditions and not in the code."""
from __future__ import annotations

import datetime
import os
import platform
import tempfile


def _lines(result, prefix=""):
    """``key: value`` lines of a (nested) result, one per figure, nested keys joined by dots."""
    out = []
    for key, value in result.items():
        if isinstance(value, dict):
            out += _lines(value, f"{prefix}{key}.")
        elif isinstance(value, float):
            out.append(f"{prefix}{key}: {value:.6g}")
        else:
            out.append(f"{prefix}{key}: {value}")
    return out


def record_section(which, result, when=None, load=None):
    """The Markdown section of one run of ``robodyn bench which``: a heading with the UTC time, the
    machine (cores, 1-min load average at the end of the run, Python) and the figures as a text block."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    load = os.getloadavg()[0] if load is None else load
    return "\n".join([
        f"## `robodyn bench {which}`, {when:%Y-%m-%d %H:%M} UTC",
        "",
        f"{os.cpu_count()} cores, 1-min load {load:.2f} at the end of the run, Python "
        f"{platform.python_version()}.",
        "",
        "```text",
        *_lines(result),
        "```",
        "",
    ])


def append_record(path, which, result):
    """Append :func:`record_section` to the Markdown file ``path`` (created if missing) in one step: the
    file is rewritten through a temporary file beside it, so a failure leaves it as it was."""
    path = os.fspath(path)
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    text = old + ("\n" if old and not old.endswith("\n\n") else "") + record_section(which, result)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
