"""Controllers consuming live base-parameter estimates from joint torques, on the Panda twin (a plant that
is not the model): the estimate reproduces the twin's torques, the gate rolls a diverging estimate back,
and the library-only closed loop adapts (tracking, payload from joint torques, no non-finite command)."""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import assert_close
from robodyn_ros.control.base_parameter_control import (BaseParameterComputedTorque, BaseParameterDynamics,
                                                        BaseParameterSlotineLi)
from robodyn_ros.control.parameter_gate import (ParameterGate, friction_from_base, friction_indices,
                                                mass_matrix_weighting)
from robodyn_ros.control.reference import fourier_reference
from robodyn_ros.estimation.recursive import RecursiveLeastSquares
from robodyn_ros.identification.base_parameters import compute_base_parameters, full_parameters
from robodyn_ros.robots import bundled_robot_info
from robodyn_ros.simulation.adaptive_loop import AdaptiveLoopConfig, twin_experiment
from robodyn_ros.simulation.plant import load_plant

INFO = bundled_robot_info("panda")


@pytest.fixture(scope="module")
def setup():
    nominal = rd.Model.from_urdf(INFO["urdf"], locked_joints=INFO["locked_joints"])
    plant = load_plant("panda_twin", nominal)
    rd.compile_kernels(plant.model, parts=("dynamics",))     # the twin's torques below: rd.rnea compiled
    base = compute_base_parameters(nominal, coulomb_width=plant.coulomb_width)
    return nominal, plant, base, BaseParameterDynamics(nominal, base)


def twin_torque(plant, q, v, a):
    m = plant.model
    return rd.rnea(m, q, v, a) + m.viscous * v + m.coulomb * np.tanh(v / plant.coulomb_width) + m.friction_offset


def _rls_on_twin_torques(setup, rng, n):
    """``(rls, beta_nom)``: RLS from the nominal model's base parameters on ``n`` noisy twin torques at random
    states (the twin's joint-torque noise)."""
    nominal, plant, base, dyn = setup
    beta_nom = base.from_full(full_parameters(nominal))
    rls = RecursiveLeastSquares(beta_nom, (0.2 * np.abs(beta_nom) + 0.01) ** 2 + 0.25, plant.effort_noise, detector=None)
    for _ in range(n):
        q, v, a = nominal.random_configuration(rng), rng.uniform(-1.5, 1.5, 7), rng.uniform(-4, 4, 7)
        rls.update(dyn.regressor(q, v, a), twin_torque(plant, q, v, a) + rng.normal(0.0, plant.effort_noise))
    return rls, beta_nom


def test_base_parameter_estimate_reproduces_the_twins_torques(setup, rng):
    """RLS on noisy twin torques (the twin's real-log noise), starting from the nominal model, at random
    states; then inverse dynamics from Y_base beta_hat alone (no full parameters) predicts the twin's torques
    at new states within 2 %, where the nominal model is off by more than 10 %. The base-parameter
    computed-torque law and Slotine-Li law then command the twin's exact inverse dynamics."""
    nominal, plant, base, dyn = setup
    rls, beta_nom = _rls_on_twin_torques(setup, rng, 3000)
    err, err_nom, ref = [], [], []
    for _ in range(200):
        q, v, a = nominal.random_configuration(rng), rng.uniform(-1.5, 1.5, 7), rng.uniform(-4, 4, 7)
        tau = twin_torque(plant, q, v, a)
        err.append(tau - dyn.torque(q, v, a, rls.beta))
        err_nom.append(tau - dyn.torque(q, v, a, beta_nom))
        ref.append(tau)
    rel = np.linalg.norm(err) / np.linalg.norm(ref)
    rel_nom = np.linalg.norm(err_nom) / np.linalg.norm(ref)
    print(f"\nbase-parameter estimate: {100 * rel:.2f} % torque error on the twin (nominal {100 * rel_nom:.1f} %)")
    assert rel < 0.02 and rel_nom > 0.10
    # the friction read from beta is the twin's (where it is a base parameter by itself)
    f = friction_from_base(base, rls.beta)
    ok = np.isfinite(f["coulomb"])
    assert ok.sum() >= 6
    assert_close(f["coulomb"][ok], plant.model.coulomb[ok], atol=0.05)
    # computed torque and Slotine-Li on beta: at zero tracking error, the twin's inverse dynamics
    beta_twin = base.from_full(full_parameters(plant.model))
    q, v, a = np.array(INFO["home"]), rng.normal(size=7) * 0.5, rng.normal(size=7)
    ct = BaseParameterComputedTorque(nominal, base, beta_nom, 400.0, 40.0, dynamics=dyn)
    ct.set_parameters(beta_twin)
    assert_close(ct.compute(q, v, q, v, a)[0], twin_torque(plant, q, v, a), rtol=1e-9)
    sl = BaseParameterSlotineLi(nominal, base, beta_twin, Lambda=10.0, kd=40.0)
    assert_close(sl.compute(q, v, q, v, a)[0], twin_torque(plant, q, v, a), rtol=1e-9)
    with pytest.raises(ValueError, match="finite"):
        ct.set_parameters(np.full(base.count, np.nan))


