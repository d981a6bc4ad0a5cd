"""Payload estimation: the inertial parameters ``π_p`` (10,) of a load at the wrist, online.

* From the wrist wrench (:class:`WrenchPayloadEstimator`): recursive least squares on
  ``w = Y_b(q, q̇, q̈) π_p + b`` in the sensor frame (:mod:`robodyn_ros.identification.sensor_wrench`: the
  load's Newton-Euler equations, linear in its parameters, Atkeson, An & Hollerbach 1986), b the sensor
  bias; a CUSUM test (Page 1954) on the innovations detects a payload change and re-opens the payload
  covariance (:class:`~robodyn_ros.estimation.recursive.RecursiveLeastSquares`).
* From the joint torques, referenced to the estimate before the change (:class:`TorqueResidualPayload`):
  a 10-parameter RLS on the torque residual of the base-parameter estimate held just before the detected
  change, ``τ_f - Y_base β_ref = Y_last π_p`` (Y_last: the last body's columns of the full regressor).

Detected changes of either source are recorded by :class:`PayloadChanges`.
"""
from __future__ import annotations

import numpy as np

from ..identification.payload import PayloadChangeDetector
from ..identification.sensor_wrench import SensorWrenchRegressor
from ..identification.signal_filters import CausalButterworthFilter
from .recursive import RecursiveLeastSquares

PAYLOAD_EVENT_WINDOW = 0.5  # s: detector alarms this close to the previous one report the same change
PAYLOAD_REFERENCE_WINDOW = 3.0  # s: payload_reference before_change keeps its reference through re-alarms this close


def payload_prior_variance(mass_std, length=0.2):
    """Prior / boost variances (10,) of a payload's parameters: mass ``mass_std``², first moments
    ``(mass_std length)``², inertias ``(mass_std length²)``² (a load within ``length`` of the flange)."""
    return np.array([mass_std**2] + [(mass_std * length) ** 2] * 3 + [(mass_std * length**2) ** 2] * 6)


class WrenchPayloadEstimator:
    """The payload (and, with ``estimate_bias``, the sensor bias) from the wrench measured at ``wrist_link``
    of ``model`` (module docstring). config: the estimator configuration (``filter.cutoff``,
    ``filter.order``, ``estimate_bias``, ``payload_mass_std``, ``force_noise``, ``torque_noise``,
    ``forgetting``, ``change_threshold``, ``time_jump_threshold``).

    The wrench runs through its own causal Butterworth filter, the joint states' (same delay); the filter
    restarts when the sensor's clock jumps back, and the RLS waits ``3 / filter.cutoff`` after each start."""

    def __init__(self, model, wrist_link, config):
        c = config
        self.regressor = SensorWrenchRegressor(model, wrist_link)
        self.filter = CausalButterworthFilter(6, c["filter.cutoff"], c["filter.order"])
        n = 16 if c["estimate_bias"] else 10
        P0 = np.concatenate([payload_prior_variance(c["payload_mass_std"]), [100.0] * 3 + [1.0] * 3])[:n]
        self.rls = RecursiveLeastSquares(
            np.zeros(n), P0, [c["force_noise"]] * 3 + [c["torque_noise"]] * 3, forgetting=c["forgetting"],
            trace_max=10.0 * P0.sum(), boost_indices=np.arange(10), boost_variance=P0[:10],
            detector=PayloadChangeDetector(threshold=c["change_threshold"]))
        self.threshold = c["time_jump_threshold"]
        self.settle_time = 3.0 / c["filter.cutoff"]
        self.w_f = None
        self.restart()

    def restart(self):
        """Restart the wrench filter and its timeline (the estimate is kept)."""
        self.filter.reset()
        self.last_t = None               # stamp of the last wrench fed to the filter
        self._settled_at = None          # joint-state time from which the filter has settled

    def filter_wrench(self, t, t_w, w):
        """Feed the wrench w (6,) stamped t_w to the filter at joint-state time t, unless it is already in;
        returns whether the filtered wrench may be used at t (same timeline as the joint states, filter
        settled)."""
        if self.last_t is not None and t_w < self.last_t - self.threshold:
            self.filter.reset()          # the sensor's clock jumped back: restart its filter
            self.last_t = None
        if self.last_t is None or t_w > self.last_t:
            if self.last_t is None:
                self._settled_at = t + self.settle_time
            self.last_t = t_w
            self.w_f = self.filter.update(t_w, w)[0]
        return abs(t - t_w) <= self.threshold and t >= self._settled_at

    def update(self, q_f, v_f, a_f):
        """RLS update on the filtered wrench with the filtered joint state q_f, v_f, a_f (nv,). Returns the
        payload mass before the update when the change detector fired, else None."""
        Y = self.regressor(q_f, v_f, a_f)
        if self.rls.beta.size == 16:
            Y = np.hstack([Y, np.eye(6)])
        mass_before = float(self.rls.beta[0])
        return mass_before if self.rls.update(Y, self.w_f).change_detected else None

    def parameters(self):
        """The payload estimate (10,) about the sensor frame."""
        return self.rls.beta[:10].copy()

    @property
    def std(self):
        """Standard deviations (10,) of :meth:`parameters`."""
        return self.rls.std[:10]


