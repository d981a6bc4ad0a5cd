"""URDF to :class:`~robodyn_ros.model.model.Model` (Cărmizaru Alg. 3: extraction of kinematic and inertial
parameters), with links on fixed joints merged into their movable ancestor as Pinocchio does.

Bodies are created in depth-first order of the URDF tree, children in document order of their joints.
Everything that is wrong in the description raises :class:`ModelError` naming the file, link or joint.
"""
from __future__ import annotations

import os
import warnings
from contextlib import contextmanager

import numpy as np

from . import spatial
from .backend import NUMPY
from .errors import ModelError, NonPhysicalInertiaWarning
from .joints import FreeFlyerJoint, PrismaticJoint, RevoluteJoint

_MOVABLE = ("revolute", "continuous", "prismatic")


@contextmanager
def _captured_parser_warnings(sink):
    """urdf_parser_py writes warnings about unknown tags to stderr: keep them for ``model.notes``."""
    import urdf_parser_py.xml_reflection.core as core
    previous = core.on_error
    core.on_error = sink.append
    try:
        yield
    finally:
        core.on_error = previous


def read_urdf_source(source):
    """``(xml_text, origin)`` from a path or an XML string; origin names the file for messages."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith("<")):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise ModelError(f"URDF file not found: {path}")
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read(), path
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read URDF file {path}: {exc}") from exc
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if not isinstance(source, str):
        raise ModelError(f"URDF source must be a path or an XML string, got {type(source).__name__}")
    return source, "<URDF string>"


# What the dynamics reads of a URDF; everything else (visuals, materials, textures, transmissions, gazebo
# and sensor tags, calibration, safety controllers) is dropped before parsing, so that it never fails a load.
_READ = {"robot": {"link", "joint"}, "link": {"inertial", "collision"},
         "joint": {"origin", "parent", "child", "axis", "limit", "dynamics", "mimic"}}


def _prune(root, keep_collisions):
    """Remove, in place, the elements of the XML tree ``root`` that the dynamics does not read."""
    def prune(element, keep):
        for child in list(element):
            if not isinstance(child.tag, str) or child.tag not in keep or \
                    (child.tag == "collision" and not keep_collisions):
                element.remove(child)
    prune(root, _READ["robot"])
    for element in root:
        prune(element, _READ.get(element.tag, set()))


def parse_urdf(xml, origin, keep_collisions=True):
    """The urdf_parser_py ``Robot`` and the parser's warnings; ModelError on malformed XML.

    Only what the dynamics reads is parsed (``<link>``: ``<inertial>``, and ``<collision>`` when
    ``keep_collisions``, for the mesh fill; ``<joint>``: origin, parent, child, axis, limit, dynamics,
    mimic): a ``<texture>`` without a file name or a ``<transmission>`` without a type never fails a load."""
    from urdf_parser_py.urdf import URDF
    from urdf_parser_py.xml_reflection.core import Path, etree
    parser_warnings = []
    try:
        with _captured_parser_warnings(parser_warnings):
            node = etree.fromstring(xml.encode("utf-8") if "encoding=" in xml[:100] else xml)
            _prune(node, keep_collisions)
            robot = URDF.from_xml(node, Path(URDF.XML_REFL.tag, tree=etree.ElementTree(node)))
    except Exception as exc:  # lxml and urdf_parser_py raise many types for malformed files
        raise ModelError(f"{origin}: malformed URDF: {exc}") from exc
    if not robot.links:
        raise ModelError(f"{origin}: the URDF has no <link>")
    return robot, [f"{origin}: {w}" for w in parser_warnings]


def _origin(element):
    o = getattr(element, "origin", None)
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = np.zeros(3) if o.xyz is None else np.asarray(o.xyz, dtype=float)
    rpy = np.zeros(3) if o.rpy is None else np.asarray(o.rpy, dtype=float)
    if xyz.shape != (3,) or rpy.shape != (3,) or not (np.all(np.abs(xyz) <= PHYSICAL_MAGNITUDE)
                                                      and np.all(np.isfinite(rpy))):
        raise ModelError(f"origin of '{element_name(element)}' must be 3 finite xyz (|xyz| <= "
                         f"{PHYSICAL_MAGNITUDE:g} m) and 3 finite rpy values")
    return spatial.rpy_to_matrix(rpy), xyz


def element_name(e):
    return getattr(e, "name", None) or type(e).__name__


PHYSICAL_MAGNITUDE = 1e12
"""Largest accepted |mass| (kg), |inertia| (kg m^2), |origin xyz| (m) and joint axis component: far
beyond any robot, and small enough that the dynamics of the model (products of masses, lever arms and
state values up to ``model.MAX_MAGNITUDE``) cannot overflow."""

INERTIA_TOLERANCE = 1e-6
"""kg m^2: principal moments or triangle-inequality defects smaller than this are rounding (real URDFs,
e.g. Tiago's antenna links, carry such) and only noted; larger ones are noted and warned about, or
raise ModelError with ``strict=True``."""


def link_inertial_parameters(link, origin, notes=None, strict=False, defects=None):
    """10-vector of a URDF link's ``<inertial>`` about the link origin in link axes (zeros if absent).

    Checks the physical-consistency conditions of a rigid body: mass >= 0 (a negative mass always raises
    ModelError), and an inertia about the COM that is positive semi-definite, satisfies the triangle
    inequalities and is zero when the mass is. Defects within :data:`INERTIA_TOLERANCE` are recorded in
    ``notes``; larger ones raise ModelError when ``strict``, else the link loads as written (as Pinocchio
    loads it), with the defect in ``notes`` and the link's name appended to ``defects``."""
    inertial = link.inertial
    if inertial is None:
        return np.zeros(10)
    m = float(inertial.mass or 0.0)
    t = inertial.inertia
    I = np.zeros((3, 3)) if t is None else np.array([[t.ixx, t.ixy, t.ixz], [t.ixy, t.iyy, t.iyz],
                                                      [t.ixz, t.iyz, t.izz]], dtype=float)
    if not (np.isfinite(m) and np.all(np.isfinite(I))):
        raise ModelError(f"{origin}: link '{link.name}' has a non-finite mass or inertia")
    if abs(m) > PHYSICAL_MAGNITUDE or np.abs(I).max() > PHYSICAL_MAGNITUDE:
        raise ModelError(f"{origin}: link '{link.name}' has a mass or inertia beyond {PHYSICAL_MAGNITUDE:g}")
    if m < 0:
        raise ModelError(f"{origin}: link '{link.name}' has negative mass {m}")
    R, c = _origin(inertial)
    Ic = R @ I @ R.T
    eig = np.linalg.eigvalsh(Ic)
    tol = INERTIA_TOLERANCE * max(1.0, float(np.abs(eig).max()))
    problem = None
    if eig.min() < -tol:
        problem = (f"{origin}: link '{link.name}' has an inertia that is not positive definite "
                   f"(principal moments {eig.round(9).tolist()})")
    elif eig[0] + eig[1] < eig[2] - tol:
        problem = (f"{origin}: link '{link.name}' has an inertia violating the triangle inequality "
                   f"(principal moments {eig.round(9).tolist()})")
    elif m == 0 and np.any(np.abs(Ic) > tol):
        problem = f"{origin}: link '{link.name}' has zero mass but a nonzero inertia"
    if problem is not None:
        if strict:
            raise ModelError(problem)
        if notes is not None:
            notes.append(f"{problem}: loaded as written (non-physical; strict=True refuses it)")
        if defects is not None:
            defects.append(link.name)
    elif notes is not None and (eig.min() < 0 or eig[0] + eig[1] < eig[2]):
        notes.append(f"{origin}: link '{link.name}' has a slightly inconsistent inertia "
                     f"(principal moments {eig.tolist()}), accepted within {INERTIA_TOLERANCE} kg m^2")
    return spatial.numpy_inertia_params(m, c, Ic)


def _joint_limits(joint, origin):
    """``(lower, upper, velocity, effort)`` of a joint's ``<limit>``; missing or zero velocity/effort
    mean unlimited (inf). ModelError on NaN, on a negative velocity or effort limit, on lower > upper."""
    lim = joint.limit
    lo, hi = -np.inf, np.inf
    vel = eff = np.inf
    if lim is not None:
        if joint.type != "continuous":
            lo = -np.inf if lim.lower is None else float(lim.lower)
            hi = np.inf if lim.upper is None else float(lim.upper)
        vel = np.inf if not lim.velocity else float(lim.velocity)
        eff = np.inf if not lim.effort else float(lim.effort)
    if np.isnan([lo, hi, vel, eff]).any() or vel < 0 or eff < 0:
        raise ModelError(f"{origin}: joint '{joint.name}' has an invalid <limit> (lower {lo}, upper {hi}, "
                         f"velocity {vel}, effort {eff}): NaN or a negative velocity/effort limit")
    if lo > hi:
        raise ModelError(f"{origin}: joint '{joint.name}' has lower limit {lo} above upper limit {hi}")
    return lo, hi, vel, eff


def _joint_friction(joint, origin):
    """``(viscous, coulomb)`` from a joint's ``<dynamics damping friction>``; ModelError unless finite
    and non-negative (negative damping or friction would inject energy)."""
    dyn = joint.dynamics
    damping = float(dyn.damping or 0.0) if dyn is not None else 0.0
    friction = float(dyn.friction or 0.0) if dyn is not None else 0.0
    if not (0.0 <= damping <= PHYSICAL_MAGNITUDE and 0.0 <= friction <= PHYSICAL_MAGNITUDE):
        raise ModelError(f"{origin}: joint '{joint.name}' has <dynamics damping=\"{damping}\" "
                         f"friction=\"{friction}\">: both must be finite and non-negative")
    return damping, friction


def _check_tree(robot, origin):
    """Root link and child joints per link; ModelError for duplicate names, dangling joints, loops and
    forests."""
    for kind, names in (("link", [l.name for l in robot.links]), ("joint", [j.name for j in robot.joints])):
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ModelError(f"{origin}: {kind} name(s) {repeated} used more than once")
    links = {l.name for l in robot.links}
    child_of = {}
    children = {name: [] for name in links}
    for j in robot.joints:
        for role, name in (("parent", j.parent), ("child", j.child)):
            if name not in links:
                raise ModelError(f"{origin}: joint '{j.name}' has {role} link '{name}', which does not exist")
        if j.child in child_of:
            raise ModelError(f"{origin}: link '{j.child}' is the child of joints '{child_of[j.child].name}' and "
                             f"'{j.name}': kinematic loop (closed chains are not trees)")
        child_of[j.child] = j
        children[j.parent].append(j)
    roots = [l.name for l in robot.links if l.name not in child_of]
    if not roots:
        raise ModelError(f"{origin}: every link is a child of a joint: kinematic loop")
    if len(roots) > 1:
        raise ModelError(f"{origin}: several root links {roots}: the links do not form one tree")
    seen, stack = set(), [roots[0]]
    while stack:
        name = stack.pop()
        seen.add(name)
        stack.extend(j.child for j in children[name])
    if seen != links:
        raise ModelError(f"{origin}: links {sorted(links - seen)} are not reachable from root '{roots[0]}': "
                         f"kinematic loop")
    return roots[0], children


class _TreeBuilder:
    """The per-body fields of the model, filled in the depth-first order of the URDF tree: a body per
    movable joint, the inertia of every link merged into the body it is rigidly attached to (Cărmizaru
    Alg. 3), and each link's placement in its body's frame."""

    def __init__(self, links, origin, notes, strict, mesh_density):
        self.links, self.origin, self.notes, self.strict, self.mesh_density = links, origin, notes, strict, mesh_density
        self.defects = []
        self.joints, self.joint_names, self.body_names, self.parents, self.placements = [], [], [], [], []
        self.inertias, self.merged = [], []
        self.lower, self.upper, self.vel, self.eff, self.viscous, self.coulomb = [], [], [], [], [], []
        self.frames = {}

    def _add_body(self, joint, joint_name, body_name, parent, placement):
        self.joints.append(joint)
        self.joint_names.append(joint_name)
        self.body_names.append(body_name)
        self.parents.append(parent)
        self.placements.append(placement)
        self.inertias.append(np.zeros(10))
        self.merged.append([])
        return len(self.joints) - 1

    def add_free_flyer(self, root):
        """The floating base: a free-flyer joint moving the root link; returns its body index."""
        body = self._add_body(FreeFlyerJoint(), "root_joint", root, -1, (np.eye(3), np.zeros(3)))
        self.lower.extend([-np.inf] * 7), self.upper.extend([np.inf] * 7)
        self.vel.extend([np.inf] * 6), self.eff.extend([np.inf] * 6)
        self.viscous.extend([0.0] * 6), self.coulomb.extend([0.0] * 6)
        return body

    def add_link(self, link_name, body, R, p):
        """Place link ``link_name`` at ``(R, p)`` in ``body``'s frame and add its inertia to the body's
        (nothing to add to the world, ``body`` -1)."""
        self.frames[link_name] = (body, R, p)
        link = self.links[link_name]
        pi = link_inertial_parameters(link, self.origin, self.notes, self.strict, self.defects)
        if pi[0] == 0 and self.mesh_density is not None:
            pi = _mesh_inertia_or_zero(link, self.mesh_density, self.origin, self.notes)
        if body >= 0:
            tri = spatial.inertia_act(NUMPY, R, p, spatial.inertia_from_params(NUMPY, pi))
            self.inertias[body] = self.inertias[body] + spatial.params_from_inertia(NUMPY, *tri)
            self.merged[body].append(link_name)

    def add_joint(self, j, parent, R, p):
        """A body moved by the movable URDF joint ``j``, placed at ``(R, p)`` in body ``parent``'s frame,
        with the joint's limits and friction; returns its body index."""
        body = self._add_body(_movable_joint(j, self.origin), j.name, j.child, parent, (R, p))
        lo, hi, v_max, e_max = _joint_limits(j, self.origin)
        self.lower.append(lo), self.upper.append(hi), self.vel.append(v_max), self.eff.append(e_max)
        damping, friction = _joint_friction(j, self.origin)
        self.viscous.append(damping), self.coulomb.append(friction)
        if j.mimic is not None:
            self.notes.append(f"{self.origin}: joint '{j.name}' mimics '{j.mimic.joint}'; it is kept as an "
                              f"independent joint")
        return body

    def description(self, name, root, xml, floating_base):
        """The :class:`~robodyn_ros.model.model.Model` constructor's arguments (without ``gravity``)."""
        nv = len(self.viscous)
        return dict(name=name, joint_names=tuple(self.joint_names), body_names=tuple(self.body_names),
                    joints=tuple(self.joints), parents=tuple(self.parents), placements=tuple(self.placements),
                    inertias=np.array(self.inertias).reshape(-1, 10), armature=np.zeros(nv),
                    viscous=np.array(self.viscous), coulomb=np.array(self.coulomb), friction_offset=np.zeros(nv),
                    lower=np.array(self.lower), upper=np.array(self.upper), velocity_limit=np.array(self.vel),
                    effort_limit=np.array(self.eff), frames=self.frames,
                    merged_links=tuple(tuple(m) for m in self.merged), root_link=root, urdf_xml=xml,
                    floating_base=floating_base, notes=tuple(self.notes))


def _movable_joint(j, origin):
    """The revolute or prismatic joint of a movable URDF joint ``j`` about its unit axis; ModelError for an
    unsupported type or an invalid axis."""
    if j.type not in _MOVABLE:
        raise ModelError(f"{origin}: joint '{j.name}' has type '{j.type}', which is not supported "
                         f"(revolute, continuous, prismatic, fixed)")
    axis = np.array([1.0, 0.0, 0.0] if j.axis is None else j.axis, dtype=float)
    if axis.shape != (3,) or not np.all(np.abs(axis) <= PHYSICAL_MAGNITUDE) or np.linalg.norm(axis) < 1e-12:
        raise ModelError(f"{origin}: joint '{j.name}' has an invalid axis {j.axis}")
    axis = axis / np.linalg.norm(axis)
    return PrismaticJoint(axis) if j.type == "prismatic" else RevoluteJoint(axis)


def _locked_child_placement(j, value, R, p):
    """Placement of a locked joint's child link: the joint's origin ``(R, p)`` then the joint's own motion
    at coordinate ``value`` (a locked joint is a fixed joint at that coordinate)."""
    axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), dtype=float)
    joint = PrismaticJoint(axis / np.linalg.norm(axis)) if j.type == "prismatic" \
        else RevoluteJoint(axis / np.linalg.norm(axis))
    return spatial.compose(NUMPY, R, p, *joint.placement(NUMPY, np.array([value])))


