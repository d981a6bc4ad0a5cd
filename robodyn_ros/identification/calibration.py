"""Kinematic calibration of joint twists from joint torques and tool poses (Kwon Sect. 2): Gauss-Newton
on ``η`` with the twist derivatives of :mod:`robodyn_ros.dynamics.twist_derivatives`, re-linearised around the
corrected twists at every iteration (``Ā ← Ad_{exp(δη)} Ā``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import spatial
from ..model.backend import NUMPY as ops
from ..model.joints import _se3_log
from ..dynamics.kinematics import forward_kinematics
from ..dynamics.rnea import rnea
from ..dynamics.twist_derivatives import twist_derivatives, with_twist_corrections


def pose_twist_jacobian(model, q, link):
    """``J`` (6, 6 nbodies): world-frame twist ``δT T^-1 = J δη`` of a link's pose for twist corrections,
    block i = ``Ad(T_{0,λ} M_i) - Ad(T_{0,i})`` for the ancestors i of the link's body."""
    frame = model.frames[link]
    oMi = forward_kinematics(model, q)
    J = np.zeros((6, 6 * model.nbodies))
    for i in (model.ancestors(frame.body) if frame.body >= 0 else []):
        lam = model.parents[i]
        ref = model.placements[i] if lam < 0 else spatial.compose(ops, *oMi[lam], *model.placements[i])
        J[:, 6 * i:6 * i + 6] = spatial.motion_matrix(ops, *ref) - spatial.motion_matrix(ops, *oMi[i])
    return J


def pose_error(T_measured, T_model):
    """World twist ``log(T_meas T_model^-1)`` (6,) between two placements ``(R, p)``."""
    R = T_measured[0] @ T_model[0].T
    p = T_measured[1] - R @ T_model[1]
    return _se3_log(R, p)


def link_pose(model, q, link):
    frame = model.frames[link]
    if frame.body < 0:
        return frame.R, frame.p
    return spatial.compose(ops, *forward_kinematics(model, q)[frame.body], frame.R, frame.p)


@dataclass
class CalibrationResult:
    model: object
    eta: np.ndarray            # total correction applied to the nominal twists (nbodies, 6), composed
    iterations: int
    torque_rms: float
    pose_rms: float


def calibrate_joint_twists(model, torque_samples, pose_samples, link, iterations=20, torque_weight=1.0,
                           pose_weight=100.0, tol=1e-12):
    """Joint twists that explain measured torques ``[(q, v, a, tau), ...]`` and poses of ``link``
    ``[(q, (R, p)), ...]``. Returns a :class:`CalibrationResult`; the minimum-norm Gauss-Newton step
    leaves the two null directions of each revolute twist (along ``A_i`` and ``[w_i; 0]``) untouched."""
    current = model
    total = np.zeros((model.nbodies, 6))
    for it in range(1, iterations + 1):
        rows, res = [], []
        for q, v, a, tau in torque_samples:
            rows.append(torque_weight * twist_derivatives(current, q, v, a)[0])
            res.append(torque_weight * (tau - rnea(current, q, v, a)))
        for q, T in pose_samples:
            rows.append(pose_weight * pose_twist_jacobian(current, q, link))
            res.append(pose_weight * pose_error(T, link_pose(current, q, link)))
        J, r = np.vstack(rows), np.concatenate(res)
        step = np.linalg.lstsq(J, r, rcond=1e-10)[0].reshape(model.nbodies, 6)
        current = with_twist_corrections(current, step)
        total += step
        if np.abs(step).max() < tol:
            break
    tr = np.concatenate([tau - rnea(current, q, v, a) for q, v, a, tau in torque_samples]) if torque_samples else np.zeros(1)
    pr = np.concatenate([pose_error(T, link_pose(current, q, link)) for q, T in pose_samples]) if pose_samples else np.zeros(1)
    return CalibrationResult(current, total, it, float(np.sqrt(np.mean(tr**2))), float(np.sqrt(np.mean(pr**2))))
