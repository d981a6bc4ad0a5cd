"""Sample admission: which joint states and wrenches the online estimator takes, and when what it filtered
from them may be trusted.

* Stamps: a joint state or wrench whose stamp repeats or goes back by at most ``time_jump_threshold`` is
  dropped; a jump of more than ``time_jump_threshold`` either way (simulation reset, bag loop, a gap) is a
  clock jump, after which the estimator restarts its filters and keeps its estimate.
* Decimation: every ``decimation``-th admitted joint state is due.
* Settling: after every filter (re)start the estimates wait ``settle_time`` = 3 / ``filter.cutoff``.
* Saturation: a wrench with any |f_i| >= ``wrench_saturation.force`` or |t_i| >= ``wrench_saturation.torque``
  (0: off) is kept out of the wrench filter and pauses the payload estimate for ``settle_time``; a joint
  torque at ``effort_saturation`` times the URDF effort limit pauses the base-parameter estimate likewise.
* Sparse updates: two updates more than ``filter.max_interval`` apart alias the filter's band, so the
  estimates pause for ``settle_time`` after every such gap: a starved estimator stops estimating instead of
  publishing wrong payloads.
"""
from __future__ import annotations

import numpy as np


class SampleGate:
    """The admission state of one estimator (module docstring).

    config: the estimator configuration (:func:`~robodyn_ros.estimation.online_estimator.estimator_config`);
    effort_limit (nv,): the URDF effort limits (N m, 0: none); report: ``report(kind, text)`` called on a
    dropped stamp (kinds ``joint_states_stamp``, ``wrench_stamp``) and on a pause (``time_jump``,
    ``wrench_saturated``, ``sparse``). Counters: ``samples`` (joint states admitted), ``dropped_stamps``,
    ``time_jumps``, ``wrench_saturated``, ``effort_saturated``, ``sparse_gaps``."""

    def __init__(self, config, effort_limit, report):
        c = config
        self.report = report
        self.threshold = c["time_jump_threshold"]
        self.decimation = c["decimation"]
        self.settle_time = 3.0 / c["filter.cutoff"]
        self.max_interval = c["filter.max_interval"] if c["filter.max_interval"] > 0.0 else 1.0 / c["filter.cutoff"]
        saturation = np.array([c["wrench_saturation.force"]] * 3 + [c["wrench_saturation.torque"]] * 3)
        self.wrench_limit = np.where(saturation > 0.0, saturation, np.inf)
        fraction = c["effort_saturation"]
        limit = np.asarray(effort_limit, dtype=float)
        self.effort_limit = np.where((fraction > 0.0) & (limit > 0.0), fraction * limit, np.inf)
        self.samples = 0
        self.dropped_stamps = self.time_jumps = 0
        self.wrench_saturated = self.effort_saturated = self.sparse_gaps = 0
        self.restart()

    def restart(self):
        """Forget the timeline (stamps, settling, saturation pauses); the counters are kept."""
        self.last_t = None               # stamp of the last admitted joint state
        self.latest_wrench = None        # (t, w) the next update uses
        self._settled_at = None          # joint-state time from which the filters have settled
        self._wrench_clean_at = -np.inf  # joint-state time after which the last saturated wrench has decayed
        self._effort_clean_at = -np.inf
        self.last_update_t = None        # joint-state time of the last update (filter step)
        self.update_step = 1e-3          # s between the last two updates
        self._dense_at = -np.inf         # joint-state time after which the filters have settled on dense samples

    def admit_wrench(self, t, w):
        """Stamp and saturation checks of one wrench (6,) at time t: ``(t, w)``, now ``latest_wrench``, or
        None (dropped: a repeated or slightly older stamp; or saturated, which pauses the payload estimate)."""
        if self.latest_wrench is not None:
            previous = self.latest_wrench[0]
            if previous - self.threshold <= t <= previous:
                self.dropped_stamps += 1
                self.report("wrench_stamp", f"wrench stamp {t:.6f} s is not after the previous {previous:.6f} s "
                                            "(duplicate or out of order)")
                return None
        if np.any(np.abs(w) >= self.wrench_limit):
            # a clipped sample is wrong by an unknown amount: keep it out of the filter and pause the RLS
            self.wrench_saturated += 1
            self._wrench_clean_at = t + self.settle_time
            self.report("wrench_saturated", f"F/T sensor saturated ({self.wrench_saturated} samples so far): "
                        f"|w| = {np.round(np.abs(w), 3).tolist()}; payload estimation paused")
            return None
        self.latest_wrench = (t, w)
        return self.latest_wrench

    def time_jump(self, t):
        """Whether a joint state at time t is a clock jump from the last one (counted and reported); the
        caller then restarts its time-dependent state."""
        if self.last_t is None:
            return False
        step = t - self.last_t
        if abs(step) <= self.threshold:
            return False
        self.time_jumps += 1
        self.report("time_jump", f"joint-state time jumped by {step:+.3f} s (simulation reset, bag loop "
                                 "or gap): filters restarted, estimate kept")
        return True

    def admit(self, t):
        """Stamp check and the decimation count of one joint state at time t (after :meth:`time_jump`): True
        when it is due (every ``decimation``-th admitted sample), False when dropped (a repeated or older
        stamp) or not due."""
        if self.last_t is not None and t - self.last_t <= 0.0:
            self.dropped_stamps += 1
            self.report("joint_states_stamp", f"joint_states stamp {t:.6f} s is not after the previous "
                                              f"{self.last_t:.6f} s (duplicate or out of order)")
            return False
        self.last_t = t
        self.samples += 1
        return not (self.samples - 1) % self.decimation

    def step(self, t, tau):
        """One due joint state at time t with torques tau (nv,) or None, before it is filtered: records effort
        saturation and update gaps. Returns whether the joint filter has settled (since its start and since
        the last gap)."""
        if self._settled_at is None:
            self._settled_at = t + self.settle_time
        if tau is not None and np.any(np.abs(tau) >= self.effort_limit):
            self.effort_saturated += 1
            self._effort_clean_at = t + self.settle_time
        if self.last_update_t is not None and t - self.last_update_t > self.max_interval:
            # samples this far apart alias the filter's band: its accelerations are wrong until it settles
            self.sparse_gaps += 1
            self._dense_at = t + self.settle_time
            self.report("sparse", f"estimator updates {1e3 * (t - self.last_update_t):.1f} ms apart "
                        f"(> {1e3 * self.max_interval:.1f} ms, filter.max_interval): falling behind or "
                        "decimating too coarsely; estimation paused until the filters settle")
        if self.last_update_t is not None:
            self.update_step = t - self.last_update_t
        self.last_update_t = t
        return t >= self._settled_at and t >= self._dense_at

    def wrench_clean(self, t):
        """Whether the last saturated wrench has decayed out of the filter at joint-state time t."""
        return t >= self._wrench_clean_at

    def effort_clean(self, t):
        """Whether the last saturated joint torque has decayed out of the filter at joint-state time t."""
        return t >= self._effort_clean_at

    def paused(self, t):
        """What pauses the estimates at joint-state time t (a list of phrases; empty: nothing)."""
        return [what for what, until in (("wrench saturated", self._wrench_clean_at),
                                         ("effort saturated", self._effort_clean_at),
                                         ("updates too sparse (falling behind)", self._dense_at))
                if t is not None and t < until]