def test_held_computed_torque_is_the_inverse_dynamics_over_the_hold(setup, rng):
    """With ``hold`` h the base-parameter computed torque is the twin's inverse dynamics (full parameters,
    RNEA) at the mid-hold state ``q + h/2 v + h²/8 a_cmd``, ``v + h/2 a_cmd`` with the friction at ``v_f = v_d +
    h/2 a_d``, the viscous part at ``v_f - Λ e`` (``Λ = kp / kd = 10``); ``hold=0`` in the call gives the law at
    the sampled state with ``v_f = v_d``; a hold outside [0, 0.01] s is refused."""
    nominal, plant, base, dyn = setup
    beta_twin = base.from_full(full_parameters(plant.model))
    h, m = 1e-3, plant.model
    ct = BaseParameterComputedTorque(nominal, base, beta_twin, 400.0, 40.0, hold=h, dynamics=dyn)

    def friction(v, e):
        return m.viscous * (v - 10.0 * e) + m.coulomb * np.tanh(v / plant.coulomb_width) + m.friction_offset

    for _ in range(5):
        q_d, v_d, a_d = np.array(INFO["home"]) + rng.normal(0.0, 0.2, 7), rng.normal(0.0, 0.5, 7), rng.normal(size=7)
        q, v = q_d + rng.normal(0.0, 0.01, 7), v_d + rng.normal(0.0, 0.05, 7)
        a = a_d - 40.0 * (v - v_d) - 400.0 * (q - q_d)
        expected = rd.rnea(m, q + h / 2 * v + h * h / 8 * a, v + h / 2 * a, a) + friction(v_d + h / 2 * a_d, q - q_d)
        assert_close(ct.compute(q, v, q_d, v_d, a_d)[0], expected, rtol=1e-9, atol=1e-9)
        assert_close(ct.compute(q, v, q_d, v_d, a_d, hold=0.0)[0], rd.rnea(m, q, v, a) + friction(v_d, q - q_d),
                     rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="hold"):
        BaseParameterComputedTorque(nominal, base, beta_twin, hold=0.5, dynamics=dyn)


def _observe_twin(gate, nominal, plant, dyn, rng, n, torque=None):
    for _ in range(n):
        q, v, a = nominal.random_configuration(rng), rng.uniform(-1, 1, 7), rng.uniform(-3, 3, 7)
        tau = twin_torque(plant, q, v, a) if torque is None else torque(q, v, a)
        gate.observe(dyn.regressor(q, v, a), tau + rng.normal(0.0, plant.effort_noise), q=q)


