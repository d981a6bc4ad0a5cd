"""The state -> command latency of a node's 1 kHz path over its last LATENCY_WINDOW states, for its
/diagnostics: wall time (perf_counter) and the callback thread's CPU time over the same span (a wall
latency far above the CPU time was preemption: RT throttling, other processes)."""
import numpy as np

LATENCY_WINDOW = 10000


class LatencyWindow:
    """A ring of the last ``size`` (wall, CPU) latencies in nanoseconds."""

    def __init__(self, size=LATENCY_WINDOW):
        self.wall_ns = np.zeros(size, dtype=np.int64)
        self.cpu_ns = np.zeros(size, dtype=np.int64)
        self.count = 0

    def add(self, wall_ns, cpu_ns):
        slot = self.count % len(self.wall_ns)
        self.wall_ns[slot], self.cpu_ns[slot] = wall_ns, cpu_ns
        self.count += 1

    def percentiles_us(self, samples_ns):
        """(p50, p99, max) of the filled part of a ring, us."""
        n = min(self.count, len(samples_ns))
        if n == 0:
            return (0.0, 0.0, 0.0)
        x = samples_ns[:n] / 1e3
        return float(np.percentile(x, 50)), float(np.percentile(x, 99)), float(x.max())

    def values(self):
        """The diagnostics values: ``states_received``, ``latency_*_us``, ``cpu_*_us``, ``latency_window``."""
        p50, p99, worst = self.percentiles_us(self.wall_ns)
        c50, c99, cworst = self.percentiles_us(self.cpu_ns)
        return {"states_received": self.count, "latency_p50_us": p50, "latency_p99_us": p99,
                "latency_max_us": worst, "cpu_p50_us": c50, "cpu_p99_us": c99, "cpu_max_us": cworst,
                "latency_window": min(self.count, len(self.wall_ns))}
