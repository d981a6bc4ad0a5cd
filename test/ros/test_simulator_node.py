"""The simulator node's stepping modes over real DDS: the stepping thread and the executor timer step the
same trajectory, every published JointState (one message refilled in place) carries exactly the state of
its step, real time drops wall time when far behind, and the payload parameters attach another load to
another link at run time through the same compiled step."""
import numpy as np
import rclpy
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from robodyn_ros.control.kernel_dynamics import KernelDynamics
from robodyn_ros.ros import qos
from robodyn_ros.ros.bringup import Bringup
from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
from robodyn_ros.ros.node_main import bring_up
from robodyn_ros.simulation.runtime import MAX_CATCH_UP_STEPS
from robodyn_ros.ros.testing import ros_context
from robodyn_ros.simulation.simulator import Payload, Simulator

QUIET = {"payload.mass": 0.0, "command_timeout": 1e6, "noise.position": 0.0, "noise.velocity": 0.0,
         "noise.effort": 0.0, "noise.force": 0.0, "noise.torque": 0.0}


def run_simulator(context, overrides, wall_seconds, messages_wanted=None):
    """Run a simulator node (``overrides`` on QUIET) holding the gravity torque of its start pose for
    ``wall_seconds``, or with ``messages_wanted`` until a listener has received that many JointStates
    (``wall_seconds`` then is the deadline); returns ``(node, q0, command, messages)`` with every JointState
    the listener received (the node deactivated, its stepping stopped)."""
    with Bringup([NodeEntry("simulator", "simulator", "simulator")], context, config_file("panda"),
                 overrides={"simulator": {**QUIET, **overrides}}) as up:
        listener = rclpy.create_node("listener", context=context)
        messages = []
        reliable_deep = rclpy.qos.QoSProfile(depth=100_000, reliability=rclpy.qos.ReliabilityPolicy.RELIABLE)
        listener.create_subscription(JointState, "/joint_states", messages.append, reliable_deep)
        up.add_node(listener)
        node = up.nodes["simulator"]
        node.trigger_configure()
        model = node.robot.model
        q0 = node.sim.q.copy()
        command = KernelDynamics(model, node.kernels).gravity(q0, model.inertial_parameters()) + 0.5
        node.runtime.set_command(command)          # the first command, taken from the first step on
        assert up.spin_until(lambda: listener.count_publishers("/joint_states") > 0, 10.0)
        assert bring_up(node)
        if messages_wanted is None:
            up.spin_until(lambda: False, wall_seconds)
        else:
            assert up.spin_until(lambda: len(messages) >= messages_wanted, wall_seconds), len(messages)
        node.threaded = node.runtime.thread is not None and node.runtime.thread.is_alive()
        node.trigger_deactivate()
        up.spin_until(lambda: False, 0.1)          # deliver what is still in flight
        up.executor.remove_node(listener)
        listener.destroy_node()
        return node, q0, command, messages


def assert_messages_match_offline_steps(node, q0, command, messages):
    """Each message equals, bit for bit, an offline Simulator (same config, same compiled step) after the
    number of steps its stamp says; returns the step indices seen."""
    assert node._identity_order
    dt = node.sim.config.dt
    steps = [round((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec) / dt) for m in messages]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    reference = Simulator(node.sim.model, node.sim.config, q0, step_function=node.sim.step_function)
    states = {}
    for k in range(max(steps) + 1):
        states[k] = (reference.q.copy(), reference.v.copy(), reference.tau_command.copy())
        reference.step(command)
    for k, m in zip(steps, messages):
        q, v, tau = states[k]
        assert np.array_equal(np.array(m.position), q), k
        assert np.array_equal(np.array(m.velocity), v), k
        if k > 0:
            assert np.array_equal(np.array(m.effort), tau), k
    return steps


def test_reused_joint_state_carries_the_state_of_its_step():
    """As fast as possible in the stepping thread: the one refilled JointState never shows another step's
    values (rclpy serialises in publish) and the names stay. Run until 50 states have arrived (a condition,
    not a duration: 0.4 s of wall time once gave 281 steps on a loaded machine; how fast the simulator runs is
    ``robodyn bench nodes``' ``simulator_realtime_factor``)."""
    with ros_context() as context:
        node, q0, command, messages = run_simulator(context, {"real_time_factor": 0.0, "lockstep": False}, 60.0,
                                                    messages_wanted=50)
    assert len(messages) >= 50
    assert all(list(m.name) == list(node.robot.joints) for m in messages)
    assert_messages_match_offline_steps(node, q0, command, messages)


