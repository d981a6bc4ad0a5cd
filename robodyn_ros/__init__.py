"""robodyn_ros: rigid-body dynamics with analytical derivatives, online identification, adaptive and
model-predictive control for robot arms.

The public surface, one call shape ``f(model, q, v, ...)``, shapes and equations in each docstring
(docs/ALGORITHMS.md shows a call of each and what it is checked against):

- dynamics: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``, ``gravity_torque``, ``coriolis_matrix``,
  ``friction_torque``, ``regressor``, ``slotine_li_regressor``; kinematics: ``forward_kinematics``,
  ``frame_placement``, ``frame_jacobian``, ``body_jacobians``.
- derivatives: ``rnea_derivatives``, ``aba_derivatives`` (Singh, Russell and Wensing),
  ``rnea_time_derivatives`` (Müller and Kumar), the state derivatives ``dM_dq``, ``dC_dq``, ``dC_dv``,
  ``dg_dq`` and the time derivatives ``mass_matrix_time_derivative``, ``coriolis_matrix_time_derivative``,
  ``gravity_torque_time_derivative``, ``body_jacobian_derivatives`` (Garofalo et al.), and
  ``twist_derivatives``, inverse dynamics differentiated w.r.t. the joint twists (Kwon).
- Kwon's mesh inertia (``mesh_inertial_parameters`` and its vertex derivative, the derivative of a moved
  inertia) and the spherical five-bar closed chain (``SphericalFiveBar``, ``five_bar_actuator_torques``,
  ``five_bar_actuator_torque_derivatives``).
- ``compile_kernels`` and the library objects ``Model``, ``ModelError``, ``OnlineEstimator``.

The numeric functions of the first two groups that have a kernel run the compiled kernels of a model once
``compile_kernels(model)`` has been called for it, the interpreted algorithms (one implementation for
NumPy and CasADi, e.g. :mod:`robodyn_ros.dynamics.rnea`) otherwise. The core package never imports
rclpy; the ROS 2 nodes live in ``robodyn_ros.ros``.
"""
from .model.errors import ModelError
from .model.model import Model
from .model.mesh_inertia import (mesh_inertial_parameters, mesh_inertial_parameters_vertex_derivative,
                                 transformed_inertial_parameters_derivative)
from .dynamics.friction import friction_torque
from .dynamics.kinematics import body_jacobians, forward_kinematics, frame_jacobian, frame_placement
from .dynamics.regressor import slotine_li_regressor
from .dynamics.matrix_derivatives import dC_dq, dC_dv, dg_dq, dM_dq
from .dynamics.matrix_time_derivatives import (body_jacobian_derivatives, coriolis_matrix_time_derivative,
                                               gravity_torque_time_derivative, mass_matrix_time_derivative)
from .dynamics.twist_derivatives import twist_derivatives
from .dynamics.closed_chain import SphericalFiveBar, five_bar_actuator_torque_derivatives, five_bar_actuator_torques
from .kernels import compile_kernels
from .kernels.numeric import (aba, aba_derivatives, coriolis_matrix, crba, gravity_torque, nonlinear_effects, regressor,
                              rnea, rnea_derivatives, rnea_time_derivatives)
from .estimation import OnlineEstimate, OnlineEstimator

__version__ = "0.1.0"

__all__ = [
    "Model", "ModelError", "rnea", "crba", "aba", "nonlinear_effects", "gravity_torque", "coriolis_matrix",
    "friction_torque", "regressor", "slotine_li_regressor",
    "forward_kinematics", "frame_placement", "frame_jacobian", "body_jacobians", "rnea_time_derivatives",
    "compile_kernels", "rnea_derivatives", "aba_derivatives", "OnlineEstimator", "OnlineEstimate",
    "dM_dq", "dC_dq", "dC_dv", "dg_dq",
    "mass_matrix_time_derivative", "coriolis_matrix_time_derivative", "gravity_torque_time_derivative",
    "body_jacobian_derivatives", "twist_derivatives",
    "mesh_inertial_parameters", "mesh_inertial_parameters_vertex_derivative",
    "transformed_inertial_parameters_derivative",
    "SphericalFiveBar", "five_bar_actuator_torques", "five_bar_actuator_torque_derivatives",
]
