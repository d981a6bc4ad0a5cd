"""A node stopped while it builds: the ``mpc`` node, started on an empty cache (its kernels and its problem
functions compiled from scratch), gets SIGTERM while gcc compiles its MPC functions. It must end at once with
code 0 (its compiler processes killed, none left to whatever reaps orphans), and leave nothing in the cache
but lock files: no library, no temporary sources. Before, the process waited for gcc to finish and a compiler
outlived it."""
import os
import signal
import subprocess
import threading
import time

import pytest

from robodyn_ros.benchmarks.nodes import node_process_args
from robodyn_ros.kernels.process_tree import command_name, descendants

pytest.importorskip("rclpy")
from robodyn_ros.ros.testing import isolated_ros_domain  # noqa: E402

pytestmark = [pytest.mark.xdist_group("processes"),
              pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")]

BUILD = 300.0    # s for the node to start compiling its MPC functions on a loaded machine (kernels first)
STOP = 15.0      # s for the process to end after SIGTERM (it ends in a fraction of a second when idle)
COMPILERS = ("cc", "gcc", "cc1", "as", "collect2", "ld", "clang")


def test_mpc_node_stopped_while_it_compiles_ends_at_once_and_caches_nothing(tmp_path):
    cache = tmp_path / "cache"
    args, env = node_process_args("mpc", {}, log_level="info")
    output = []
    with isolated_ros_domain():
        env = {**env, "ROBODYN_CACHE_DIR": str(cache), "ROS_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"],
               "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + BUILD
            while not (any("compiling MPC functions" in line for line in output)      # the quick build first
                       and any(command_name(pid) in COMPILERS for pid in descendants(proc.pid))):
                assert proc.poll() is None and time.monotonic() < deadline, "".join(output)[-3000:]
                time.sleep(0.02)
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(STOP)
            ended = time.monotonic() - start
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(10.0)
    text = "".join(output)
    print(f"\nmpc node: exit {code} {ended:.2f} s after SIGTERM during its first build")
    assert code == 0, text[-3000:]
    try:                      # nothing is left in the node's process group (its compilers ran in it)
        os.killpg(proc.pid, 0)
        left = True
    except ProcessLookupError:
        left = False
    assert not left, "a process of the node's group outlived it"
    # the kernels built before (their library, its report, locks) stay; nothing of the MPC's build
    leftovers = [p.name for p in cache.iterdir() if p.name.startswith(("casadi", "tmp"))]
    assert leftovers == [], leftovers
    assert "Traceback" not in text, text[-3000:]
