"""The joint-torque regressor the online base-parameter estimate runs on: ``τ = Y_full(q, q̇, q̈) θ`` with
``θ = [π (10 nb), (armature, viscous, Coulomb, offset) per joint]``, reduced to the Gautier-Khalil base
parameters ``β = K θ`` (Gautier & Khalil 1990; :mod:`robodyn_ros.identification.base_parameters`), the
Coulomb sign smoothed as ``tanh(v / coulomb_width)``; and the weight each equation gets where no Coulomb
model fixed in advance is the robot's (near rest).
"""
from __future__ import annotations

import numpy as np

from ..dynamics.torque_scale import joint_torque_scale
from ..identification.base_parameters import compute_base_parameters, full_parameters, smooth_sign
from ..kernels import compile_kernels

FRICTION_BOUND = 0.03           # Coulomb friction of a joint, at most, as a fraction of its torque scale
FRICTION_SMOOTHING_MAX = 0.05   # rad/s: beyond a few of these every plausible Coulomb transition is complete


class JointTorqueRegressor:
    """``Y_full`` of ``model`` (module docstring) with the Coulomb width ``coulomb_width`` (rad/s).

    ``base``: the base parameters (:func:`~robodyn_ros.identification.base_parameters.compute_base_parameters`),
    ``beta_nominal`` (r,): the model's, ``friction_index`` (3, nv): the base-parameter index (or -1) of each
    joint's viscous, Coulomb and offset columns."""

    def __init__(self, model, coulomb_width):
        self.model = model
        self.coulomb_width = coulomb_width
        self.kernels = compile_kernels(model, register=False, parts=("dynamics",))
        self.base = compute_base_parameters(model, coulomb_width=coulomb_width)
        n_rigid = 10 * model.nbodies
        self._Y_rigid = np.empty((model.nv, n_rigid))
        self._Y_full = np.zeros((model.nv, n_rigid + 4 * model.nv))
        j = np.arange(model.nv)
        self._joint_columns = (j, n_rigid + 4 * j)     # row j, column of a_j; v_j, sgn(v_j), 1 follow
        self._Y_full[j, n_rigid + 4 * j + 3] = 1.0
        self.beta_nominal = self.base.from_full(full_parameters(model))
        self.friction_bound = FRICTION_BOUND * joint_torque_scale(model)
        self.friction_index = self._pure_base_columns(n_rigid)

    def _pure_base_columns(self, n_rigid):
        """Base-parameter index (or -1) of each joint's viscous, Coulomb and offset columns: (3, nv), for the
        columns that are base parameters on their own (a unit row of K)."""
        out = np.full((3, self.model.nv), -1)
        K = self.base.K
        for j in range(self.model.nv):
            for k in range(3):
                col = n_rigid + 4 * j + 1 + k
                rows = np.flatnonzero(np.abs(K[:, col]) > 1e-12)
                if len(rows) == 1 and abs(K[rows[0], col] - 1.0) < 1e-12 and \
                        np.count_nonzero(np.abs(K[rows[0]]) > 1e-12) == 1:
                    out[k, j] = rows[0]
        return out

    def __call__(self, q_f, v_f, a_f):
        """``Y_full`` (nv, 10 nb + 4 nv) at the filtered q_f, v_f, a_f (nv,): the rigid-body regressor
        (compiled kernel) and the joint columns ``[a_j, v_j, tanh(v_j / coulomb_width), 1]`` (armature,
        viscous, Coulomb, offset) of
        :func:`~robodyn_ros.identification.base_parameters.batch_joint_parameter_regressor`, written into
        one preallocated array (overwritten by the next call)."""
        Y = self._Y_full
        self.kernels.regressor(q_f, v_f, a_f, self._Y_rigid)
        Y[:, :self._Y_rigid.shape[1]] = self._Y_rigid
        rows, col = self._joint_columns
        Y[rows, col] = a_f
        Y[rows, col + 1] = v_f
        Y[rows, col + 2] = smooth_sign(v_f, self.coulomb_width)
        return Y

    def friction_variance(self, v_f):
        """The variance (nv,) of what no Coulomb model fixed in advance says about each joint's friction at the
        filtered velocity ``v_f``: ``(c_j (1 - tanh(|v_j| / FRICTION_SMOOTHING_MAX)))²`` with ``c_j``
        FRICTION_BOUND of the joint's torque scale. Near rest a joint's friction is stiction, anything up to its
        Coulomb level, and up to ``FRICTION_SMOOTHING_MAX`` it depends on how smoothly the friction turns
        over, which differs from joint to joint and robot to robot; beyond it every plausible model agrees. So
        the equations of joints near rest weigh little in the estimate (a Coulomb smoothing that is not the
        robot's would otherwise bias the Coulomb and viscous coefficients), while they still count where
        they carry information the other rows do not."""
        return (self.friction_bound * (1.0 - np.tanh(np.abs(v_f) / FRICTION_SMOOTHING_MAX))) ** 2

    def friction(self, beta):
        """``{"viscous", "coulomb", "offset": (nv,)}`` read from base parameters ``beta`` (r,) (or their
        standard deviations): NaN for a joint whose column is not a base parameter on its own."""
        beta = np.append(beta, np.nan)
        return {k: beta[self.friction_index[i]] for i, k in enumerate(("viscous", "coulomb", "offset"))}
