"""How heavy a payload a robot can carry along a motion, within its effort limits.

The joint torques of the inverse dynamics are linear in the inertial parameters, ``τ = Y(q, q̇, q̈) π``, and a
payload of mass ``m`` whose shape and centre of mass are fixed (a box of given edges at a given point of its link)
has parameters ``m π₁``, so along a reference ``(q_d, q̇_d, q̈_d)(t)`` the torques with the payload are affine in
``m``:

    τ(t; m) = τ₀(t) + m τ₁(t),     τ₁ = Y(q_d, q̇_d, q̈_d) π₁    (the torques per kg of payload)

The robot carries ``m`` along the motion with headroom ``margin`` when ``|τ_j(t; m)| <= margin τ_max,j`` at every
sample and joint, that is (given ``|τ₀,j| <= margin τ_max,j``)

    m <= min over t, j with τ₁,j ≠ 0 of (margin τ_max,j - sign(τ₁,j) τ₀,j) / |τ₁,j|.

The headroom is the feedback's: a controller that tracks with the model's torques needs some of the effort
range to correct errors (and, before it has learned the payload, to hold it at all)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..estimation.estimator_parameters import COULOMB_WIDTH
from ..identification.batch import predict_torques
from ..identification.batch_regressor import batch_regressor
from ..identification.sensor_wrench import link_inertia_in_body
from .simulator import Payload

MARGIN = 0.9          # of each joint's effort limit: what the torques of the motion and the payload may use
SAMPLE_PERIOD = 0.01  # s between the samples of the reference


class PayloadCapacity(NamedTuple):
    """``motion_ratio`` (nv,): the largest ``|τ₀,j| / τ_max,j`` along the motion without a payload;
    ``mass``: the largest payload mass within ``margin`` (0 when the motion alone exceeds it, inf when the
    payload loads no joint); ``joint``: the joint that bounds it (None when nothing does)."""

    motion_ratio: np.ndarray
    mass: float
    joint: str | None
    margin: float


def payload_capacity(model, reference, link, com, duration, margin=MARGIN, size=(0.1, 0.1, 0.1),
                     coulomb_width=COULOMB_WIDTH):
    """The :class:`PayloadCapacity` of ``model`` (its own inertial parameters and ``effort_limit``) for a box
    payload of edges ``size`` centred at ``com`` (3,) in ``link``'s frame, along ``reference.evaluate(t)`` on
    [0, ``duration``] every ``SAMPLE_PERIOD`` s (module docstring); ``τ₀`` with the model's armature and
    friction (Coulomb sign ``tanh(v / coulomb_width)``). Joints without a finite positive effort limit bound
    nothing."""
    t = np.arange(0.0, float(duration) + 1e-9, SAMPLE_PERIOD)
    Q, V, A = (np.array(x, dtype=float) for x in zip(*(reference.evaluate(s) for s in t)))
    tau_0 = predict_torques(model, Q, V, A, coulomb_width)          # rigid body, armature and friction
    limit = np.asarray(model.effort_limit, dtype=float)
    limited = np.isfinite(limit) & (limit > 0.0)
    motion_ratio = np.where(limited, np.abs(tau_0) / np.where(limited, limit, 1.0), 0.0).max(axis=0)
    if np.any(motion_ratio > margin):                               # no room for any payload
        return PayloadCapacity(motion_ratio, 0.0, model.joint_names[int(np.argmax(motion_ratio))], float(margin))
    body = model.frames[link].body
    unit = np.zeros(10 * model.nbodies)
    unit[10 * body:10 * body + 10] = link_inertia_in_body(model, Payload.box(link, 1.0, com, size).pi, link)
    tau_1 = batch_regressor(model, Q, V, A) @ unit                   # per kg of payload
    loaded = limited & (np.abs(tau_1) > 1e-12)
    room = np.full(tau_1.shape, np.inf)
    bound = np.broadcast_to(margin * limit, tau_1.shape)
    room[loaded] = (bound[loaded] - np.sign(tau_1[loaded]) * tau_0[loaded]) / np.abs(tau_1[loaded])
    per_joint = room.min(axis=0)
    j = int(np.argmin(per_joint))
    if not np.isfinite(per_joint[j]):
        return PayloadCapacity(motion_ratio, np.inf, None, float(margin))
    return PayloadCapacity(motion_ratio, max(float(per_joint[j]), 0.0), model.joint_names[j], float(margin))