def test_gate_judges_estimates_on_samples_they_never_saw(setup, rng):
    """Samples of the twin, weighed by the nominal M(q)⁻¹: an estimate close to the twin waits for 50 new
    samples, then is accepted; one that is worse than the nominal model on them after an estimate was accepted
    is diverging, and the gate hands back the last good one for the estimator to restore; negative friction and
    non-finite parameters are implausible; an applied estimate that has become worse than the nominal model
    falls back to it; a controller can revoke the applied one."""
    nominal, plant, base, dyn = setup
    beta_nom = base.from_full(full_parameters(nominal))
    beta_twin = base.from_full(full_parameters(plant.model))
    gate = ParameterGate(beta_nom, window=200, fresh=50, weighting=mass_matrix_weighting(nominal),
                         friction_indices=friction_indices(base), warmup=0)
    _observe_twin(gate, nominal, plant, dyn, rng, 100)
    good = beta_twin + rng.normal(size=base.count) * 1e-4
    assert gate.offer(good, source="estimate").status == "unconverged"
    _observe_twin(gate, nominal, plant, dyn, rng, 49)
    assert gate.offer(good, source="estimate").status == "unconverged"      # 49 new samples: not yet judged
    _observe_twin(gate, nominal, plant, dyn, rng, 1)
    d = gate.offer(good, source="estimate")
    assert d.status == "accepted" and np.array_equal(gate.applied, good) and d.residual_offered < d.residual_nominal / 3
    diverged = good.copy()
    diverged[np.argmax(np.abs(good))] *= 3.0       # e.g. a run-away from bad data
    for source, beta, status in (("run-away", diverged, "diverging"), ("negative", None, "implausible"),
                                 ("infinite", np.full(base.count, np.inf), "implausible")):
        if beta is None:
            beta = good.copy()
            beta[friction_indices(base)[0]] = -0.5
        assert gate.offer(beta, source=source).status == "unconverged"
        _observe_twin(gate, nominal, plant, dyn, rng, 50)
        d = gate.offer(beta, source=source)
        assert d.status == status, (source, d.status, gate.last_reason)
        assert np.array_equal(d.beta, good) and np.array_equal(gate.applied, good)
    assert gate.counts["diverging"] == 1
    # the robot changes so much that the applied estimate is worse than the nominal model: back to nominal
    gate.clear_window()
    gate.offer(good, source="estimate")
    _observe_twin(gate, nominal, plant, dyn, rng, 60, torque=lambda q, v, a: dyn.torque(q, v, a, beta_nom))
    d = gate.offer(good, source="estimate")
    assert gate.counts["fallback_nominal"] == 1 and np.array_equal(gate.applied, beta_nom)
    assert d.status == "worse" and d.restore is None        # nothing good to roll back to any more
    # an accepted estimate the controller cannot use is handed back: the one applied before returns
    gate.offer(beta_nom * 1.3, source="scaled")
    _observe_twin(gate, nominal, plant, dyn, rng, 60, torque=lambda q, v, a: dyn.torque(q, v, a, beta_nom * 1.3))
    assert gate.offer(beta_nom * 1.3, source="scaled").status == "accepted"
    gate.revoke()
    assert np.array_equal(gate.applied, beta_nom) and gate.counts["revoked"] == 1


def test_gate_refuses_an_estimate_fitted_to_the_noise_of_its_own_window(setup, rng):
    """The nominal model is exact (torques of the nominal model plus noise): a least-squares fit to the window's
    own samples predicts them better than the nominal model (it fitted their noise), but not the samples that
    follow, and the gate keeps the nominal model; judged on the window it was fitted to, it would pass."""
    nominal, plant, base, dyn = setup
    beta_nom = base.from_full(full_parameters(nominal))
    gate = ParameterGate(beta_nom, window=400, fresh=50, weighting=mass_matrix_weighting(nominal), warmup=0)
    exact = lambda q, v, a: dyn.torque(q, v, a, beta_nom)          # noqa: E731
    _observe_twin(gate, nominal, plant, dyn, rng, 120, torque=exact)
    Y, tau = np.concatenate(list(gate._Y)), np.concatenate(list(gate._tau))
    overfit = np.linalg.lstsq(Y, tau, rcond=None)[0]
    assert gate.residual(overfit) < 0.9 * gate.residual(beta_nom)          # in-sample: "better"
    gate.offer(overfit)
    _observe_twin(gate, nominal, plant, dyn, rng, 50, torque=exact)
    d = gate.offer(overfit)
    assert d.status == "worse" and np.array_equal(gate.applied, beta_nom), gate.last_reason
    assert d.residual_offered > d.residual_nominal