def _build_tree(tree, root, children, locked, floating_base):
    """Depth-first traversal from ``root``: each link joins the body of its nearest movable ancestor
    (fixed and locked joints merge), each movable joint starts a body."""
    base_body = tree.add_free_flyer(root) if floating_base else -1
    stack = [(root, base_body, np.eye(3), np.zeros(3))]   # link, its body, its placement in the body
    while stack:
        link_name, body, R, p = stack.pop()
        tree.add_link(link_name, body, R, p)
        pending = []
        for j in children[link_name]:
            Rj, pj = spatial.compose(NUMPY, R, p, *_origin(j))
            if j.name in locked:
                pending.append((j.child, body, *_locked_child_placement(j, locked[j.name], Rj, pj)))
            elif j.type == "fixed":
                pending.append((j.child, body, Rj, pj))
            else:
                pending.append((j.child, tree.add_joint(j, body, Rj, pj), np.eye(3), np.zeros(3)))
        stack.extend(reversed(pending))


def _note_massless_subtrees(description, origin, notes, strict):
    """Indices of the bodies that move no inertia (a singular mass matrix), each noted; ModelError for the
    first with ``strict``."""
    body_names, joint_names = description["body_names"], description["joint_names"]
    massless = _massless_bodies(description["inertias"], description["parents"])
    if massless and strict:
        i = massless[0]
        raise ModelError(f"{origin}: link '{body_names[i]}' moved by joint '{joint_names[i]}' carries "
                         f"no inertia in its subtree: the mass matrix is singular")
    for i in massless:
        notes.append(f"{origin}: link '{body_names[i]}' moved by joint '{joint_names[i]}' carries no "
                     f"inertia in its subtree: the mass matrix is singular and aba refuses the model unless "
                     f"the joint has armature")
    return massless


