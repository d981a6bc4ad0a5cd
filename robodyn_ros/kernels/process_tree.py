"""The processes below a process, from Linux's ``/proc/<pid>/task/<tid>/children`` lists (every thread's:
a process started from a thread is listed under that thread). Where there is no such list (another OS, a
process gone meanwhile) that part of the tree is empty."""
from __future__ import annotations

import os


def descendants(pid):
    """Pids of the processes below ``pid`` (children, grandchildren, ...), parents before their children."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def command_name(pid):
    """The process's command name (``/proc/<pid>/comm``), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return None
