"""How near a twin run's adaptation comes to what its joint torques allow: the Cramér–Rao bound
(:mod:`robodyn_ros.estimation.cramer_rao_bound`) of the run's reference, plant noise and rate, beside the model
error of the estimator's estimate and of the parameters the controller applied, second by second.

The bound is taken along one period of the reference (its ``period``, else the time before the payload),
sampled every ``STEP`` s: the nominal model's base regressor (the plant moves as the model does), the plant's
own inverse mass matrix (armature included: the acceleration the robot really gets), the plant's joint-torque
noise (else the loop's ``effort_noise``) measured at the emulated driver's rate. The model errors of the run's
estimates are measured against the plant's own base parameters on the same samples, up to the payload's
attachment (after it the robot is another one).
"""
from __future__ import annotations

import numpy as np

from ..dynamics.crba import crba
from ..estimation.cramer_rao_bound import learning_bound, model_error, model_error_for_oracle
from ..identification.base_parameters import compute_base_parameters, full_parameters
from .driver_emulation import driver_config

STEP = 0.02
"""s between the reference samples the bound and the model errors are taken on (on the Panda's default motion the
bound differs by 3e-7 relative from samples every 4 ms, whose mass matrices cost five times as long)."""
ORACLE_FACTOR = 2.0
"""The oracle's ``time_to_oracle`` factor (:func:`robodyn_ros.simulation.adaptive_loop.time_to_oracle`)."""


def reference_samples(model, plant_model, base, reference, span, step=STEP):
    """``(Y (n, nv, r), M⁻¹ (n, nv, nv))`` along ``reference`` over ``[0, span)`` every ``step`` s: ``base``'s
    regressor of ``model`` and the inverse mass matrix of ``plant_model``."""
    ts = np.arange(0.0, span, step)
    Q, V, A = (np.array(x, dtype=float) for x in zip(*[reference.evaluate(t) for t in ts]))
    Y = np.asarray(base.regressor(model, Q, V, A), dtype=float).reshape(len(ts), model.nv, -1)
    Minv = np.array([np.linalg.inv(crba(plant_model, q)) for q in Q])
    return Y, Minv


def plant_beta(base, plant):
    """The plant's own base parameters in ``base``'s columns (armature and friction included), or None when the
    plant is not of the model's structure (other independent columns)."""
    plant_base = compute_base_parameters(plant.model, coulomb_width=base.coulomb_width)
    if not np.array_equal(plant_base.independent, base.independent):
        return None
    return base.from_full(full_parameters(plant.model))


def learning_report(model, plant, base, reference, config, adapted, oracle_rms):
    """The report's ``learning_bound`` and ``model_error_seconds`` for a twin run (module docstring):

    ``learning_bound``: ``model_error_1s`` (ε₁, rad/s²), ``directions`` excited of ``parameters``, the ``effort_std``
    (N m) and ``rate`` (Hz) assumed, the ``period`` (s) it was taken over, and for computed torque and Slotine-Li
    (whose closed loop the relation of the estimation module describes) ``model_error_for_2x_oracle`` and
    ``time_to_oracle_bound`` (s of the motion before any estimate from these torques can track within 2 x the
    oracle; None without the oracle's RMS);

    ``model_error_seconds``: ``[t, bound ε(t), the estimator's estimate's error, the applied parameters' error]``
    at every whole second before the payload (empty when the plant is not of the model's structure, or the run
    kept no estimates). ``adapted``: the adaptive loop's series (``t_estimate``, ``estimate``, ``beta``; the
    nodes' run has no ``estimate``)."""
    span = float(getattr(reference, "period", 0.0) or (config.attach_time or config.duration))
    Y, Minv = reference_samples(model, plant.model, base, reference, span)
    sigma = np.asarray(plant.effort_noise if plant.effort_noise is not None else config.effort_noise, dtype=float)
    rate = float(driver_config(config.driver)["rate"])
    bound = learning_bound(Y, Minv, np.broadcast_to(sigma, (model.nv,)), rate)
    summary = {"model_error_1s": bound.epsilon_1s, "directions": bound.directions, "parameters": bound.parameters,
               "effort_std": list(bound.sigma), "rate": rate, "period": span}
    if config.controller != "mpc":
        target = model_error_for_oracle(config.kp, oracle_rms, ORACLE_FACTOR) if oracle_rms else None
        summary["model_error_for_2x_oracle"] = target
        summary["time_to_oracle_bound"] = bound.time_to(target) if target else None
    seconds = []
    beta = plant_beta(base, plant)
    t_est = np.asarray(adapted.get("t_estimate", []))
    end = config.attach_time if config.attach_time is not None else config.duration
    if beta is not None and len(t_est) and "estimate" in adapted and "beta" in adapted:
        for t in np.arange(1.0, end + 1e-9, 1.0):
            i = int(np.searchsorted(t_est, t - 1e-9, side="right")) - 1
            if i < 0:
                continue
            estimate, applied = model_error(Y, Minv, np.array([adapted["estimate"][i] - beta,
                                                               adapted["beta"][i] - beta]))
            seconds.append([float(t), bound.model_error(t), float(estimate), float(applied)])
    return {"learning_bound": summary, "model_error_seconds": seconds}
