"""The simulated robot when it is not the controllers' model: a plant loaded from a URDF, or from a parameter
document in the format ``robodyn identify`` writes (inertias, armature, viscous, Coulomb and offset friction)
applied on top of the robot's URDF.

A real robot is never its URDF: the bundled Panda URDF predicts the torques measured on a real Panda with
about 18 % error. ``robodyn_ros/robots/panda_twin.yaml`` is the Panda identified from such measurements
(``tools/make_panda_twin.py``); as a plant it makes the simulation differ from the nominal model the way the
real robot does, with the real robot's joint-torque noise (``sensor_noise.effort`` of the document).

    >>> plant = load_plant("panda_twin", nominal_model)            # or a URDF path, or a YAML path
    >>> sim = Simulator(nominal_model, SimulatorConfig(coulomb_smoothing=plant.coulomb_width,
    ...                 noise=plant.sensor_noise(SensorNoise(position=1e-5))), plant=plant)
"""
from __future__ import annotations

import os

import numpy as np

from ..model.errors import ModelError
from ..model.model import Model
from .perturbed_plant import perturbed_plant
from .plant_parameters import Plant

__all__ = ["Plant", "bundled_plant_path", "load_plant", "plant_key"]


def plant_key(model):
    """What a compiled step (:mod:`robodyn_ros.simulation.simulation_step`) bakes in: the model's fingerprint
    (structure, inertias, armature, gravity) plus its friction, joint limits and effort limits (a string)."""
    import hashlib
    h = hashlib.sha256(model.fingerprint().encode())
    for arr in (model.viscous, model.coulomb, model.friction_offset, model.lower, model.upper, model.effort_limit):
        h.update(np.ascontiguousarray(arr, dtype=float).tobytes())
    return h.hexdigest()


def bundled_plant_path(name):
    """Path of a bundled parameter document: ``panda_twin`` (robodyn_ros/robots/panda_twin.yaml)."""
    from ..robots import bundled_twin_path
    return bundled_twin_path(name)


def load_plant(source, model, locked_joints=None):
    """A :class:`Plant` for the controllers' ``model`` (nv joints):

    * a Model: used as it is;
    * ``perturbed`` or ``perturbed:SEED``: a plausible real robot around ``model`` drawn with that seed (0 by
      default), :func:`robodyn_ros.simulation.perturbed_plant.perturbed_plant`;
    * a parameter YAML (``*.yaml``/``*.yml`` path, or a bundled name such as ``panda_twin``): its ``links``
      and ``joints`` applied on top of ``model`` (:func:`robodyn_ros.identification.results.model_from_parameters`),
      its ``friction_model.coulomb_width`` and ``sensor_noise.effort`` (one std per joint, N m) kept;
    * a URDF (path or XML text): loaded with ``locked_joints`` (e.g. Panda's fingers).

    The plant must have ``model``'s joints; every failure is a ModelError naming the file and what is wrong."""
    from ..identification.results import model_from_parameters, parameters_coulomb_width, read_parameters
    if isinstance(source, Model):
        plant = Plant(source, source="model")
    elif str(source).strip().startswith("perturbed"):
        kind, _, seed = str(source).strip().partition(":")
        if kind != "perturbed" or (seed and not seed.strip().lstrip("-").isdigit()):
            raise ModelError(f"plant {source}: expected perturbed or perturbed:SEED with an integer SEED")
        plant = perturbed_plant(model, int(seed) if seed else 0)
    else:
        source = str(source)
        name = source
        if not source.lstrip().startswith("<") and not os.path.exists(source) and "/" not in source:
            source = bundled_plant_path(source)
        if source.lower().endswith((".yaml", ".yml")):
            try:
                doc = read_parameters(source)
            except OSError as exc:
                raise ModelError(f"plant {name}: cannot read ({exc.strerror or exc})") from None
            except Exception as exc:   # yaml.YAMLError
                raise ModelError(f"plant {name}: not valid YAML ({str(exc).splitlines()[0]})") from None
            plant_model = model_from_parameters(model, doc, source=name)
            noise = (doc.get("sensor_noise") or {}).get("effort") if isinstance(doc, dict) else None
            if noise is not None:
                noise = np.asarray(noise, dtype=float).reshape(-1)
                if noise.shape != (model.nv,) or not np.all(np.isfinite(noise)) or np.any(noise < 0):
                    raise ModelError(f"plant {name}: sensor_noise.effort must be {model.nv} non-negative numbers")
            plant = Plant(plant_model, parameters_coulomb_width(doc, None) if "friction_model" in doc else None,
                          noise, name)
        else:
            plant = Plant(Model.from_urdf(source, locked_joints=locked_joints), source=name if len(name) < 200
                          else "URDF text")
    plant.check_matches(model)
    return plant