class TorqueResidualPayload:
    """The payload from joint torques referenced to the estimate before the change (module docstring):
    zero until a change is referenced, then the payload held at that change plus the RLS on the residual of
    ``β_ref``.

    last_body: index of the body carrying the load; mass_std: prior std of its mass (kg); holdoff: changes
    within this many seconds of the first base-parameter update are the estimate converging, not a load;
    cutoff: the joint filter's cutoff (Hz), which sets how much of an independent sample each update is."""

    def __init__(self, last_body, mass_std, holdoff, cutoff):
        self.columns = slice(10 * last_body, 10 * last_body + 10)
        self.holdoff, self.cutoff = holdoff, cutoff
        self.beta_ref = None
        self.reference = np.zeros(10)
        self.reference_t = None
        self.references = []             # times at which a detected change became the payload's reference
        self.rls = RecursiveLeastSquares(np.zeros(10), payload_prior_variance(mass_std), 1.0, forgetting=1.0,
                                         detector=None)

    def parameters(self):
        """The payload (10,) about the last body's frame."""
        return self.reference + (self.rls.beta if self.beta_ref is not None else 0.0)

    @property
    def std(self):
        """Standard deviations (10,) of the RLS part of :meth:`parameters`, None before the first reference."""
        return self.rls.std if self.beta_ref is not None else None

    def change(self, t, beta_before, started_at, sigma, update_step):
        """A change detected at t: unless it falls within ``holdoff`` s of the first base-parameter update
        (``started_at``) or within PAYLOAD_REFERENCE_WINDOW of the last reference (the same change
        re-alarming), the payload so far becomes the reference, ``β_ref`` the estimate ``beta_before`` (r,)
        before this sample, and the RLS restarts with the torque noise sigma (nv,) of the base estimate."""
        if t - started_at < self.holdoff:
            return
        if self.reference_t is not None and t - self.reference_t <= PAYLOAD_REFERENCE_WINDOW:
            return
        self.reference = self.parameters()
        self.beta_ref = beta_before
        self.reference_t = t
        self.references.append(float(t))
        self.rls.reset()
        # the payload RLS takes samples as independent: σ of the filtered torques over the share of an
        # independent sample each one is (BaseParameterEstimator's c_k)
        share = min(1.0, 2.0 * self.cutoff * max(update_step, 1e-6))
        self.rls.set_noise_std(sigma / np.sqrt(share))

    def update(self, Y_full, Y_base, tau_f, sigma, friction_variance):
        """RLS update on one filtered sample once a change is referenced: Y_full (nv, 10 nb + 4 nv), Y_base
        (nv, r), tau_f (nv,), the base estimate's sigma (nv,) and the friction variance (nv,) of the sample."""
        if self.beta_ref is None:
            return
        # rows scaled by σ / sqrt(σ² + friction variance): the friction near rest weighs as in the
        # base-parameter estimate
        s2 = sigma ** 2
        w = np.sqrt(s2 / (s2 + friction_variance))
        self.rls.update(w[:, None] * Y_full[:, self.columns], w * (tau_f - Y_base @ self.beta_ref))


class PayloadChanges:
    """The detected payload changes ``events``: ``(time, payload mass before)``. report: ``report(kind,
    text)``, called with kind ``payload_change`` on each."""

    def __init__(self, report):
        self.report = report
        self.events = []

    def record(self, t, mass_before, source):
        """Record a change detected at t from ``source``; alarms within PAYLOAD_EVENT_WINDOW of the previous
        one are the same physical event (the detector may re-alarm while the estimate is still moving)."""
        if self.events and 0.0 <= t - self.events[-1][0] <= PAYLOAD_EVENT_WINDOW:
            return
        self.events.append((float(t), float(mass_before)))
        self.report("payload_change", f"payload change detected from {source} at t = {t:.3f} s "
                                      f"(payload mass before: {mass_before:.3f} kg)")
