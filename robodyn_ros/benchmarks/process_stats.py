"""CPU time, resident memory and scheduling policy of processes, read from ``/proc`` (Linux; psutil is not
needed): what the soak run records per window for each node and for itself."""
from __future__ import annotations

import os
import time


def rss_kib(pid):
    """Resident set size of process ``pid`` in KiB (``/proc/<pid>/status`` VmRSS); None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """CPU time (user + system, all threads; not waited-for children) of process ``pid`` in seconds, from
    ``/proc/<pid>/stat`` fields 14 and 15 (utime, stime, in clock ticks); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()   # after "pid (comm) ": field 3 (state) is fields[0]
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_cpu_ticks():
    """``(idle, total)`` clock ticks of all CPUs since boot from ``/proc/stat``'s ``cpu`` line; idle counts
    idle + iowait, total the first eight columns (user nice system idle iowait irq softirq steal; guest time
    is already inside user)."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:9]]
    return values[3] + values[4], sum(values)


class CpuSampler:
    """Per-process CPU use and the machine's idle fraction between consecutive :meth:`sample` calls."""

    def __init__(self, pids):
        self.pids = dict(pids)   # name -> pid
        self._last = self._read()

    def _read(self):
        return time.monotonic(), {k: cpu_seconds(p) for k, p in self.pids.items()}, machine_cpu_ticks()

    def sample(self):
        """``({name: % of one core}, idle fraction of the whole machine, {name: CPU seconds})`` since the
        previous call; a process that was gone at either end gives None."""
        now, cpu, (idle, total) = self._read()
        then, cpu0, (idle0, total0) = self._last
        self._last = (now, cpu, (idle, total))
        wall = max(now - then, 1e-9)
        used = {k: (cpu[k] - cpu0[k] if cpu[k] is not None and cpu0.get(k) is not None else None) for k in cpu}
        percent = {k: (round(100.0 * v / wall, 1) if v is not None else None) for k, v in used.items()}
        idle_fraction = round((idle - idle0) / (total - total0), 3) if total > total0 else None
        return percent, idle_fraction, used


def is_realtime(pid):
    """True when process ``pid`` runs SCHED_FIFO, False when not, None if it is gone."""
    try:
        return os.sched_getscheduler(pid) == os.SCHED_FIFO
    except OSError:
        return None