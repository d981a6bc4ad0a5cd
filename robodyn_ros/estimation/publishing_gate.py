"""The publishing gate of the online estimator: when an estimate is due (``publish_rate``, and
``diagnostics_rate`` for the status, both in joint-state time) and which payload may go out.

A payload estimated from the wrench is published once its standard deviations are within
``payload_publish_std``:

* mass and first moments within ``payload_publish_std.mass`` / ``.first_moment``, rotational inertia within
  ``payload_publish_std.inertia``: the estimate;
* mass and first moments within their bounds, inertia not yet: the estimate's mass at its centre of mass as
  a point mass (rotational inertia about the frame ``m (|c|^2 1 - c c^T)``, physically consistent; a
  compact load is close to it);
* otherwise the last payload published, or None before the first.

Right after a detected change the RLS covariance is re-opened and for some tens of milliseconds the
estimate sweeps through loads no robot carries (on a 2 kg payload: a rotational inertia about 50 times the
Panda's wrist link's, with a std of 0.5; mass and centre of mass settle within 30-40 ms, the inertia within
about 0.3 s); a controller applying those loses tracking. Without the wrench the estimate is the
base-parameter difference, published as it is.
"""
from __future__ import annotations

from ..identification.payload import point_mass_parameters


class PublishingGate:
    """The publishing schedule and the payload gate (module docstring) of one estimator. config: the
    estimator configuration (``publish_rate``, ``diagnostics_rate``, ``payload_publish_std.*``).
    ``last_converged``: the last payload (10,) let through, ``unconverged_publishes``: publishes at which the
    estimate was not converged."""

    def __init__(self, config):
        self.config = config
        self.last_converged = None
        self.unconverged_publishes = 0
        self.restart()

    def restart(self):
        """Restart the schedules (after a clock jump)."""
        self.last_publish = None
        self.last_diagnostics = None     # joint-state time of the last diagnostics

    def publish_due(self, t):
        """Whether an estimate is due at joint-state time t (``publish_rate``); if so, it counts as published."""
        if self.last_publish is None or t - self.last_publish >= 1.0 / self.config["publish_rate"] - 1e-9:
            self.last_publish = t
            return True
        return False

    def diagnostics_due(self, t):
        """Whether a diagnostics status is due at joint-state time t (``diagnostics_rate``); if so, it counts
        as sent."""
        if self.last_diagnostics is not None and t is not None \
                and 0.0 <= t - self.last_diagnostics < 1.0 / self.config["diagnostics_rate"] - 1e-9:
            return False
        self.last_diagnostics = t
        return True

    def converged(self, pi, std):
        """The payload (10,) to publish from the wrench estimate pi (10,) and its standard deviations std
        (10,) (module docstring), or None before the first converged one."""
        c = self.config
        within = lambda lo, hi, bound: bound <= 0.0 or std[lo:hi].max() <= bound  # noqa: E731
        if not (within(0, 1, c["payload_publish_std.mass"]) and within(1, 4, c["payload_publish_std.first_moment"])):
            self.unconverged_publishes += 1
            return self.last_converged
        if not within(4, 10, c["payload_publish_std.inertia"]):
            self.unconverged_publishes += 1
            pi = point_mass_parameters(pi[0], pi[1:4])
        self.last_converged = pi
        return pi
