"""``robodyn bench tracking``: computed torque with the exact model as plant, on the three bundled robots and
on every fixed-base arm of example-robot-data with 5 to 7 joints, with each engine.

Each run is the library loop of :mod:`robodyn_ros.simulation.adaptive_loop` without adaptation (the nominal
model is the plant: no mismatch at all, its Coulomb law ``tanh(v / 1e-3)`` included, the simulator's
smoothing): computed torque (kp 400, kd 40) on the base parameters, held for the 1-ms control period
(:mod:`robodyn_ros.control.base_parameter_control`: the inverse dynamics at the middle of the hold, the
friction at ``v_d + h/2 a_d``), the loop's default sensor noise (position 1e-5 rad, velocity 1e-3 rad/s,
effort 0.01 N m), 1 kHz, one simulator step per control step (``substeps`` 1), following a Fourier reference
of about 0.3 rad and period 4 s (2 harmonics) around the robot's home (the bundled robots') or around zero
kept 0.35 rad inside the limits (the others). Reported: the RMS of ``q - q_d`` over all joints for t = 1-5 s,
per engine (``robodyn``: integrator ``rk4_implicit``, each joint's friction relaxed exactly over the step;
``mujoco``: MuJoCo's ``implicitfast``, four semi-implicit Euler steps of 0.25 ms per simulator step; the
plant's Coulomb friction as MuJoCo's ``frictionloss``).

Two more pairs of columns: ``fine``, the same runs with 20 simulator steps per control step (the command
still held for 1 ms; MuJoCo then takes 80 steps): a plant resolved finely enough for the 70-µs joints,
against which the engines' default results can be read; and ``at_sample``, the law with ``hold`` 0 (the
rigid body at the sampled state, the friction at the reference velocity ``v_d``, the law as a
continuous-time design states it), which lags the reference on friction-dominated joints whatever the
engine. Bounded: about 2 s per default run and 5-20 s per fine run on a free core.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from .kernels import robots_root

ERD_ARMS = {   # name: URDF under example-robot-data's robots/ folder, joints locked at 0
    "ur3": ("ur_description/urdf/ur3_robot.urdf", None),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", None),
    "ur10": ("ur_description/urdf/ur10_robot.urdf", None),
    "panda": ("panda_description/urdf/panda.urdf", {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}),
    "kinova": ("kinova_description/robots/kinova.urdf", None),
    "xarm7": ("xarm_description/urdf/xarm7.urdf", None),
    "z1": ("z1_description/urdf/z1.urdf", None),
    "so100": ("so_arm_description/urdf/so100.urdf", None),
    "so101": ("so_arm_description/urdf/so101.urdf", None),
    "talos_left_arm": ("talos_data/robots/talos_left_arm.urdf", None),
    "hextilt_flying_arm_5": ("hextilt_description/urdf/hextilt_flying_arm_5.urdf", None),
}
"""The fixed-base arms of example-robot-data with 5-7 moving joints (its legged robots, humanoids, hands
and 2-3 joint pendulums left out; ``ur3.urdf`` itself does not parse: no robot name)."""
BUNDLED = ("panda", "ur5", "iiwa")
ENGINES = ("robodyn", "mujoco")
WINDOW = (1.0, 5.0)
FINE_SUBSTEPS = 20
DURATION = 5.0


def arms():
    """``[(label, model, home)]``: the bundled robots (their home), then the example-robot-data arms
    (home: zero clipped 0.35 rad inside the limits, mid-range where the range is narrower than 0.7 rad)."""
    from ..model.model import Model
    from ..robots import bundled_robot_info
    out = []
    for name in BUNDLED:
        info = bundled_robot_info(name)
        out.append((f"{name} (bundled)", Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"]),
                    np.asarray(info["home"], dtype=float)))
    folder = robots_root()
    for name, (path, locked) in ERD_ARMS.items():
        if folder is None or not os.path.isfile(os.path.join(folder, path)):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = Model.from_urdf(os.path.join(folder, path), locked_joints=locked)
        lo, hi = model.lower + 0.35, model.upper - 0.35
        finite = np.isfinite(model.lower) & np.isfinite(model.upper)
        middle = 0.5 * (np.where(finite, model.lower, 0.0) + np.where(finite, model.upper, 0.0))
        home = np.where(lo <= hi, np.clip(0.0, lo, hi), middle)
        out.append((name, model, home))
    return out


def tracking_rms(model, home, engine="robodyn", at_sample=False, duration=DURATION, seed=0, substeps=1):
    """``(RMS over all joints for t in WINDOW, per-joint RMS (nv,), non-finite commands)`` of computed
    torque with ``model`` as its own plant (module docstring) integrated by ``engine`` in ``substeps``
    steps per control step; ``at_sample``: the law with ``hold`` 0."""
    from ..control.reference import fourier_reference
    from ..simulation.adaptive_loop import AdaptiveLoop, AdaptiveLoopConfig, rms
    from ..simulation.plant import Plant
    from ..simulation.simulator import SimulatorConfig

    config = AdaptiveLoopConfig(duration=duration, attach_time=None, adapt=False, engine=engine, seed=seed,
                                substeps=substeps, coulomb_width=SimulatorConfig.coulomb_smoothing)
    loop = AdaptiveLoop(model, Plant(model), fourier_reference(home, 0.3, 4.0, 2), config)
    if at_sample:
        loop.controller.hold = 0.0
    out = loop.run()
    rows = out["error"][(out["t"] >= WINDOW[0]) & (out["t"] < WINDOW[1])]
    return rms(out["error"], out["t"], *WINDOW), np.sqrt(np.mean(rows ** 2, axis=0)), out["non_finite_commands"]


def run(json=False, engines=ENGINES, at_sample=True, fine=True):
    """The table (module docstring); returns ``{label: {"nv", "rms_<engine>", "rms_<engine>_fine",
    "rms_<engine>_at_sample", "worst_joint_<engine>", "non_finite_<engine>"}}``."""
    from ..simulation.mujoco_engine import import_mujoco
    from ..model.errors import ModelError
    try:
        import_mujoco()
    except ModelError as exc:
        engines = tuple(e for e in engines if e != "mujoco")
        print(f"(no MuJoCo column: {exc})", file=sys.stderr)
    columns = [(e, "", {}) for e in engines]
    columns += [(e, "_fine", {"substeps": FINE_SUBSTEPS}) for e in engines] if fine else []
    columns += [(e, "_at_sample", {"at_sample": True}) for e in engines] if at_sample else []
    result = {}
    if not json:
        heads = [f"{e}{suffix.replace('_', ' ')}" for e, suffix, _ in columns]
        print(f"{'robot':24s} {'nv':>3s} " + " ".join(f"{h:>18s}" for h in heads))
    for label, model, home in arms():
        row = {"nv": model.nv}
        for engine, suffix, options in columns:
            value, per_joint, non_finite = tracking_rms(model, home, engine, **options)
            row[f"rms_{engine}{suffix}"] = value
            if not suffix:
                row[f"worst_joint_{engine}"] = model.joint_names[int(np.argmax(per_joint))]
                row[f"non_finite_{engine}"] = non_finite
        result[label] = row
        if not json:
            print(f"{label:24s} {model.nv:3d} " + " ".join(f"{row[f'rms_{e}{s}']:18.2e}" for e, s, _ in columns),
                  flush=True)
    return result


if __name__ == "__main__":
    run()
