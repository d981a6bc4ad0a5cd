"""The common end of the commands that write files (``identify``, ``replay``, ``excite``): the files are
produced in memory, then written all or nothing with the user's umask; any failure is one line on stderr
and leaves nothing behind."""
from __future__ import annotations

import os
import sys
import time

from ..model.errors import ModelError


def one_line(exc):
    """The error on one line: causes quoted from other libraries (YAML, sqlite) may span several."""
    return " ".join(str(exc).split())


def check_output_path(path, option):
    """Raise ModelError (naming ``option``) unless ``path``'s directory exists and is writable."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ModelError(f"{option} {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise ModelError(f"{option} {path}: directory {directory} is not writable")


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


def file_command_main(command, parser, argv, run, make_progress=None):
    """A file-writing command's ``main``: one BLAS thread, ``argv`` parsed by ``parser`` (``--help`` and usage
    errors return argparse's exit code), then :func:`run_file_command` of ``run(args)``, or of
    ``run(args, progress)`` with ``progress = make_progress(args)`` (closed before anything is printed)."""
    from ..identification.blas_threads import limit_blas_threads
    limit_blas_threads()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if make_progress is None:
        return run_file_command(command, lambda: run(args))
    progress = make_progress(args)
    return run_file_command(command, lambda: run(args, progress), progress.close)


def png_bytes(fig, dpi=90):
    """The matplotlib figure ``fig`` as PNG bytes (written with the other files, all or nothing); closes it."""
    import io
    import matplotlib.pyplot as plt
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()
