"""robodyn_ros: rigid-body dynamics with analytical derivatives, online identification, adaptive and
model-predictive control for robot arms.

The public surface (shared/API.md) is importable from here. The numeric functions run the compiled
kernels of a model once ``compile_kernels(model)`` has been called for it, the interpreted algorithms
(one implementation for NumPy and CasADi, e.g. :mod:`robodyn_ros.dynamics.rnea`) otherwise. The core package never imports rclpy; the
ROS 2 nodes live in ``robodyn_ros.ros``.
"""
from .dynamics.dynamic_matrices import coriolis_matrix_garofalo
from .model.errors import ModelError
from .dynamics.friction import friction_torque
from .kernels import compile_kernels
from .dynamics.kinematics import body_jacobians, forward_kinematics, frame_jacobian, frame_placement
from .model.model import Model
from .kernels.numeric import (aba, aba_derivatives, coriolis_matrix, crba, gravity_torque, nonlinear_effects, regressor,
                      rnea, rnea_derivatives, rnea_time_derivatives)
from .dynamics.regressor import body_wrench_regressor, slotine_li_regressor
from .estimation.online_estimator import OnlineEstimate, OnlineEstimator

__version__ = "0.1.0"

__all__ = [
    "Model", "ModelError", "rnea", "crba", "aba", "nonlinear_effects", "gravity_torque", "coriolis_matrix",
    "coriolis_matrix_garofalo", "friction_torque", "regressor", "slotine_li_regressor", "body_wrench_regressor",
    "forward_kinematics", "frame_placement", "frame_jacobian", "body_jacobians", "rnea_time_derivatives",
    "compile_kernels", "rnea_derivatives", "aba_derivatives", "OnlineEstimator", "OnlineEstimate",
]
