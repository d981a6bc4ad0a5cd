"""The divergence decision of the simulator (robodyn_ros.simulation.divergence): which states are diverged
(non-finite, absurd velocity, position far beyond a limit), which joint shows it and the likely cause; an
explicit integrator on the xArm7 is caught before any non-finite state with its joint and cause named, and a
chaotic but sound passive fall is not taken for a divergence."""
import os

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import erd_path
from robodyn_ros.simulation.divergence import (MIN_POSITION_MARGIN, UNLIMITED_POSITION, VELOCITY_FACTOR,
                                               DivergenceCheck)
from robodyn_ros.simulation.simulator import DivergedStep, Simulator, SimulatorConfig


def erd_model(relative):
    path = erd_path(relative)
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    return rd.Model.from_urdf(path)


@pytest.fixture(scope="module")
def xarm7():
    return erd_model("xarm_description/urdf/xarm7.urdf")


def middle(model):
    limited = np.isfinite(model.lower) & np.isfinite(model.upper)
    return np.where(limited, 0.5 * (np.where(limited, model.lower, 0.0) + np.where(limited, model.upper, 0.0)), 0.0)


def test_sound_states_pass_and_non_finite_or_absurd_ones_are_named(xarm7):
    """Each joint in turn: a velocity just inside its bound passes, one just beyond fails, as do NaN and inf in
    its velocity or position and a position beyond a limit by more than the range; the diagnosis names that
    joint and quantity."""
    check = DivergenceCheck(xarm7, SimulatorConfig(), middle(xarm7))
    q, v = middle(xarm7), np.zeros(xarm7.nv)
    assert check.within(q, v) and check.check(q, v, 0.0) is None
    for j, name in enumerate(xarm7.joint_names):
        bound = check.velocity_bound[j]
        assert bound == max(VELOCITY_FACTOR * xarm7.velocity_limit[j], 1e3)
        span = xarm7.upper[j] - xarm7.lower[j]
        for quantity, value, sound in (("velocity", 0.99 * bound, True), ("velocity", -1.01 * bound, False),
                                       ("velocity", np.nan, False), ("velocity", np.inf, False),
                                       ("position", xarm7.upper[j] + 0.99 * max(span, MIN_POSITION_MARGIN), True),
                                       ("position", xarm7.lower[j] - 1.01 * max(span, MIN_POSITION_MARGIN), False),
                                       ("position", np.nan, False), ("position", -np.inf, False)):
            qj, vj = q.copy(), v.copy()
            (vj if quantity == "velocity" else qj)[j] = value
            assert check.within(qj, vj) == sound, (name, quantity, value)
            if not sound:
                d = check.check(qj, vj, 1.5)
                assert (d.joint, d.quantity, d.t) == (name, quantity, 1.5)
                assert f"joint {name}'s {quantity}" in d.message()
                assert ("not finite" in d.message()) == (not np.isfinite(value))


def test_every_entry_non_finite_names_the_fastest_joint_of_the_last_sound_state(xarm7):
    check = DivergenceCheck(xarm7, SimulatorConfig(), middle(xarm7))
    v_last = np.zeros(xarm7.nv)
    v_last[4] = 50.0
    d = check.diagnose(np.full(7, np.nan), np.full(7, np.nan), 0.2, middle(xarm7), v_last)
    assert d.joint == "joint5" and d.quantity == "velocity" and "not finite" in d.message()
    # a failed step whose result an engine reset to a sound state (MuJoCo) is still reported as not finite
    d = check.diagnose(middle(xarm7), np.zeros(7), 0.2, middle(xarm7), v_last)
    assert d.joint == "joint5" and "not finite" in d.message()


def test_joints_without_limits_or_stops_bound_only_overflow(xarm7):
    """Without limit stops (stiffness and damping 0) a position far beyond a URDF limit is sound; only a
    non-finite or overflowing one is not."""
    check = DivergenceCheck(xarm7, SimulatorConfig(limit_stiffness=0.0, limit_damping=0.0), middle(xarm7))
    q = middle(xarm7)
    q[1] = xarm7.upper[1] + 100.0
    assert check.within(q, np.zeros(7))
    q[1] = 2 * UNLIMITED_POSITION
    assert not check.within(q, np.zeros(7))