def test_thread_and_timer_step_the_same_real_time_trajectory():
    """Real time (factor 4 to keep the test short) on the stepping thread and on the executor timer: both
    publish every step, in whole steps, each equal to the offline trajectory, hence to each other. Each runs
    until 250 states have arrived (0.06 s of wall time idle; a loaded machine drops wall time, so fewer steps
    per second: a condition, not a duration)."""
    seen = {}
    with ros_context() as context:
        for thread in (True, False):
            node, q0, command, messages = run_simulator(
                context, {"real_time_factor": 4.0, "step_thread": thread}, 60.0, messages_wanted=250)
            assert node.threaded == thread and (node.runtime.stepping_cpu_seconds() is not None) == thread
            seen[thread] = assert_messages_match_offline_steps(node, q0, command, messages)
            assert len(seen[thread]) >= 200, (thread, len(seen[thread]))
    common = set(seen[True]) & set(seen[False])
    assert len(common) >= 200


def test_real_time_thread_drops_wall_time_when_far_behind():
    with ros_context() as context, Bringup([NodeEntry("simulator", "simulator", "simulator")], context,
                                           config_file("panda"), overrides={"simulator": QUIET}) as up:
        node = up.nodes["simulator"]
        assert bring_up(node)
        assert up.spin_until(lambda: node.sim.t > 0.05, 10.0)
        assert node.runtime.thread is not None and node.runtime.thread.is_alive()
        with node.runtime.lock:                        # the stepping thread stalls for 0.3 s (300 steps)
            t_stalled = node.sim.t
            up.spin_until(lambda: False, 0.3)
        up.spin_until(lambda: node.sim.t > t_stalled + 0.03, 5.0)
        up.spin_until(lambda: False, 0.02)
        # caught up at most MAX_CATCH_UP_STEPS at once, then real time from there: far less than 0.3 s
        assert node.sim.t - t_stalled < 0.3 - 0.1 and node.sim.t - t_stalled < (MAX_CATCH_UP_STEPS + 100) * 1e-3
        assert "behind" in node._last_warning


def test_payload_parameters_attach_another_load_to_another_link():
    """No payload configured: the live payload.* parameters name a 1.5 kg box on panda_link5, the
    ~/attach_payload service attaches it while the thread steps, with the same compiled step (the
    parameters are its input); an unknown link is refused and the load kept; detach restores the robot."""
    with ros_context() as context, Bringup([NodeEntry("simulator", "simulator", "simulator")], context,
                                           config_file("panda"), overrides={"simulator": QUIET}) as up:
        client_node = rclpy.create_node("client", context=context)
        attach = client_node.create_client(Trigger, "/simulator/attach_payload")
        detach = client_node.create_client(Trigger, "/simulator/detach_payload")
        up.add_node(client_node)
        node = up.nodes["simulator"]
        assert bring_up(node)
        step_function = node.sim.step_function

        def call(client):
            assert client.wait_for_service(timeout_sec=5.0)
            future = client.call_async(Trigger.Request())
            assert up.spin_until(future.done, 10.0)
            return future.result()

        assert not call(attach).success                       # nothing configured yet
        assert node.set_parameters([Parameter("payload.mass", value=1.5), Parameter("payload.link", value="panda_link5"),
                                    Parameter("payload.com", value=[0.0, 0.02, 0.03])])[0].successful
        result = call(attach)
        assert result.success, result.message
        load = Payload.box("panda_link5", 1.5, (0.0, 0.02, 0.03), (0.1, 0.1, 0.1))
        expected = Simulator(node.sim.model)
        expected.attach_payload(load)
        assert node.sim.payload.link == "panda_link5"
        assert np.array_equal(node.sim.inertial_parameters, expected.inertial_parameters)
        t = node.sim.t
        assert up.spin_until(lambda: node.sim.t > t + 0.02, 5.0)
        assert node.sim.step_function is step_function           # nothing rebuilt
        assert np.array_equal(step_function._pi, expected.inertial_parameters)   # what the step integrated
        # the interpreted dynamics the node offers its callers agree with the compiled step's acceleration
        q, v = node.sim.q.copy(), node.sim.v.copy()
        a = node.sim.forward_dynamics(q, v, np.zeros(7), node.sim.inertial_parameters)
        assert np.isfinite(a).all()
        # an unknown link: refused, the attached load stays
        node.set_parameters([Parameter("payload.link", value="no_such_link")])
        assert node.sim.payload.link == "panda_link5" and node.runtime.payload.link == "panda_link5"
        assert call(detach).success
        assert node.sim.payload is None
        assert np.array_equal(node.sim.inertial_parameters, node.sim.model.inertial_parameters())
        up.executor.remove_node(client_node)
        client_node.destroy_node()


