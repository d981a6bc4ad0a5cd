"""The robot and the plant of ``robodyn demo``'s adaptive scenario: a bundled robot, a URDF or a parameter file
of ``robodyn config`` (``--robot``), simulated as the Panda twin, a perturbed plant around it or an identified
parameter file (``--plant``)."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from ..model.errors import ModelError

PLANT_FORMS = "twin (the Panda only), perturbed[:SEED], a parameter YAML of robodyn identify, or a URDF"


@dataclass(frozen=True)
class DemoRobot:
    """``name``: what ``--robot`` said; ``params_file``: the nodes' parameter file (config/<robot>.yaml, the
    given file, or one written for a URDF, as ``robot:=PATH`` in the launch files); ``config``: the
    inverse_dynamics node's parameters from it; ``robot``: its :class:`~robodyn_ros.ros.node_parameters.Robot`
    (model, home, wrist link); ``reference``: the nodes' built-in trajectory (the generator around home)."""

    name: str
    params_file: str
    config: dict
    robot: object
    reference: object

    @property
    def model(self):
        return self.robot.model


def demo_robot(robot, directory=None):
    """:class:`DemoRobot` of ``robot`` (a bundled name, a URDF or a ``robodyn config`` file); the file written for
    a URDF goes to ``directory`` (default: a new temporary one). ModelError naming what is wrong."""
    from ..control.reference import fourier_reference
    from ..ros.launch_description_data import robot_parameters_file
    from ..ros.node_parameters import load_robot, resolve_node_config
    from ..ros.parameters import load_params_yaml

    directory = directory or tempfile.mkdtemp(prefix="robodyn_demo_")
    params_file = robot_parameters_file(robot, directory)
    try:
        config = resolve_node_config("inverse_dynamics", load_params_yaml(params_file, "inverse_dynamics"))
    except ValueError as exc:
        raise ModelError(f"--robot {robot}: {exc}") from None
    loaded = load_robot(config)
    reference = fourier_reference(loaded.home, config["generator.amplitude"], config["generator.period"],
                                  config["generator.harmonics"])
    return DemoRobot(robot, params_file, config, loaded, reference)


def plant_source(plant, robot):
    """What the simulator's ``plant`` parameter and :func:`robodyn_ros.simulation.plant.load_plant` take for
    ``--plant`` on ``robot`` (a :class:`DemoRobot`): ``panda_twin`` for ``twin``, else the spec itself.
    ModelError naming the accepted forms."""
    if plant == "twin":
        from ..robots import bundled_twin_path
        if robot.name != "panda":
            raise ModelError(f"--plant twin is the Panda identified from a real robot, not {robot.name}; give "
                             f"--plant {PLANT_FORMS}")
        bundled_twin_path("panda_twin")
        return "panda_twin"
    if plant.startswith("perturbed"):
        return plant
    if os.path.isfile(plant):
        return os.path.abspath(plant)
    raise ModelError(f"--plant {plant}: not one of {PLANT_FORMS} (no such file)")


def plant_description(plant, source):
    """The report's words for the simulated robot."""
    if source == "panda_twin":
        return "panda_twin (identified from a real Panda's log)"
    if plant.startswith("perturbed"):
        return f"{plant} (a plausible real robot drawn around the URDF)"
    return source


def carried_payload(setup, payload_mass, duration, com=None):
    """``(mass, note)``: the payload the demo attaches to ``setup``'s wrist link for the requested
    ``payload_mass`` (kg, a 0.1-m box centred ``com`` in the link frame; None: the demo's, the library loop's
    ``AdaptiveLoopConfig.payload_com``, the simulator's ``payload.com``) along its reference over ``duration`` s:
    the requested mass when the robot carries it within :data:`~robodyn_ros.simulation.payload_capacity.MARGIN`
    of its effort limits (:func:`~robodyn_ros.simulation.payload_capacity.payload_capacity`), else the largest
    that it carries, in steps of 0.1 kg (0: none), with ``note`` the one line saying why (None when unchanged)."""
    import math

    from ..simulation.adaptive_loop import AdaptiveLoopConfig
    from ..simulation.payload_capacity import payload_capacity

    com = AdaptiveLoopConfig.payload_com if com is None else com
    model = setup.model
    capacity = payload_capacity(model, setup.reference, setup.robot.wrist_link, com, duration)
    if payload_mass <= capacity.mass:
        return float(payload_mass), None
    carried = math.floor(10.0 * capacity.mass + 1e-9) / 10.0
    j = model.joint_names.index(capacity.joint)
    limit = f"{capacity.joint}'s effort limit ({model.effort_limit[j]:g} N m)"
    margin = f"the {100.0 * capacity.margin:.0f} % within which the demo attaches a payload"
    if capacity.mass <= 0.0:
        why = f"the motion alone needs {100.0 * capacity.motion_ratio[j]:.0f} % of {limit}, more than {margin}"
    else:
        why = (f"a {payload_mass:g}-kg payload at {setup.robot.wrist_link} needs more of {limit} along the motion "
               f"than {margin}")
    if carried > 0.0:
        return carried, f"{why}: a {carried:g}-kg payload attached instead"
    return carried, f"{why}: no payload attached (a home where gravity loads the joints less leaves room for one)"
