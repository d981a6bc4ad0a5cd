"""The common end of the commands that write files (``identify``, ``replay``, ``excite``): the files are
produced in memory, then written all or nothing with the user's umask; any failure is one line on stderr
and leaves nothing behind."""
from __future__ import annotations

import sys
import time

from ..model.errors import ModelError


def one_line(exc):
    """The error on one line: causes quoted from other libraries (YAML, sqlite) may span several."""
    return " ".join(str(exc).split())


def write_files(files):
    """Write ``{path: text or bytes}`` all or nothing (YAML, URDF, CSV, PNG), with the user's umask."""
    from ..identification.results import write_atomically
    write_atomically(files)


def run_file_command(command, produce, close=lambda: None):
    """Run ``produce() -> (files {path: text or bytes}, summary lines)``, write the files, print the summary.

    Returns the exit code: 0 done; 2 bad input (:class:`ModelError`) or unwritable outputs; 1 a bug (still one
    line, nothing written); 130 interrupted. ``close()`` ends a progress display before anything is printed."""
    start = time.perf_counter()
    try:
        files, summary = produce()
        write_files(files)
    except ModelError as exc:
        close()
        print(f"robodyn {command}: error: {one_line(exc)}; nothing was written", file=sys.stderr)
        return 2
    except OSError as exc:
        close()
        print(f"robodyn {command}: error: cannot write the outputs: {one_line(exc)}; nothing was written",
              file=sys.stderr)
        return 2
    except Exception as exc:   # a bug, not bad input: still one line and no partial output (exit 1)
        close()
        print(f"robodyn {command}: internal error: {type(exc).__name__}: {one_line(exc)}; nothing was written",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        close()
        print(f"robodyn {command}: interrupted; nothing was written", file=sys.stderr)
        return 130
    close()
    for line in summary:
        print(line)
    print(f"wrote {', '.join(files)} in {time.perf_counter() - start:.2f} s")
    return 0
