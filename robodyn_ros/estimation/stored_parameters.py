"""A stored estimate as a starting point, judged before it is trusted, and the estimate stored again.

A parameter file of ``robodyn identify``, ``robodyn replay`` or the estimator's ``~/save`` (the format of
shared/API.md: ``links:`` with each body's mass, centre of mass and inertia about it, ``joints:`` with armature
and friction) describes one robot with one tool. Started from it, a node learns nothing it already knew,
but a file of another robot or another tool would make every command wrong from the first one. So the file
is judged like any estimate before it is used:

* :func:`stored_parameters` reads it onto the model (names checked, :func:`~robodyn_ros.identification.results.
  model_from_parameters`) and gives its base parameters ``β_file = K π_full(file)`` (``β = K π_full`` the
  base-parameter map) and the consistent full parameters ``θ_file = [π, f_v, f_c, f_o]`` a controller's
  model takes;
* :class:`StoredParameterCheck` (the estimator) compares, over the first ``duration`` s of motion, the
  relative joint-torque error of ``β_file`` and of the URDF's ``β_nom`` on the filtered samples,
  ``ε(β)² = Σ_j Σ_k (τ_jk - (Y_k β)_j)² / Σ_k τ_jk²`` summed over the joints (each joint weighed by its own
  torques, so a wrist counts as much as a shoulder); the file is taken when ``ε(β_file) <= (1 -
  improvement) ε(β_nom)``, else refused with the two errors in words. Taken, it becomes the mean of the
  estimator's prior (:meth:`~robodyn_ros.estimation.base_parameter_estimator.BaseParameterEstimator.
  set_prior_mean`): what the data add is learnt on top of it. A controller judges the file with its own
  parameter gate (:class:`~robodyn_ros.control.base_parameter_update.BaseParameterUpdate`);
* :func:`estimate_document` writes an estimator's base-parameter estimate (an :class:`EstimateSnapshot`) in
  the same format (the physically consistent parameters closest to it, weighed by the information the
  estimator holds, :func:`~robodyn_ros.identification.least_squares.consistent_fit`), so that the next start
  reads it back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..identification.base_parameters import full_parameters
from ..model.errors import ModelError

MOTION_SPEED = 0.05     # rad/s: a sample counts as motion when a joint moves faster (as the effort check)


class StoredParameters:
    """A parameter file read onto a model: ``model`` (the model with the file's inertias, armature and
    friction), ``beta`` (r,) its base parameters, ``theta`` (10 nb + 3 nv,) its ``[π, f_v, f_c, f_o]``,
    ``source`` the file."""

    def __init__(self, model, beta, theta, source):
        self.model, self.beta, self.theta, self.source = model, beta, theta, source


def stored_parameters(model, base, path):
    """:class:`StoredParameters` of the parameter file ``path`` on ``model`` (base-parameter map ``base``);
    ModelError in one line naming the file and what is wrong with it (a link or joint the model does not
    have, a missing or non-finite number, a negative mass, not the format of ``robodyn identify``)."""
    from ..identification.results import model_from_parameters
    stored = model_from_parameters(model, path)
    beta = base.from_full(full_parameters(stored))
    theta = np.concatenate([stored.inertial_parameters(), stored.viscous, stored.coulomb, stored.friction_offset])
    if not np.all(np.isfinite(beta)):
        raise ModelError(f"{path}: its parameters are not finite on {model.name}")
    return StoredParameters(stored, beta, theta, str(path))


class StoredParameterCheck:
    """The judgement of a stored estimate ``beta_file`` (r,) against the nominal ``beta_nominal`` (module
    docstring) over ``duration`` s of motion. :attr:`verdict` is ``"pending"``, then ``"taken"`` or
    ``"refused"`` with :attr:`reason` in words."""

    def __init__(self, beta_file, beta_nominal, source, duration=2.0, improvement=0.1):
        self.beta_file = np.asarray(beta_file, dtype=float)
        self.beta_nominal = np.asarray(beta_nominal, dtype=float)
        self.source, self.duration, self.improvement = str(source), float(duration), float(improvement)
        self.verdict, self.reason = "pending", ""
        self.motion_time, self._t = 0.0, None
        self._sums = None     # per joint: Σ e_file², Σ e_nom², Σ τ²
        self.errors = None    # (ε_file, ε_nom) once judged

    @classmethod
    def unreadable(cls, source, why):
        """The check of a file that cannot be read onto the robot: refused at once, ``why`` the reason."""
        check = cls(np.zeros(0), np.zeros(0), source)
        check.verdict, check.reason = "refused", f"initial_parameters refused: {why}: starting from the URDF"
        return check

    def observe(self, t, Y, tau, v):
        """One filtered sample at time t: ``Y`` (nv, r), ``tau`` (nv,), ``v`` (nv,). Returns the verdict."""
        if self.verdict != "pending":
            return self.verdict
        previous, self._t = self._t, float(t)
        if previous is None or t <= previous or np.max(np.abs(v)) < MOTION_SPEED:
            return self.verdict
        self.motion_time += t - previous
        rows = np.stack([(tau - Y @ self.beta_file) ** 2, (tau - Y @ self.beta_nominal) ** 2, tau ** 2])
        self._sums = rows if self._sums is None else self._sums + rows
        if self.motion_time >= self.duration:
            self._judge()
        return self.verdict

    def _judge(self):
        scale = np.maximum(self._sums[2], 1e-12 * max(float(np.max(self._sums[2])), 1e-300))
        eps_file, eps_nom = (float(np.sqrt(np.sum(self._sums[i] / scale) / len(scale))) for i in (0, 1))
        self.errors = (eps_file, eps_nom)
        versus = (f"relative joint-torque error {100 * eps_file:.1f} % against the URDF's {100 * eps_nom:.1f} % over "
                  f"{self.motion_time:.1f} s of motion")
        if eps_file <= (1.0 - self.improvement) * eps_nom:
            self.verdict, self.reason = "taken", f"initial_parameters {self.source} taken: {versus}"
        else:
            self.verdict = "refused"
            self.reason = (f"initial_parameters {self.source} refused: it predicts this robot no better than the "
                           f"URDF ({versus}; a file of another robot or tool?): starting from the URDF")


@dataclass
class EstimateSnapshot:
    """What :func:`estimate_document` needs of an estimator, copied at one instant (cheap, so a node takes it
    in its own thread and writes the file in another): the ``model`` and base-parameter map ``base``, the
    estimate ``beta`` (r,), its covariance ``P`` (r, r), the learnt torque noise ``sigma`` (nv,) or None, the
    information of the data ``A_data`` (r, r), the one-step ``prediction_error``, the ``updates`` taken, the
    filter (``cutoff`` Hz, ``order``), ``coulomb_width`` and ``extra`` top-level entries of the document."""

    model: object
    base: object
    beta: np.ndarray
    P: np.ndarray
    sigma: np.ndarray | None
    A_data: np.ndarray
    prediction_error: float
    updates: int
    cutoff: float
    order: int
    coulomb_width: float
    extra: dict = field(default_factory=dict)


def estimate_document(snapshot, robot=None):
    """The parameter document (``robodyn identify``'s format, a dict) of an :class:`EstimateSnapshot`: the
    consistent full parameters closest to ``β`` in the metric of the information ``P⁻¹`` the estimator held,
    the friction and armature with them; ``fit.relative_error`` is the one-step prediction error over the
    samples taken (each predicted by the estimate before it), ``fit.condition_number`` that of the
    information matrix of the data (weighted), ``fit.samples`` the updates. Takes 1-3 s (the consistent
    fit, IPOPT)."""
    from ..identification.batch import IdentificationResult, model_with_full_parameters
    from ..identification.least_squares import LeastSquaresFit, consistent_fit
    from ..identification.results import result_document

    s, model = snapshot, snapshot.model
    P = 0.5 * (s.P + s.P.T)
    R_w = np.linalg.cholesky(np.linalg.inv(P)).T
    sigma = np.asarray(s.sigma if s.sigma is not None else np.ones(model.nv), dtype=float)
    singular = np.linalg.svd(0.5 * (s.A_data + s.A_data.T), compute_uv=False)
    condition = float(np.sqrt(singular[0] / singular[-1])) if singular[-1] > 0 else float("inf")
    fit = LeastSquaresFit(beta=np.array(s.beta, dtype=float), std=np.sqrt(np.clip(np.diag(P), 0.0, None)), cov=P,
                          weights=1.0 / np.maximum(sigma, 1e-12) ** 2, sigma=sigma, R_w=R_w,
                          condition_number=condition, relative_error=float(s.prediction_error), samples=int(s.updates))
    cfit = consistent_fit(model, s.base, fit)
    result = IdentificationResult(nominal=model, identified=model_with_full_parameters(model, cfit.pi_full),
                                  base=s.base, fit=fit, consistent=cfit, cutoff_hz=s.cutoff,
                                  coulomb_width=s.coulomb_width, samples_used=int(s.updates))
    doc = result_document(result, robot=robot, extra=s.extra)
    doc["signal_processing"] = {"lowpass_cutoff_hz": float(s.cutoff),
                                "filter": f"causal Butterworth of order {s.order} "
                                          "(robodyn_ros.identification.signal_filters), same on q, v, tau"}
    return doc


def write_estimate(snapshot, path, robot=None):
    """Write :func:`estimate_document` of ``snapshot`` to ``path`` (YAML, atomically: a failure leaves no
    partial file); returns one line saying what was written. ModelError (the fit) or OSError (the file) on
    failure."""
    from ..identification.results import write_atomically, yaml_text
    doc = estimate_document(snapshot, robot=robot)
    write_atomically({path: yaml_text(doc)})
    t = snapshot.extra.get("estimate", {}).get("t")
    when = "" if t is None else f" at t = {t:.3f} s"
    return (f"wrote {path}: the estimate{when} ({snapshot.updates} joint-torque samples, one-step prediction error "
            f"{100 * snapshot.prediction_error:.2f} %)")
