"""Held-out validation of identified joint-torque models: the relative torque error of each model on
samples the fit never saw, friction included, streamed block by block.

For a model with full parameters ``pi_full`` (rigid bodies, armature, friction; or base parameters
``beta`` of the unconstrained least squares) the prediction at the filtered states is
``tau_hat = Y_full(q_f, v_f, a_f) pi_full`` and the errors are, per joint j and overall,

    filtered: ||F tau_j - tau_hat_j|| / ||F tau_j||      raw: ||tau_j - tau_hat_j|| / ||tau_j||

(F the same zero-phase low-pass as for the fit, norms over the held-out samples). The filtered error
is the model error (Gaz et al. 2019 evaluate theirs this way); the raw error adds the measurement noise
above the cutoff, whose own size ``||tau - F tau|| / ||tau||`` is reported as ``noise_floor``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base_parameters import full_regressor


@dataclass
class TorqueValidation:
    """Sums of squares per predictor (dict name -> (nv,)) and the measured torques' (nv,), over
    ``samples`` held-out samples; ``plot``: a subsample ``{t, tau, tau_raw, <predictor>...}`` of at most
    ``plot_points`` rows for figures."""

    joint_names: tuple
    predictors: tuple
    samples: int = 0
    error_filtered: dict = field(default_factory=dict)
    error_raw: dict = field(default_factory=dict)
    norm_filtered: np.ndarray | None = None
    norm_raw: np.ndarray | None = None
    noise: np.ndarray | None = None
    plot: dict = field(default_factory=dict)

    def relative(self, name, raw=False):
        """``(per joint (nv,), overall)`` relative error of predictor ``name``."""
        err = (self.error_raw if raw else self.error_filtered)[name]
        ref = self.norm_raw if raw else self.norm_filtered
        return np.sqrt(err / ref), float(np.sqrt(err.sum() / ref.sum()))

    def to_dict(self):
        """The ``validation:`` section of the result YAML."""
        out = {"samples": int(self.samples),
               "relative_error": "||tau - tau_hat|| / ||tau|| over the held-out samples, friction included",
               "noise_floor_raw": float(np.sqrt(self.noise.sum() / self.norm_raw.sum()))}
        for kind, raw in (("filtered", False), ("raw", True)):
            section = {}
            for name in self.predictors:
                per_joint, overall = self.relative(name, raw)
                section[name] = {"overall": overall,
                                 "per_joint": {j: float(e) for j, e in zip(self.joint_names, per_joint)}}
            out[kind] = section
        return out


NOTHING_LEARNED = 0.95
"""Held-out error ratio (identified / nominal URDF) at or above which the identified model is said to predict
no better than the URDF: the data taught it nothing the URDF did not already say."""


def nothing_learned(validation):
    """One line when the identified model predicts the held-out (filtered) torques no better than the nominal
    URDF (its error at least NOTHING_LEARNED times the URDF's), else None. Expected when the robot is the URDF
    (a simulation of it); on a real robot it means the recording did not excite what the URDF gets wrong, or
    the torques are not the joint torques."""
    if "identified" not in validation.predictors or "nominal" not in validation.predictors:
        return None
    identified, nominal = validation.relative("identified")[1], validation.relative("nominal")[1]
    if not identified >= NOTHING_LEARNED * nominal:
        return None
    return (f"note: the identified model predicts the held-out torques no better than the URDF ({100 * identified:.2f} "
            f"% against {100 * nominal:.2f} %): nothing was learned from this bag that the URDF did not say (expected "
            "when the robot is a simulation of this URDF; on a real robot check the excitation and the effort "
            "settings)")


def validate_torques(model, blocks, parameters, coulomb_width=0.0, base=None, plot_points=20000,
                     expected_samples=None, chunk=8192):
    """Stream held-out filtered sample blocks (:class:`~robodyn_ros.identification.chunked_filter.SampleBlock`)
    through the predictors ``parameters`` (dict name -> full parameters (10 nb + 4 nv,) of ``model``'s
    layout, or ``("base", beta (r,))`` for base parameters of ``base``). Returns :class:`TorqueValidation`."""
    names = tuple(parameters)
    nv = model.nv
    out = TorqueValidation(joint_names=tuple(model.joint_names), predictors=names,
                           error_filtered={n: np.zeros(nv) for n in names}, error_raw={n: np.zeros(nv) for n in names},
                           norm_filtered=np.zeros(nv), norm_raw=np.zeros(nv), noise=np.zeros(nv))
    stride = max(1, int(np.ceil((expected_samples or plot_points) / plot_points)))
    plot = {k: [] for k in ("t", "tau", "tau_raw", *names)}
    seen = 0
    for block in blocks:
        for s in range(0, len(block.t), chunk):
            e = s + chunk
            Y = full_regressor(model, block.q[s:e], block.v[s:e], block.a[s:e], coulomb_width)
            tau_f, tau_raw = block.tau[s:e], block.tau_raw[s:e]
            out.norm_filtered += np.sum(tau_f ** 2, axis=0)
            out.norm_raw += np.sum(tau_raw ** 2, axis=0)
            out.noise += np.sum((tau_raw - tau_f) ** 2, axis=0)
            take = np.flatnonzero((seen + np.arange(len(tau_f))) % stride == 0)
            plot["t"].append(block.t[s:e][take]), plot["tau"].append(tau_f[take]), plot["tau_raw"].append(tau_raw[take])
            for name, p in parameters.items():
                if isinstance(p, tuple):
                    predicted = base.reduce(Y) @ p[1]
                else:
                    predicted = Y @ p
                out.error_filtered[name] += np.sum((tau_f - predicted) ** 2, axis=0)
                out.error_raw[name] += np.sum((tau_raw - predicted) ** 2, axis=0)
                plot[name].append(predicted[take])
            seen += len(tau_f)
    out.samples = seen
    out.plot = {k: np.concatenate(v) if v else np.zeros((0,)) for k, v in plot.items()}
    return out

