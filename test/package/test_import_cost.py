"""What every process of the package pays at its start: importing the package, the command line and each node
module must not import scipy's signal, stats, optimize or interpolate (together about a second of CPU per
process on a two-core machine, paid by every node start, every ``robodyn`` command and every launch). The
modules that use them import them where they are used. Checked in a fresh interpreter, as a node starts."""
import subprocess
import sys

import pytest

HEAVY = ("scipy.signal", "scipy.stats", "scipy.optimize", "scipy.interpolate")


@pytest.mark.parametrize("module", ["robodyn_ros", "robodyn_ros.cli", "robodyn_ros.ros.inverse_dynamics_node",
                                    "robodyn_ros.ros.estimator_node", "robodyn_ros.ros.simulator_node",
                                    "robodyn_ros.ros.mpc_node"])
def test_starting_imports_none_of_scipys_heavy_modules(module):
    if module.startswith("robodyn_ros.ros."):
        pytest.importorskip("rclpy")
    code = (f"import importlib, sys; importlib.import_module({module!r}); "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [], f"importing {module} imports {done.stdout.split()}"
