"""A twin run against the Cramér–Rao bound of its joint torques (robodyn_ros/simulation/learning_limit.py): the
model error it measures is the torque error of the two models through the plant's mass matrix (recomputed here
with RNEA and the friction law, not the regressor), and the estimator's own estimate comes near the bound, as an
efficient estimator does, on a plant it was not tuned on."""
import numpy as np
import pytest

from robodyn_ros.dynamics.crba import crba
from robodyn_ros.dynamics.rnea import rnea
from robodyn_ros.estimation.cramer_rao_bound import model_error
from robodyn_ros.identification.base_parameters import compute_base_parameters, full_parameters
from robodyn_ros.simulation.adaptive_loop import AdaptiveLoop, AdaptiveLoopConfig
from robodyn_ros.simulation.learning_limit import learning_report, plant_beta, reference_samples


@pytest.fixture(scope="module")
def ur5():
    from robodyn_ros.cli.demo_robot import demo_robot
    from robodyn_ros.simulation.plant import load_plant
    setup = demo_robot("ur5")
    return setup, load_plant("perturbed:0", setup.model)


def joint_torque(model, q, v, a, width):
    """Rigid body, armature and friction (Coulomb as tanh(v / width), as the regressor's column)."""
    return (rnea(model, q, v, a) + model.viscous * v + model.coulomb * np.tanh(v / width)
            + model.friction_offset)


def test_the_nominal_models_error_is_its_torque_error_through_the_plants_mass_matrix(ur5):
    setup, plant = ur5
    base = compute_base_parameters(setup.model, coulomb_width=0.01)
    Y, Minv = reference_samples(setup.model, plant.model, base, setup.reference, 4.0, step=0.05)
    measured = model_error(Y, Minv, base.from_full(full_parameters(setup.model)) - plant_beta(base, plant))
    rows = []
    for t in np.arange(0.0, 4.0, 0.05):
        q, v, a = (np.asarray(x, dtype=float) for x in setup.reference.evaluate(t))
        d = joint_torque(setup.model, q, v, a, 0.01) - joint_torque(plant.model, q, v, a, 0.01)
        rows.append(np.linalg.solve(crba(plant.model, q), d))
    assert measured == pytest.approx(float(np.sqrt(np.mean(np.square(rows)))), rel=1e-6)
    assert measured > 1.0        # rad/s²: the perturbed plant is not the URDF


def test_the_estimator_comes_near_the_bound_on_a_plant_it_was_not_tuned_on(ur5):
    """8 s of the nodes' default motion on the perturbed UR5 under computed torque, no payload: the estimator's
    own estimate is within 2.5 x the bound (an estimator that lost information, e.g. to a biased filter, stays
    far above it), never below 0.8 x (the bound bounds), and the bound falls as 1/√t."""
    setup, plant = ur5
    config = AdaptiveLoopConfig(duration=8.0, attach_time=None, payload_link=setup.robot.wrist_link,
                                kp=setup.config["kp"], kd=setup.config["kd"])
    loop = AdaptiveLoop(setup.model, plant, setup.reference, config)
    adapted = loop.run()
    report = learning_report(setup.model, plant, loop.base, setup.reference, config, adapted, oracle_rms=8e-6)
    seconds = np.array(report["model_error_seconds"])
    t, bound, estimate = seconds[-1, :3]
    print(f"\nat {t:.0f} s: bound {bound:.3g} rad/s², estimate {estimate:.3g} ({estimate / bound:.2f} x)")
    assert t == 8.0 and 0.8 * bound <= estimate <= 2.5 * bound
    assert np.allclose(seconds[:, 1] * np.sqrt(seconds[:, 0]), report["learning_bound"]["model_error_1s"])
    # a row per second from the first estimate; while the gate has accepted nothing the applied model is the URDF's
    first = int(np.ceil(adapted["t_estimate"][0]))
    assert list(seconds[:, 0]) == [float(s) for s in range(first, 9)]
    nominal = model_error(*reference_samples(setup.model, plant.model, loop.base, setup.reference, 4.0),
                                       loop.gate.beta_nominal - plant_beta(loop.base, plant))
    held = [row[3] for row in seconds if np.array_equal(adapted["beta"][np.searchsorted(adapted["t_estimate"], row[0],
                                                                                        side="right") - 1],
                                                        loop.gate.beta_nominal)]
    assert held and np.allclose(held, nominal) and seconds[-1, 3] < 0.1 * nominal
    summary = report["learning_bound"]
    assert summary["time_to_oracle_bound"] == pytest.approx(
        (summary["model_error_1s"] / (np.sqrt(3.0) * config.kp * 8e-6)) ** 2)
    assert summary["rate"] == 1000.0 and summary["period"] == 4.0