def test_plant_parameter_simulates_the_twin_with_its_torque_noise():
    """``plant: panda_twin``: the node simulates the Panda identified from the real log (its inertias,
    friction and Coulomb width), reports efforts with the real log's per-joint noise (replacing
    noise.effort) and integrates in ``substeps``."""
    from robodyn_ros.simulation.plant import load_plant
    with ros_context() as context:
        node, q0, command, messages = run_simulator(
            context, {"real_time_factor": 0.0, "lockstep": False, "plant": "panda_twin", "substeps": 10}, 0.4)
    twin = load_plant("panda_twin", node.robot.model)
    assert node.sim.plant is not None and node.sim.nominal_model is node.robot.model
    np.testing.assert_array_equal(node.sim.model.inertial_parameters(), twin.model.inertial_parameters())
    np.testing.assert_array_equal(node.sim.model.coulomb, twin.model.coulomb)
    assert node.sim.config.coulomb_smoothing == 0.05 and node.sim.config.substeps == 10
    np.testing.assert_array_equal(node.sim.config.noise.effort, twin.effort_noise)
    assert len(messages) > 10
    efforts = np.array([m.effort for m in messages])
    assert np.all(efforts.std(axis=0) > 0.5 * twin.effort_noise)   # the command is constant: this is the noise


def test_engine_parameter_runs_the_node_on_mujoco():
    """``engine: mujoco``: the node steps the plant in MuJoCo (the MJCF of the robot) and publishes the same
    topics; every published state is, bit for bit, the offline Simulator on the same engine after the
    number of steps its stamp says, and the arm moves under the command (gravity plus 0.5 N m)."""
    import pytest
    pytest.importorskip("mujoco", reason="the mujoco package is not installed (pip install '.[mujoco]')")
    from robodyn_ros.simulation.mujoco_engine import MujocoEngine
    with ros_context() as context:
        node, q0, command, messages = run_simulator(context, {"real_time_factor": 0.0, "lockstep": False,
                                                              "engine": "mujoco"}, 0.3)
    assert isinstance(node.sim.step_function, MujocoEngine) and node.sim.config.engine == "mujoco"
    steps = assert_messages_match_offline_steps(node, q0, command, messages)
    assert len(steps) > 50
    assert np.abs(np.array(messages[-1].position) - q0).max() > 1e-4


def test_diverged_simulation_stops_publishing_and_says_why_once():
    """A state forced absurd mid-run (panda_joint6's velocity at 1e35 rad/s, what a recorder kept from a
    diverged simulator): the node stops stepping and publishing, every JointState that reached a listener is
    finite and sound, one error line names the joint and the likely cause; it stays stopped across a
    deactivate/activate and publishes again, from its start, once configured again."""
    from robodyn_ros.simulation.divergence import DivergenceCheck

    overrides = {**QUIET, "real_time_factor": 0.0, "lockstep": False}
    with ros_context() as context, Bringup([NodeEntry("simulator", "simulator", "simulator")], context,
                                           config_file("panda"), overrides={"simulator": overrides}) as up:
        node = up.nodes["simulator"]
        node.trigger_configure()
        logged = []
        log = node.runtime.log
        node.runtime.log = lambda level, kind, text: (logged.append((level, text)), log(level, kind, text))
        check = DivergenceCheck(node.sim.model, node.sim.config, node.sim.q)
        messages, absurd = [], []

        def on_state(m):
            messages.append(m)
            if not check.within(np.array(m.position), np.array(m.velocity)):
                absurd.append(m)

        listener = rclpy.create_node("listener", context=context)
        reliable_deep = rclpy.qos.QoSProfile(depth=100_000, reliability=rclpy.qos.ReliabilityPolicy.RELIABLE)
        listener.create_subscription(JointState, "/joint_states", on_state, reliable_deep)
        up.add_node(listener)
        assert up.spin_until(lambda: listener.count_publishers("/joint_states") > 0, 10.0)
        assert bring_up(node)
        assert up.spin_until(lambda: len(messages) >= 20, 60.0)
        with node.runtime.lock:
            v = node.sim.v.copy()
            v[5] = 1e35
            node.sim.v = v
        assert up.spin_until(lambda: absurd or any(level == "error" for level, _ in logged), 60.0)
        steps = node.steps
        up.spin_until(lambda: absurd or node.steps != steps, 1.0)   # no more steps; what is in flight arrives
        assert not absurd, f"{len(absurd)} absurd joint states published, e.g. velocity {list(absurd[0].velocity)}"
        assert node.steps == steps
        assert node.runtime.thread is None or not node.runtime.thread.is_alive()
        errors = [text for level, text in logged if level == "error"]
        assert len(errors) == 1, errors
        assert "joint panda_joint6's velocity" in errors[0] and "likely cause" in errors[0] and "Stopped" in errors[0]
        # deactivate / activate: still stopped
        node.trigger_deactivate()
        node.trigger_activate()
        count = len(messages)
        assert not up.spin_until(lambda: len(messages) > count, 0.5)
        # configured again: a new simulation from the start pose
        node.trigger_deactivate()
        node.trigger_cleanup()
        assert bring_up(node)
        count = len(messages)
        assert up.spin_until(lambda: len(messages) > count + 10, 60.0)
        assert not absurd
        node.trigger_deactivate()
        up.executor.remove_node(listener)
        listener.destroy_node()


