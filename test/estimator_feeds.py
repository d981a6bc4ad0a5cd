"""Feeding the estimator node in-process, for the estimator's fault, payload-gate and polling tests: an active
node in an isolated ROS context (``estimator_factory``), an analytic exciting trajectory, the wrist sensor's
measurements of a payload from an independent path (the NumPy batch body-wrench regressor, checked against
Pinocchio in test_identification, plus a sensor bias and Gaussian noise), and the node's callbacks fed
directly (no DDS transport: exact and fast)."""
import numpy as np

from robodyn_ros.identification.batch_regressor import batch_body_wrench_regressor
from robodyn_ros.identification.payload import sensor_frame_motions
from robodyn_ros.ros.bringup import Bringup
from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
from robodyn_ros.ros.messages import array_to_wrench_stamped, make_joint_state
from robodyn_ros.ros.testing import ros_context
from robodyn_ros.simulation.simulator import Payload

RATE = 250.0                      # joint states and wrenches per second
PAYLOAD = Payload.box("panda_link8", 2.0, com=(0.01, -0.02, 0.06), size=(0.08, 0.1, 0.12))
BIAS = np.array([1.0, -2.0, 0.5, 0.05, -0.03, 0.02])
FORCE_NOISE, TORQUE_NOISE = 0.1, 0.01
MASS_TOL = 0.1                    # kg


def exciting_trajectory(home, t):
    """q, v, a (N, 7) of a sum of two sines per joint around ``home``: rotates the wrist through enough
    orientations and accelerations to separate the payload's ten parameters from the sensor bias."""
    j = np.arange(7)
    out = [np.broadcast_to(home, (len(t), 7)).copy(), np.zeros((len(t), 7)), np.zeros((len(t), 7))]
    for amp, freq, phase in ((0.35, 0.31 + 0.07 * j, 0.5 * j), (0.15, 0.83 + 0.11 * j, 1.3 * j)):
        w = 2 * np.pi * freq
        s, c = np.sin(w * t[:, None] + phase), np.cos(w * t[:, None] + phase)
        out[0] += amp * s
        out[1] += amp * w * c
        out[2] -= amp * w * w * s
    return out


def lowpass(t, X, cutoff):
    """A driver's first-order low-pass filter of ``X`` (N, n) sampled at ``t`` (lbr_fri_ros2_stack's filter of
    the measured torque): ``y_k = y_{k-1} + α (x_k - y_{k-1})``, ``α = 1 - exp(-2π f_c Δt)``."""
    Y = np.array(X, dtype=float)
    for k in range(1, len(t)):
        alpha = 1.0 - np.exp(-2.0 * np.pi * cutoff * (t[k] - t[k - 1]))
        Y[k] = Y[k - 1] + alpha * (X[k] - Y[k - 1])
    return Y


def measured_wrenches(model, link, Q, V, A, pi, seed):
    """What the wrist sensor reports (N, 6): the payload's wrench (Y_b pi) + bias + noise."""
    vs, as_ = sensor_frame_motions(model, link, Q, V, A)
    W = batch_body_wrench_regressor(vs, as_) @ pi + BIAS
    rng = np.random.default_rng(seed)
    return W + rng.normal(0.0, [FORCE_NOISE] * 3 + [TORQUE_NOISE] * 3, W.shape)


def estimator_nodes():
    """Generator behind conftest's ``estimator_factory`` fixture: yields ``make(**overrides)`` -> an active
    estimator node (panda.yaml, wrench path only: the base-parameter RLS is not needed for these faults and
    would triple the run time), and stops every node made when resumed."""
    stack = []

    def make(**overrides):
        context_cm = ros_context()
        context = context_cm.__enter__()
        params = {"base_parameters": False, "decimation": 1, **overrides}
        up = Bringup([NodeEntry("estimator", "estimator", "estimator")], context, config_file("panda"),
                     overrides={"estimator": params})
        up.__enter__()
        stack.append((context_cm, up))
        up.activate()
        return up.nodes["estimator"]

    yield make
    for context_cm, up in reversed(stack):
        up.__exit__(None, None, None)
        context_cm.__exit__(None, None, None)


def feed(node, t, Q, V, W, record_every=10):
    """Feed joint states (stamps t) and wrenches to the node's callbacks, the wrench first as a sensor
    broadcaster at the same rate would; returns (stamps, payload mass estimates) every record_every samples."""
    names = list(node.robot.joints)
    link = node.robot.wrist_link
    stamps, masses = [], []
    for k in range(len(t)):
        if W is not None:
            node._on_wrench(array_to_wrench_stamped(float(t[k]), link, W[k]))
        node._on_state(make_joint_state(float(t[k]), names, Q[k], V[k]))
        if k % record_every == 0:
            stamps.append(float(t[k]))
            masses.append(float(node.estimator.payload_parameters()[0]))
    return np.array(stamps), np.array(masses)


def segment(node, t0, duration, pi, seed):
    t = t0 + np.arange(int(round(duration * RATE))) / RATE
    Q, V, A = exciting_trajectory(node.robot.home, t)
    return t, Q, V, measured_wrenches(node.robot.model, node.robot.wrist_link, Q, V, A, pi, seed)


def settling_time(stamps, masses, target, t_change, t_end, tol=MASS_TOL):
    """Seconds after t_change from which the estimate stays within tol of target until t_end (inf if it
    is outside at t_end)."""
    window = (stamps >= t_change) & (stamps < t_end)
    outside = np.flatnonzero(window & (np.abs(masses - target) > tol))
    if len(outside) == 0:
        return 0.0
    if outside[-1] == np.flatnonzero(window)[-1]:
        return np.inf
    return float(stamps[outside[-1] + 1] - t_change)
