"""The mpc node's loop (:class:`~robodyn_ros.control.mpc_loop.MpcLoop`, ``use_base_parameters``): ``~/reset``
puts the URDF's parameters in the next solve's model, dropping an applied estimate and a payload candidate;
``initial_parameters`` naming a file that is not this robot's is refused at once with a /diagnostics line, the
loop starting from the URDF. (Over DDS the same paths are exercised for the inverse_dynamics node by
test/ros/test_stored_estimate.py.)"""
import numpy as np
import pytest

from robodyn_ros.control.mpc.config import parameter_vector
from robodyn_ros.control.mpc_loop import MpcLoop
from robodyn_ros.identification.results import yaml_text
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config


def loop(**overrides):
    config = resolve_node_config("mpc", {"use_base_parameters": True, "compiled": False, "horizon": 5,
                                         "time_limit": 1.0, **overrides})
    made = MpcLoop(load_robot(config), config)
    return made, config


@pytest.mark.parametrize("output", ["feedforward", "commands"])
def test_reset_gives_the_next_solve_the_urdf_parameters(output):
    mpc_loop, _ = loop(output=output)
    try:
        nominal = parameter_vector(mpc_loop.model)
        heavier = nominal.copy()
        heavier[0] *= 1.5                              # an applied estimate: the first link 50 % heavier
        mpc_loop.mpc.set_parameters(heavier)
        mpc_loop.base_update.set_payload(mpc_loop.model.nbodies - 1, np.r_[2.0, np.zeros(9)])
        assert mpc_loop.base_update.payload is not None
        mpc_loop.reset_parameters()
        expected = nominal.copy()
        if output == "commands":                       # Coulomb compensated at the joint-state rate instead
            n_in, nv = 10 * mpc_loop.model.nbodies, mpc_loop.model.nv
            np.testing.assert_array_equal(mpc_loop.coulomb, nominal[n_in + nv:n_in + 2 * nv])
            expected[n_in + nv:n_in + 2 * nv] = 0.0
        np.testing.assert_array_equal(mpc_loop.mpc.theta, expected)
        assert mpc_loop.base_update.payload is None and mpc_loop.base_update.gate.counts["reset"] == 1
    finally:
        mpc_loop.close()


def test_a_file_of_another_robot_is_refused_with_a_diagnostics_line(tmp_path):
    other = tmp_path / "ur5.yaml"
    other.write_text(yaml_text({"links": {"shoulder_link": {"mass": 1.0, "com": [0.0, 0.0, 0.0],
                                                             "inertia": [0.01, 0, 0, 0.01, 0, 0.01]}}, "joints": {}}))
    mpc_loop, _ = loop(initial_parameters=str(other))
    try:
        u = mpc_loop.base_update
        assert u.initial_verdict == "refused"
        assert f"{other}: link 'shoulder_link' is not a body of" in u.initial_note
        from robodyn_ros.control.loop_diagnostics import diagnostics_notes
        notes = diagnostics_notes(mpc_loop.tracking, mpc_loop.adaptation, u)
        assert any(note.startswith("initial_parameters refused:") for note in notes), notes
        np.testing.assert_array_equal(u.gate.applied, u.beta_nominal)
    finally:
        mpc_loop.close()


def test_status_warns_of_every_fallback_since_the_last_report():
    """The node reports at 1 Hz while it solves at up to 1 kHz: fallbacks between two reports turn the next
    one WARN with their count, even when the last solve before it was solved; the report after is OK again."""
    mpc_loop, config = loop(use_base_parameters=False)
    try:
        q = np.asarray(load_robot(config).home, dtype=float)
        assert mpc_loop.mpc.wait(120)
        mpc_loop.on_state(0.0, q, np.zeros_like(q))
        solved = mpc_loop.solve()[1]
        assert solved.status == "rti"
        mpc_loop.status(solved)                      # whatever came before
        assert mpc_loop.status(solved)[:2] == ("OK", "rti")
        mpc_loop.fallbacks += 2                      # two solves fell back since (counted as solve() counts them)
        level, text, values = mpc_loop.status(solved)
        assert (level, text, values["fallbacks"]) == ("WARN", "2 fallback(s) since the last report",
                                                      mpc_loop.fallbacks)
        assert mpc_loop.status(solved)[:2] == ("OK", "rti")
    finally:
        mpc_loop.close()
