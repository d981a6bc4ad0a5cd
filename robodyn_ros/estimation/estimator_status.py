"""The online estimator's status: ``(level, message, values)`` as the estimator node reports it on
/diagnostics, and the update rate it measures.

``level`` is ``OK`` or ``WARN``; WARN when the configured torque noise is far below what the data show,
when the payload-change detector alarms again and again (:func:`repeated_change_note`), while an estimate is
paused (saturation, updates too sparse) and when the caller dropped malformed messages. ``values`` holds
the counters of every part (updates, dropped stamps, time jumps, saturations, gaps, outliers), the caller's
count of messages lost before it took them (``lost_<input>``, where it counts them), the payload and its
standard deviations, and the covariance traces.
"""
from __future__ import annotations

import time

import numpy as np


def repeated_change_note(events, t, count, window):
    """A line when the payload-change detector reported at least ``count`` changes (``events``: ``(time, payload
    mass before)``) within the ``window`` seconds up to joint-state time ``t``, else None (``count`` 0: never).
    A detector that alarms again and again is not seeing payloads: the model does not fit the robot, or the
    noise levels it normalises the innovations with are set below the real ones."""
    if count <= 0 or t is None:
        return None
    recent = [mass for t_event, mass in events if 0.0 <= t - t_event <= window]
    if len(recent) < count:
        return None
    return (f"payload change detected {len(recent)} times in the last {window:g} s (payload mass before them "
            f"from {min(recent):.3g} to {max(recent):.3g} kg): not payloads, but a model that does not fit the robot "
            "(the right URDF? identified parameters?) or noise levels (effort_noise, force_noise, torque_noise) "
            "below the real ones")


class UpdateRate:
    """Updates per second of wall time, measured over windows of at least one second (``hz``; 0 before the
    first window has passed)."""

    def __init__(self):
        self.hz = 0.0
        self._window = (time.monotonic(), 0)

    def count(self, updates):
        """Note the total number of updates so far."""
        start, count = self._window
        now = time.monotonic()
        if now - start >= 1.0:
            self.hz = (updates - count) / (now - start)
            self._window = (now, updates)


def status_values(est, pi, rejected, skipped_overload, lost=None):
    """The ``values`` of :func:`estimator_status` (module docstring) for ``est``, an
    :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator` whose live payload is pi (10,)."""
    gate = est.gate
    values = {"updates": est.updates, "update_rate_hz": float(est.update_rate_hz),
              "decimation": est.config["decimation"], "skipped_overload": skipped_overload,
              "payload_mass": float(pi[0]),
              "payload_changes": len(est.payload_events),
              "rejected_messages": sum(n for kind, n in rejected.items() if not kind.endswith("_stamp")),
              "dropped_stamps": gate.dropped_stamps, "time_jumps": gate.time_jumps,
              "wrench_saturated": gate.wrench_saturated, "effort_saturated": gate.effort_saturated,
              "sparse_gaps": gate.sparse_gaps}
    for kind, count in (lost or {}).items():
        values[f"lost_{kind}"] = count
    if est.wrench_rls is not None:
        std, converged = est.wrench_rls.std, est.publishing.last_converged
        values["payload_mass_std"] = float(std[0])
        values["payload_first_moment_std"] = float(std[1:4].max())
        values["payload_inertia_std"] = float(std[4:10].max())
        values["published_payload_mass"] = float(converged[0]) if converged is not None else float("nan")
        values["unconverged_publishes"] = est.publishing.unconverged_publishes
        values["wrench_covariance_trace"] = float(np.trace(est.wrench_rls.P))
        values["wrench_outliers"] = est.wrench_rls.rejected
    if est.base is not None:
        values["base_covariance_trace"] = float(np.trace(est.base_estimator.P))
        values["torque_outliers"] = est.base_estimator.rejected
        sigma = est.base_estimator.sigma
        if sigma is not None:
            values["effort_noise_learnt"] = [round(float(x), 6) for x in sigma]
        values["change_detector_armed"] = est.base_estimator.armed
    if est.effort_check is not None:
        values.update(est.effort_check.values())
    if est.stored_check is not None:
        values["initial_parameters"] = est.stored_check.verdict
        if est.stored_check.errors is not None:
            values["initial_parameters_error"], values["initial_parameters_error_urdf"] = est.stored_check.errors
    if est.payload_events:
        values["last_payload_change"], values["last_payload_change_mass_before"] = est.payload_events[-1]
    return values


def estimator_status(est, t, rejected=None, skipped_overload=0, lost=None):
    """``(level, message, values)`` of ``est`` (an :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator`)
    at joint-state time t (module docstring); ``rejected``: the caller's ``{message kind: count}`` of dropped
    messages (kinds ending in ``_stamp`` are dropped stamps, the others malformed messages),
    ``skipped_overload``: due samples it skipped, ``lost``: ``{input: count}`` of messages lost before it took
    them (``lost_<input>`` in ``values``; None: not counted)."""
    rejected = rejected or {}
    pi = est.payload_parameters()
    values = status_values(est, pi, rejected, skipped_overload, lost)
    level, notes = "OK", []
    if est.payload_events:
        t_change, mass_before = est.payload_events[-1]
        if t is not None and 0.0 <= t - t_change <= 1.0:
            notes.append(f"payload change detected at t = {t_change:.3f} s (mass before {mass_before:.3f} kg, "
                         f"now {float(pi[0]):.3f} kg)")
    if est.effort_check is not None and est.effort_check.verdict == "mismatch":
        level = "ERROR"
        notes.append(f"nothing learned from the joint torques is published: {est.effort_check.reason}")
    if est.stored_check is not None and est.stored_check.verdict == "refused":
        level = "WARN" if level == "OK" else level
        notes.append(est.stored_check.reason)
    if est.base is not None:
        low = est.base_estimator.sigma_too_low()
        if len(low):
            rms = est.base_estimator.innovation_rms
            level = "WARN" if level == "OK" else level
            notes.append("torque noise set far below what the data show (" + ", ".join(
                f"{est.model.joint_names[j]} {est.base_estimator.sigma[j]:.3g} N m, residual {rms[j]:.3g}"
                for j in low) + "): leave effort_noise unset to learn it")
    repeated = repeated_change_note(est.payload_events, t, est.config["change_alarms.count"],
                                    est.config["change_alarms.window"])
    if repeated is not None:
        level = "WARN" if level == "OK" else level
        notes.append(repeated)
    paused = est.gate.paused(t)
    if paused:
        level = "WARN" if level == "OK" else level
        notes.append(f"estimation paused: {', '.join(paused)}")
    malformed = {kind: n for kind, n in rejected.items() if not kind.endswith("_stamp")}
    if malformed:
        level = "WARN" if level == "OK" else level
        notes.append(f"dropped malformed messages: {malformed}")
    return level, "; ".join(notes) if notes else "estimating", values
