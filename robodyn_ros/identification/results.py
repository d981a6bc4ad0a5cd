"""Writing identification results: the parameter YAML (schema in shared/API.md) and the identified URDF.

Both are built completely in memory first and then written atomically (a temporary file in the target
directory, flushed and fsynced, then ``os.replace``), so a failure never leaves a half-written file and
an existing file is either kept or replaced whole.

URDF: the input URDF with, per body, the identified inertia in the ``<inertial>`` of the body's link
(COM as the inertial origin, inertia about the COM in link axes); links merged into a body through fixed
joints get zero mass and inertia, because the body's identified inertia has absorbed them; each movable
joint gets ``<dynamics damping="viscous" friction="coulomb"/>``. Joints locked for the identification are
written as fixed joints at their locked coordinate (``robodyn_ros.model.urdf_edit.lock_joints``), so the file
describes exactly the identified model (a movable joint with a massless child would also break forward
dynamics in simulators). Armature and friction offset have no URDF tag: they are in the YAML and in a
comment of the URDF.
"""
from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET

import numpy as np
import yaml

from ..model.errors import ModelError
from ..model.spatial import numpy_inertia_params, numpy_inertia_split
from ..model.urdf_edit import lock_joints


def _f(x):
    return float(x)


def link_entries(model):
    """Per body: ``{link: {mass, com [3], inertia [ixx, ixy, ixz, iyy, iyz, izz] about the COM}}``."""
    out = {}
    for name, pi_b in zip(model.body_names, model.inertias):
        m, c, Ic = numpy_inertia_split(pi_b)
        out[name] = {"mass": _f(m), "com": [_f(x) for x in c],
                     "inertia": [_f(Ic[0, 0]), _f(Ic[0, 1]), _f(Ic[0, 2]), _f(Ic[1, 1]), _f(Ic[1, 2]), _f(Ic[2, 2])]}
    return out


def joint_entries(model):
    """Per joint: ``{armature, viscous, coulomb, offset}``."""
    return {name: {"armature": _f(model.armature[i]), "viscous": _f(model.viscous[i]),
                   "coulomb": _f(model.coulomb[i]), "offset": _f(model.friction_offset[i])}
            for i, name in enumerate(model.joint_names)}


def result_document(result, robot=None, identifiability=None, extra=None):
    """The YAML document (dict) of an :class:`~robodyn_ros.identification.batch.IdentificationResult`."""
    model, fit = result.identified, result.fit
    doc = {
        "robot": robot or model.name,
        "links": link_entries(model),
        "joints": joint_entries(model),
        "base_parameters": {"names": list(result.base.names), "values": [_f(x) for x in fit.beta],
                            "std": [_f(x) for x in fit.std]},
        "fit": {"samples": int(fit.samples), "relative_error": _f(fit.relative_error),
                "condition_number": _f(fit.condition_number)},
        "friction_model": {"formula": "tau_f = viscous*v + coulomb*s(v) + offset",
                           "s": "sign(v)" if result.coulomb_width <= 0 else f"tanh(v / {result.coulomb_width})",
                           "coulomb_width": _f(result.coulomb_width)},
        "signal_processing": {"lowpass_cutoff_hz": _f(result.cutoff_hz),
                              "filter": "zero-phase Butterworth (robodyn_ros.identification.signal_filters), same on q, v, tau"},
    }
    if result.consistent is not None:
        from .physical_consistency import pseudo_inertia_margin
        c = result.consistent
        doc["physical_consistency"] = {
            "method": "log-Cholesky pseudo-inertia with a margin, IPOPT",
            "margin": {"condition": "lambda_min(D J D) >= epsilon * trace(D J D), D = diag(1/l, 1/l, 1/l, 1)",
                       "epsilon": _f(c.margin), "l": _f(c.length)},
            "solver_status": c.solver, "chi2_increase": _f(c.chi2_increase),
            "links": {name: {"margin": pseudo_inertia_margin(pi_b, c.length),
                             "principal_moments": [_f(x) for x in np.linalg.eigvalsh(numpy_inertia_split(pi_b)[2])]}
                      for name, pi_b in zip(model.body_names, model.inertias)}}
    if identifiability:
        doc["identifiability"] = dict(identifiability)
    if extra:
        doc.update(extra)
    return doc


def identified_urdf(xml, model, locked=None):
    """URDF text of ``model``'s identified inertias and friction written into the input URDF ``xml``
    (module docstring). ``locked``: the joints locked for identification (name -> coordinate)."""
    if locked:
        xml = lock_joints(xml, locked)
    root = ET.fromstring(xml)
    links = {link.get("name"): link for link in root.findall("link")}
    for b, name in enumerate(model.body_names):
        m, c, Ic = numpy_inertia_split(model.inertias[b])
        _set_inertial(links[name], m, c, Ic)
        for merged in model.merged_links[b]:
            if merged != name and merged in links:
                _set_inertial(links[merged], 0.0, np.zeros(3), np.zeros((3, 3)))
    joints = {j.get("name"): j for j in root.findall("joint")}
    for i, name in enumerate(model.joint_names):
        joint = joints[name]
        for old in joint.findall("dynamics"):
            joint.remove(old)
        ET.SubElement(joint, "dynamics", damping=repr(float(model.viscous[i])), friction=repr(float(model.coulomb[i])))
    notes = "; ".join(f"{n}: armature {model.armature[i]!r} offset {model.friction_offset[i]!r}"
                      for i, n in enumerate(model.joint_names))
    root.insert(0, ET.Comment(f" identified by robodyn identify; not expressible in URDF: {notes} "))
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode")