def test_closed_loop_on_the_twin_adapts_from_joint_torques(setup):
    """The library-only loop of `robodyn demo --scenario twin --library`: the twin follows the demo
    trajectory under base-parameter computed torque (kp 400, kd 40) from the nominal model; the estimator
    (joint torques only, its defaults: nothing of the twin's noise or friction) runs from the start; a 2 kg
    payload at 7.5 s of 15 (the estimate is converged by then: at 6 s of 10 the payload comes out 10 % light)."""
    nominal, plant, _, _ = setup
    reference = fourier_reference(INFO["home"], 0.3, 4.0, 2)
    config = AdaptiveLoopConfig(controller="computed_torque", duration=15.0, attach_time=7.5)
    report, adapted, nominal_run = twin_experiment(nominal, plant, reference, config, oracle=False)
    print("\n" + ", ".join(f"{k} {report[k]}" for k in ("tracking_rms_nominal", "tracking_rms_adapted",
                                                          "tracking_ratio", "payload_mass_estimated",
                                                          "payload_time_to_5_percent", "non_finite_commands")))
    assert report["tracking_rms_nominal"] / report["tracking_rms_adapted"] >= 5.0
    assert report["payload_source"] == "joint_torques"
    assert report["payload_time_to_5_percent"] is not None and report["payload_time_to_5_percent"] <= 3.0
    assert abs(report["payload_mass_estimated"] - 2.0) <= 0.1
    assert report["non_finite_commands"] == 0
    assert report["tracking_rms_after_payload_adapted"] < report["tracking_rms_after_payload_nominal"] / 5


def test_consistent_parameters_reach_the_mpc_without_a_rebuild(setup, rng):
    """A base-parameter estimate of the twin (RLS on noisy torques at random states) becomes a physically
    consistent full parameter set (every body's pseudo-inertia positive semi-definite) that reproduces the
    twin's torques, and the MPC takes it as its NLP parameters: the same compiled functions and QP solver,
    and the next solve's feedforward holding the home pose is the twin's gravity plus offset (not the
    nominal model's); the Coulomb coefficients go to the 1 kHz stage."""
    from robodyn_ros.control.adaptive_mpc import AdaptiveMPC
    from robodyn_ros.control.consistent_parameters import ConsistentParameters
    from robodyn_ros.control.mpc import MPCConfig
    from robodyn_ros.control.reference import ConstantReference
    from robodyn_ros.identification.physical_consistency import is_consistent
    nominal, plant, base, dyn = setup
    rls, beta_nom = _rls_on_twin_torques(setup, rng, 2000)
    fit = ConsistentParameters(nominal, base).fit(rls.beta, rls.P)
    assert fit.success
    pi = fit.theta[:70]
    assert all(is_consistent(pi[10 * b:10 * b + 10], -1e-9) and pi[10 * b] > 0 for b in range(7))   # J ⪰ 0
    err, ref = [], []
    for _ in range(100):
        q, v, a = nominal.random_configuration(rng), rng.uniform(-1.5, 1.5, 7), rng.uniform(-4, 4, 7)
        err.append(twin_torque(plant, q, v, a) - dyn.torque(q, v, a, fit.beta))
        ref.append(twin_torque(plant, q, v, a))
    assert np.linalg.norm(err) / np.linalg.norm(ref) < 0.03
    home = np.array(INFO["home"])
    mpc = AdaptiveMPC(nominal, ConstantReference(home), beta=beta_nom,
                      config=MPCConfig(horizon=3, dt=0.02, solver="rti", time_limit=60.0, coulomb_smoothing=0.05))
    first = mpc.mpc.solve(home, np.zeros(7), mpc.reference)
    functions = (mpc.mpc.ocp, mpc.mpc.ocp.rti_prepare, mpc.mpc._qp_solvers["hpipm"])
    mpc.set_parameters(fit.beta, fit.theta)
    mpc.mpc._w = None
    second = mpc.mpc.solve(home, np.zeros(7), mpc.reference)
    assert (mpc.mpc.ocp, mpc.mpc.ocp.rti_prepare, mpc.mpc._qp_solvers["hpipm"]) == functions
    assert_close(mpc.theta, fit.theta, rtol=1e-12)
    assert np.array_equal(mpc.mpc.theta[70 + 7:70 + 14], np.zeros(7)) and np.array_equal(mpc.coulomb, fit.theta[77:84])
    g_twin = rd.gravity_torque(plant.model, home) + plant.model.friction_offset
    g_nominal = rd.gravity_torque(nominal, home)
    assert np.abs(first.tau_ff[0] - g_nominal).max() < 0.05 * np.abs(g_nominal).max()
    assert np.abs(second.tau_ff[0] - g_twin).max() < 0.05 * np.abs(g_twin).max()
    assert np.abs(g_twin - g_nominal).max() > 0.5
