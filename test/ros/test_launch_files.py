"""Every launch file is the shared table's: ``launch_description(<its name>)`` of
:mod:`robodyn_ros.ros.launch_actions`, which starts the nodes of
:data:`robodyn_ros.ros.launch_description_data.LAUNCHES`, the table the in-process bringup reads too.
``test/ros/test_ros2_workspace.py`` runs each launch file with ``ros2 launch`` and checks the running nodes
(``ros2 node list``, ``ros2 param dump`` against the bringup's parameters)."""
import ast
import os

from conftest import CHECKOUT
from robodyn_ros.ros.launch_description_data import LAUNCHES

LAUNCH_DIR = os.path.join(CHECKOUT, "launch")


def test_every_launch_file_reads_the_shared_table():
    """Each launch file is the shared builder called with its own name (so it starts the table's nodes)."""
    for launch in LAUNCHES:
        tree = ast.parse(open(os.path.join(LAUNCH_DIR, f"{launch}.launch.py")).read())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "robodyn_ros.ros.launch_actions" for alias in node.names}
        assert imported == {"launch_description"}
        calls = [node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", "") == "launch_description"]
        assert calls == [launch]
    assert sorted(f[:-len(".launch.py")] for f in os.listdir(LAUNCH_DIR) if f.endswith(".launch.py")) == sorted(LAUNCHES)
