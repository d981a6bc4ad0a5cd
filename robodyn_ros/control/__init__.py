"""Controllers built on the core dynamics (no ROS): computed torque and gravity compensation,
Slotine-Li adaptive control, CasADi model-predictive control, and reference trajectories; the runtime the
controller nodes call: :class:`~.control_loop.ControlLoop` (the inverse_dynamics node's loop),
:class:`~.mpc_loop.MpcLoop` (the mpc node's), :class:`~.torque_output.TorqueOutput` (stamp gate, watchdog,
command guard) and :mod:`~.payload_update` (payload estimates as model updates, plausibility check).

Every controller takes the state ``(q, v)`` and a reference and returns ``(tau, status)`` with a
:class:`ControlStatus` saying whether the command came from the control law or is a held safe command.
"""
from .command_guard import CommandGuard, ControlStatus
from ..kernels.compiled_functions import DynamicsFunctions, compile_casadi_functions
from .computed_torque import ComputedTorqueController, GravityCompensation
from .reference import ConstantReference, QuinticTrajectory, ReferenceClippedWarning, clip_reference, fourier_reference
from .slotine_li import SlotineLiController, consistent_adaptation_gains
from .torque_output import StampGate, TorqueOutput
from .control_loop import ControlLoop

__all__ = [
    "CommandGuard", "ControlStatus", "DynamicsFunctions", "compile_casadi_functions", "ComputedTorqueController",
    "GravityCompensation", "ConstantReference", "QuinticTrajectory", "ReferenceClippedWarning", "clip_reference",
    "fourier_reference", "SlotineLiController", "consistent_adaptation_gains", "StampGate", "TorqueOutput",
    "ControlLoop",
]
