"""robodyn_ros.ros.heap_trim: malloc_trim at a bounded rate (the estimator's guard against glibc arena
growth under bursty middleware traffic)."""
import ctypes
import ctypes.util

from robodyn_ros.ros import heap_trim


def _rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_trim_heap_returns_freed_pages_to_the_os():
    """Fill many small blocks from C, free all but every 64th (fragmenting the heap so the top cannot be
    cut), then trim: the resident set must shrink by most of what was freed."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    M_TRIM_THRESHOLD = -1
    libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)  # free() must not trim by itself
    blocks = [libc.malloc(4000) for _ in range(40000)]          # ~160 MB
    for b in blocks:
        ctypes.memset(b, 1, 4000)
    before = _rss_kib()
    for i, b in enumerate(blocks):
        if i % 64:
            libc.free(b)
    freed = _rss_kib()
    assert heap_trim.trim_heap() is True
    after = _rss_kib()
    for b in blocks[::64]:
        libc.free(b)
    libc.mallopt(M_TRIM_THRESHOLD, 128 * 1024)  # glibc's default again
    print(f"RSS {before} kB filled, {freed} kB after free, {after} kB after trim")
    assert freed - after > 100 * 1024        # of ~154 MB freed, at least 100 MB given back by the trim


def test_heap_trimmer_calls_at_most_once_per_period(monkeypatch):
    calls = []
    monkeypatch.setattr(heap_trim, "trim_heap", lambda: calls.append(1) or True)
    clock = [100.0]
    monkeypatch.setattr(heap_trim.time, "monotonic", lambda: clock[0])
    trimmer = heap_trim.HeapTrimmer(10.0)
    for _ in range(1000):                      # 1000 calls within the first period: none trims
        trimmer.maybe_trim()
    assert calls == [] and trimmer.trims == 0
    clock[0] = 110.0
    trimmer.maybe_trim()
    trimmer.maybe_trim()
    assert len(calls) == 1 and trimmer.trims == 1
    clock[0] = 125.0
    trimmer.maybe_trim()
    assert len(calls) == 2