def test_franka_profile_holds_the_panda_under_zero_commands_and_recovers_from_a_reflex():
    """``driver: franka``: zero-torque commands answered to every joint state hold the Panda at home (the robot
    adds gravity); when the answers stop, 20 missed steps trip the reflex, which holds the robot and ignores
    commands until ``~/error_recovery`` is called, after which commands are applied again."""
    from std_msgs.msg import Float64MultiArray
    with ros_context() as context:
        with Bringup([NodeEntry("simulator", "simulator", "simulator")], context, config_file("panda"),
                     overrides={"simulator": {**QUIET, "driver": "franka", "real_time_factor": 0.0, "lockstep": True,
                                              "lockstep_timeout": 0.05, "publish_clock": False}}) as up:
            node = up.nodes["simulator"]
            controller = rclpy.create_node("zero_controller", context=context)
            up.add_node(controller)
            answer = {"torque": 0.0, "on": True}
            publisher = controller.create_publisher(Float64MultiArray, "/effort_controller/commands", qos.COMMAND_QOS)
            controller.create_subscription(JointState, "/joint_states", lambda msg: answer["on"] and publisher.publish(
                Float64MultiArray(data=[answer["torque"]] * 7)), qos.SENSOR_INPUT_QOS)
            recovery = controller.create_client(Trigger, "/simulator/error_recovery")
            node.trigger_configure()
            assert up.spin_until(lambda: publisher.get_subscription_count() > 0
                                 and controller.count_publishers("/joint_states") > 0, 30.0)
            home = node.sim.q.copy()
            assert bring_up(node)
            assert up.spin_until(lambda: node.sim.t >= 0.5, 120.0)
            assert node.commands_received > 400 and node.driver_reflexes == 0
            assert np.abs(node.sim.q - home).max() < 1e-5               # held by the gravity the robot adds

            answer["on"] = False                                        # the commands stop: the reflex
            assert up.spin_until(lambda: node.driver_reflexes == 1, 60.0)
            assert node.runtime.driver.stopped == "reflex"
            answer.update(on=True, torque=3.0)                         # commands are ignored while it holds
            held_at, t_held = node.sim.q.copy(), node.sim.t
            assert up.spin_until(lambda: node.sim.t >= t_held + 0.3, 120.0)
            assert np.abs(node.sim.q - held_at).max() < 1e-4 and node.runtime.driver.stopped == "reflex"

            assert recovery.wait_for_service(timeout_sec=30.0)
            future = recovery.call_async(Trigger.Request())
            assert up.spin_until(future.done, 30.0)
            missed = node.driver_missed_cycles                          # the 20 of the reflex, and any late one
            assert missed >= 20 and future.result().success and future.result().message == (
                f"reflex cleared (stops 0, reflexes 1, missed cycles {missed}, simulator catch-up steps 0)")
            t_recovered = node.sim.t                                    # 3 N m on every joint now moves the arm
            assert up.spin_until(lambda: node.sim.t >= t_recovered + 0.2, 120.0)
            assert np.abs(node.sim.q - held_at).max() > 1e-3 and node.runtime.driver.stopped is None
            node.trigger_deactivate()
            up.executor.remove_node(controller)
            controller.destroy_node()