def urdf_model_description(source, *, floating_base=False, mesh_density=None, locked_joints=None, strict=False):
    """The fields of the model a URDF describes (see :meth:`Model.from_urdf`, which builds it): a dict of the
    :class:`~robodyn_ros.model.model.Model` constructor's arguments except ``gravity``, with ``frames`` as
    ``{link: (body, R (3, 3), p (3,))}``. ModelError naming the link or joint at fault; non-physical
    inertias and massless moving subtrees noted (and warned once), refused with ``strict``."""
    xml, origin = read_urdf_source(source)
    robot, notes = parse_urdf(xml, origin, keep_collisions=mesh_density is not None)
    root, children = _check_tree(robot, origin)
    locked = _locked_values(locked_joints, {j.name for j in robot.joints if j.type in _MOVABLE}, origin)
    tree = _TreeBuilder({l.name: l for l in robot.links}, origin, notes, strict, mesh_density)
    _build_tree(tree, root, children, locked, floating_base)
    description = tree.description(robot.name or "robot", root, xml, floating_base)
    if not tree.joints:
        notes.append(f"{origin}: the robot has no movable joint: nq = nv = 0 (floating_base=True adds a free "
                     f"flyer)")
    massless = _note_massless_subtrees(description, origin, notes, strict)
    what = [f"non-physical inertia of link(s) {', '.join(repr(d) for d in tree.defects)}"] if tree.defects else []
    if massless:
        what.append(f"no inertia moved by joint(s) {', '.join(repr(tree.joint_names[i]) for i in massless)}")
    if what:
        warnings.warn(f"{origin}: loaded with {'; '.join(what)} (see model.notes; strict=True refuses it)",
                      NonPhysicalInertiaWarning, stacklevel=3)
    description["notes"] = tuple(notes)
    return description


