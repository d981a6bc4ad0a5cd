"""ROS 2 bags of joint states and wrenches, read and written without ROS (storage: `rosbags`).

:mod:`~robodyn_ros.bags.cdr` encodes and decodes the messages, :mod:`~robodyn_ros.bags.storage` opens bags,
:mod:`~robodyn_ros.bags.reader` reads topics into arrays with the repairs of :mod:`~robodyn_ros.bags.repair`,
:mod:`~robodyn_ros.bags.streaming` scans and streams them a block at a time, :mod:`~robodyn_ros.bags.writer`
writes bags. Every failure is a :class:`BagError`.
"""

from .cdr import JOINT_STATE_TYPE, WRENCH_STAMPED_TYPE
from .errors import BagError
from .reader import read_joint_states, read_wrenches
from .series import JointStateSeries, ReadReport, WrenchSeries
from .streaming import BagJointStates, JointStateScan, iter_joint_state_blocks, scan_joint_states
from .writer import DEFAULT_T0_NS, write_joint_states_bag

__all__ = [
    "JOINT_STATE_TYPE", "WRENCH_STAMPED_TYPE", "DEFAULT_T0_NS", "BagError", "ReadReport", "JointStateSeries",
    "WrenchSeries", "JointStateScan", "BagJointStates", "read_joint_states", "read_wrenches",
    "iter_joint_state_blocks", "scan_joint_states", "write_joint_states_bag",
]