def _set_inertial(link, m, c, Ic):
    for old in link.findall("inertial"):
        link.remove(old)
    inertial = ET.Element("inertial")
    ET.SubElement(inertial, "origin", xyz=" ".join(repr(float(x)) for x in c), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=repr(float(m)))
    ET.SubElement(inertial, "inertia", ixx=repr(float(Ic[0, 0])), ixy=repr(float(Ic[0, 1])),
                  ixz=repr(float(Ic[0, 2])), iyy=repr(float(Ic[1, 1])), iyz=repr(float(Ic[1, 2])),
                  izz=repr(float(Ic[2, 2])))
    link.insert(0, inertial)


def new_file_mode():
    """The mode ``open(path, "w")`` gives a new file: 0o666 less the process umask (``mkstemp`` makes
    0o600 whatever the umask)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomically(files):
    """Write ``{path: text or bytes}``: every file to a temporary sibling first, then rename them all. On
    any failure the temporaries are removed and no target is touched. The files get the user's umask."""
    staged = []
    mode = new_file_mode()
    try:
        for path, text in files.items():
            directory = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(prefix=".robodyn-", suffix=".tmp", dir=directory)
            staged.append((tmp, path))
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w" if isinstance(text, str) else "wb") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.remove(tmp)


def yaml_text(doc):
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)


def read_parameters(path):
    """The YAML document written by ``robodyn identify``."""
    with open(path) as stream:
        return yaml.safe_load(stream)


def _parameter_numbers(where, value, n):
    try:
        x = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: expected {n} number(s), got {value!r}") from None
    if x.size != n or not np.all(np.isfinite(x)):
        raise ModelError(f"{where}: expected {n} finite number(s), got {value!r}")
    return x


def model_from_parameters(model, params, source="parameters"):
    """``model`` with the inertias, armature and friction of a parameter document applied on top.

    ``params``: the document written by ``robodyn identify`` (a dict, or the path of its YAML): ``links:``
    per body link ``{mass, com (3,), inertia [ixx, ixy, ixz, iyy, iyz, izz] about the COM, link axes}``,
    ``joints:`` per joint ``{armature, viscous, coulomb, offset}``. Bodies and joints the document does not
    name keep the model's values; a name the model does not have, a missing or non-finite number or a
    negative mass raises :class:`~robodyn_ros.model.errors.ModelError` naming the link or joint (and the file)."""
    if isinstance(params, (str, os.PathLike)):
        source = str(params)
        try:
            params = read_parameters(params)
        except OSError as exc:
            raise ModelError(f"{source}: cannot read ({exc.strerror or exc})") from None
        except yaml.YAMLError as exc:
            raise ModelError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(params, dict) or not isinstance(params.get("links", {}), dict) \
            or not isinstance(params.get("joints", {}), dict):
        raise ModelError(f"{source}: expected a mapping with 'links:' and 'joints:' (robodyn identify's format)")
    pi = model.inertial_parameters()
    for link, entry in (params.get("links") or {}).items():
        if link not in model.body_names:
            raise ModelError(f"{source}: link '{link}' is not a body of {model.name} "
                             f"(bodies: {', '.join(model.body_names)})")
        where = f"{source}: link '{link}'"
        if not isinstance(entry, dict) or not {"mass", "com", "inertia"} <= set(entry):
            raise ModelError(f"{where}: needs mass, com and inertia")
        m = _parameter_numbers(f"{where} mass", entry["mass"], 1)[0]
        if m < 0:
            raise ModelError(f"{where}: negative mass {m}")
        com = _parameter_numbers(f"{where} com", entry["com"], 3)
        ixx, ixy, ixz, iyy, iyz, izz = _parameter_numbers(f"{where} inertia", entry["inertia"], 6)
        Ic = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        b = model.body_names.index(link)
        pi[10 * b:10 * b + 10] = numpy_inertia_params(m, com, Ic)
    friction = {k: np.array(getattr(model, a), dtype=float) for k, a in
                (("armature", "armature"), ("viscous", "viscous"), ("coulomb", "coulomb"), ("offset", "friction_offset"))}
    for joint, entry in (params.get("joints") or {}).items():
        if joint not in model.joint_names:
            raise ModelError(f"{source}: joint '{joint}' is not a movable joint of {model.name} "
                             f"(joints: {', '.join(model.joint_names)})")
        if not isinstance(entry, dict):
            raise ModelError(f"{source}: joint '{joint}': expected a mapping of armature, viscous, coulomb, offset")
        i = model.joint_names.index(joint)
        for key, values in friction.items():
            if key in entry:
                values[i] = _parameter_numbers(f"{source}: joint '{joint}' {key}", entry[key], 1)[0]
    return (model.with_inertial_parameters(pi).with_armature(friction["armature"])
            .with_friction(friction["viscous"], friction["coulomb"], friction["offset"]))


def parameters_coulomb_width(params, default=0.0):
    """The ``tanh(v / width)`` width (rad/s) of the Coulomb friction of a parameter document (dict)."""
    width = (params.get("friction_model") or {}).get("coulomb_width", default)
    return float(width)
