"""Whether a CDR-encoded ``sensor_msgs/JointState`` carries values no joint has: what ``robodyn record``
leaves out of a bag (a diverged simulator publishes them; identification would fit them).

A message is unsound when a position is not finite (NaN included: the readers drop such samples anyway),
when a velocity or effort is infinite, or when any value exceeds ``ABSURD_MAGNITUDE`` (rad, m, rad/s, m/s,
N m or N: no joint reaches it). A NaN velocity or effort is sound: ros2_control's joint_state_broadcaster
publishes a missing interface as NaN (:mod:`robodyn_ros.bags.repair`). A message that does not parse is not
judged here (the readers report it).
"""
from __future__ import annotations

import struct

import numpy as np

from .cdr import joint_state_layout

ABSURD_MAGNITUDE = 1.0e9
CHANNELS = ("position", "velocity", "effort")


def joint_state_problem(raw):
    """None when the JointState ``raw`` (CDR bytes) is sound (module docstring), else a short reason naming
    the field and the joint, e.g. ``"velocity of joint7 is 1e+35"``."""
    try:
        layout = joint_state_layout(raw)
    except (ValueError, struct.error, UnicodeDecodeError):
        return None
    for channel, offset, count in zip(CHANNELS, layout.data_offsets, layout.counts):
        if not count:
            continue
        values = np.frombuffer(raw, dtype=layout.endian + "f8", count=count, offset=offset)
        magnitude = np.abs(values)
        bad = magnitude > ABSURD_MAGNITUDE      # inf included, NaN not
        if channel == "position":
            bad |= np.isnan(values)
        if bad.any():
            j = int(np.argmax(bad))
            name = layout.names[j] if j < len(layout.names) else f"#{j}"
            return f"{channel} of {name} is {values[j]:.3g}"
    return None
