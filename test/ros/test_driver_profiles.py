"""``driver: franka`` over DDS, the simulator behaving as Franka's driver does (it adds the URDF's gravity to
every command): the Panda held at home is sent less than 0.1 N m in every control mode, with and without
``use_base_parameters`` and through the MPC, and stays at home. Without the profile the same controllers send
the Panda its gravity (22 N m on its second joint): twice its gravity on a real Franka."""
import numpy as np
import pytest
import rclpy
from std_msgs.msg import Float64MultiArray

from robodyn_ros.ros import qos
from robodyn_ros.ros.bringup import Bringup
from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
from robodyn_ros.ros.testing import ros_context


SIMULATOR = {"real_time_factor": 0.0, "lockstep": True, "lockstep_timeout": 0.2, "publish_clock": False,
             "noise.position": 0.0, "noise.velocity": 0.0, "noise.effort": 0.0, "noise.force": 0.0,
             "noise.torque": 0.0}
MODES = {
    "computed_torque": {"mode": "computed_torque"},
    "computed_torque on base parameters": {"mode": "computed_torque", "use_base_parameters": True},
    "slotine_li": {"mode": "slotine_li"},
    "slotine_li on base parameters": {"mode": "slotine_li", "use_base_parameters": True},
    "gravity_compensation": {"mode": "gravity_compensation", "kp": 0.0, "kd": 0.0},   # the mode hand guiding uses
    "mpc": {"mode": "mpc"},
}


def hold_at_home(mode, driver):
    """Largest command (N m) over 0.5 s of simulated time and the largest distance from home (rad)."""
    entries = [NodeEntry("simulator", "simulator", "simulator"),
               NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics")]
    overrides = {"simulator": {**SIMULATOR, "driver": driver},
                 "inverse_dynamics": {**MODES[mode], "reference": "hold", "state_timeout": 0.5, "driver": driver}}
    if mode == "mpc":
        entries.append(NodeEntry("mpc", "mpc", "mpc"))
        overrides["mpc"] = {"driver": driver, "generator.amplitude": 0.0, "horizon": 5, "compiled": False,
                            "time_limit": 1.0}
    with ros_context() as context, Bringup(entries, context, config_file("panda"), overrides=overrides) as up:
        listener = rclpy.create_node("listener", context=context)
        commands = []
        listener.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                     lambda m: commands.append(np.array(m.data)), qos.COMMAND_QOS)
        up.add_node(listener)
        up.activate()
        sim = up.nodes["simulator"].sim
        home = sim.q.copy()
        if mode == "mpc":        # the plan, not the controller's own computed torque, commands the robot
            ctrl = up.nodes["inverse_dynamics"]
            assert up.spin_until(lambda: ctrl.loop.mpc is not None, 600.0), "no MPC solution applied"
            commands.clear()
            start = sim.t
        else:
            start = 0.0
        moved = [0.0]

        def done():
            moved[0] = max(moved[0], float(np.abs(sim.q - home).max()))
            return sim.t >= start + 0.5
        assert up.spin_until(done, 300.0), f"simulated only {sim.t} s"
        assert len(commands) > 100 and not any(n.rejected for n in up.nodes.values())
        up.executor.remove_node(listener)
        listener.destroy_node()
        return float(np.abs(np.array(commands)).max()), moved[0]


@pytest.mark.parametrize("mode", list(MODES))
def test_the_panda_held_at_home_with_the_franka_profile_is_sent_no_gravity(mode):
    command, moved = hold_at_home(mode, "franka")
    assert command < 0.1, f"{mode}: commands up to {command:.3f} N m"
    assert moved < 1e-3, f"{mode}: the arm moved {moved:.2e} rad from home"


def test_without_the_profile_the_controller_sends_the_gravity():
    command, _ = hold_at_home("computed_torque on base parameters", "generic")
    assert command > 20.0