def massless_subtrees(model):
    """Bodies of ``model`` whose subtree (the body and its descendants) has zero inertial parameters: their
    joint's articulated inertia ``D = S^T I^A S`` is zero, so ``M`` is singular without armature."""
    return _massless_bodies(model.inertias, model.parents)


def _massless_bodies(inertias, parents):
    """Indices of the bodies whose subtree has zero inertial parameters ``inertias`` (nbodies, 10)."""
    empty = [not np.any(inertias[i]) for i in range(len(parents))]
    for i in reversed(range(len(parents))):
        lam = parents[i]
        if lam >= 0 and not empty[i]:
            empty[lam] = False
    return [i for i in range(len(parents)) if empty[i]]


def _locked_values(locked_joints, movable, origin):
    """``{joint name: coordinate}`` of ``locked_joints`` (a mapping); ModelError for an unknown joint or
    a value that is not one finite number."""
    if locked_joints is None:
        return {}
    if not hasattr(locked_joints, "items"):
        raise ModelError(f"{origin}: locked_joints must map joint names to coordinates, got "
                         f"{type(locked_joints).__name__}")
    locked = dict(locked_joints)
    unknown = set(locked) - movable
    if unknown:
        raise ModelError(f"{origin}: cannot lock {sorted(unknown, key=str)}: no movable joint of that name")
    out = {}
    for name, value in locked.items():
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ModelError(f"{origin}: locked joint '{name}' has value {value!r}: expected one finite "
                             f"number") from None
        if not abs(x) <= PHYSICAL_MAGNITUDE:
            raise ModelError(f"{origin}: locked joint '{name}' has value {value!r}: expected one finite "
                             f"number (|value| <= {PHYSICAL_MAGNITUDE:g})")
        out[name] = x
    return out


def _mesh_inertia_or_zero(link, density, origin, notes):
    """Inertial of a link without one, from its first collision mesh and ``density`` (Kwon eqs. 15-28)."""
    collisions = getattr(link, "collisions", None) or []
    for col in collisions:
        geom = getattr(col, "geometry", None)
        filename = getattr(geom, "filename", None)
        if not filename:
            continue
        from .mesh_inertia import density_fill_inertial
        if filename.startswith("package://"):
            raise ModelError(f"{origin}: link '{link.name}' has no inertial and its mesh {filename} is a package:// "
                             f"URI, which cannot be resolved outside a ROS workspace: give a file path")
        path = filename[7:] if filename.startswith("file://") else filename
        if not os.path.isabs(path) and os.path.isfile(origin):
            path = os.path.join(os.path.dirname(origin), path)
        scale = getattr(geom, "scale", None) or (1.0, 1.0, 1.0)
        pi = density_fill_inertial(path, density, scale=scale, origin=_origin(col))
        notes.append(f"{origin}: link '{link.name}' has no inertial: filled from mesh {filename} with density {density}")
        return pi
    return np.zeros(10)