def test_explicit_rk4_on_the_xarm7_is_caught_before_a_non_finite_state_and_the_cause_named(xarm7):
    """The xArm7 (joint 7: 2 N m s/rad and 1 N m of Coulomb friction on 1.4e-4 kg m²) under its gravity torque:
    with the explicit rk4 the check flags a state (joint 7, its velocity) before any step turns non-finite, and
    names the integrator against joint 7's damping and the way out; its start is flagged as unstable already.
    With rk4_implicit the same second stays sound and no cause is blamed on the integrator."""
    from robodyn_ros.simulation.simulation_step import CompiledStep

    q0, zero = middle(xarm7), np.zeros(7)
    for integrator in ("rk4", "rk4_implicit"):
        config = SimulatorConfig(integrator=integrator)
        check = DivergenceCheck(xarm7, config, q0)
        sim = Simulator(xarm7, config, q0, step_function=CompiledStep(xarm7, integrator))
        found = None
        for _ in range(1000):
            q_last, v_last = sim.q, sim.v
            try:
                sim.step(rd.rnea(xarm7, sim.q, zero, zero))
            except DivergedStep:
                pytest.fail(f"{integrator}: a non-finite step before the check flagged a state")
            found = check.check(sim.q, sim.v, sim.t, q_last, v_last)
            if found is not None:
                break
        if integrator == "rk4":
            assert found is not None and sim.t < 0.01
            assert (found.joint, found.quantity) == ("joint7", "velocity")
            for words in ("explicit integrator rk4 against joint joint7's damping", "rk4_implicit"):
                assert words in found.cause
            assert "joint7" in check.explicit_instability(q0)
        else:
            assert found is None and sim.t == pytest.approx(1.0)
            assert check.explicit_instability(q0) is None
            assert "not the joint damping" in check.likely_cause(q0, 6)


def test_semi_implicit_euler_and_the_limit_stops(xarm7):
    """semi_implicit_euler has its own stability limit; without friction the library's default stops (2e4 N m/rad,
    2e2 N m s/rad) are what an explicit step cannot integrate on the light wrist; without either, nothing."""
    config = SimulatorConfig(integrator="semi_implicit_euler")
    assert "semi_implicit_euler's stability limit of about 2 " in DivergenceCheck(
        xarm7, config, middle(xarm7)).explicit_instability(middle(xarm7))
    frictionless = xarm7.with_friction(np.zeros(7), np.zeros(7), np.zeros(7))
    cause = DivergenceCheck(frictionless, config, middle(xarm7)).explicit_instability(middle(xarm7))
    assert "joint joint7's limit stops" in cause and "limits.stiffness 20000" in cause
    config = SimulatorConfig(integrator="semi_implicit_euler", limit_stiffness=0.0, limit_damping=0.0)
    assert DivergenceCheck(frictionless, config, middle(xarm7)).explicit_instability(middle(xarm7)) is None


def test_a_chaotic_passive_fall_is_not_divergence():
    """The Kinova Jaco 2 (no damping, light wrist, velocity limits of 0.63-0.84 rad/s) falling under zero
    torque for 3 s from its mid-range home: a chaotic multiple pendulum whose joints reach over 20 times their
    URDF limits (so no small multiple of the velocity limit can tell a divergence), and a sound state at every
    step."""
    from robodyn_ros.simulation.simulation_step import CompiledStep

    model = erd_model("kinova_description/robots/kinova.urdf")
    q0 = middle(model)
    config = SimulatorConfig()
    check = DivergenceCheck(model, config, q0)
    sim = Simulator(model, config, q0, step_function=CompiledStep(model, "rk4_implicit"))
    fastest = 0.0
    for _ in range(3000):
        sim.step(np.zeros(model.nv))
        assert check.check(sim.q, sim.v, sim.t) is None, check.diagnose(sim.q, sim.v, sim.t).message()
        fastest = max(fastest, float(np.max(np.abs(sim.v) / model.velocity_limit)))
    assert fastest > 20.0
