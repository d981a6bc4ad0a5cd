"""A robot's volume as capsules attached to its bodies, from the URDF's ``<collision>`` elements.

A capsule is the set of points within ``radius`` of the segment ``[a, b]`` (a sphere when ``a == b``);
distances to planes and between capsules are closed-form, which is what clearance constraints on a
trajectory need. Every capsule BOUNDS the geometry it stands for:

* ``<sphere>``: itself; ``<cylinder radius=R length=L>``: the capsule of radius R on its axis segment;
* ``<box>`` and ``<mesh>`` (STL, DAE, OBJ, :mod:`robodyn_ros.model.mesh_files`): the smallest-volume of
  three bounding capsules of the vertices, one per principal axis of their spread, each with the smallest
  radius about that axis (the minimum enclosing circle of the vertices projected across it) and the
  shortest segment that then contains every vertex;
* a link with no ``<collision>`` (or whose mesh cannot be found or read): capsules of ``default_radius``
  from the link's origin to the origin of each child link, or a sphere at the origin of a leaf link
  (tool and flange frames count: the whole arm is covered).

Capsules are expressed in the frame of the body the link is merged into (links on fixed joints join
their movable ancestor, as in the model; body -1 is the base). A capsule end within AXIS_SNAP of the axis
of the revolute joint that moves its body is moved onto that axis, its radius grown by the shift (it still
bounds the geometry). A capsule inside another capsule of the same body is dropped.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ModelError
from .mesh_files import read_mesh_vertices, resolve_mesh_path

DEFAULT_LINK_RADIUS = 0.06
"""m: radius of the capsules of links without collision geometry (the forearm of a 5-10 kg arm)."""


@dataclass(frozen=True)
class Capsule:
    """Points within ``radius`` (m) of the segment ``[a, b]``, a and b (3,) in the frame of ``body`` (-1:
    the base); ``link`` is the URDF link it belongs to and ``source`` what it was fitted to."""

    link: str
    body: int
    a: np.ndarray
    b: np.ndarray
    radius: float
    source: str


def segment_distance(p, a, b):
    """Distance of the points p (..., 3) to the segment [a, b]."""
    ab = b - a
    length2 = float(ab @ ab)
    s = np.zeros(p.shape[:-1]) if length2 == 0 else np.clip((p - a) @ ab / length2, 0.0, 1.0)
    return np.linalg.norm(p - a - s[..., None] * ab, axis=-1)


def _enclosing_circle(points, rng):
    """Centre (2,) and radius of the smallest circle containing the 2-D points (incremental algorithm of
    Welzl 1991, expected linear time on a random order)."""
    pts = points[rng.permutation(len(points))]

    def circle(*ps):
        if len(ps) == 1:
            return ps[0], 0.0
        if len(ps) == 2:
            c = (ps[0] + ps[1]) / 2
            return c, float(np.linalg.norm(ps[0] - c))
        (ax, ay), (bx, by), (cx, cy) = ps
        d = 2 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by))
        if abs(d) < 1e-18:  # collinear: the circle on the farthest pair
            pairs = [(ps[0], ps[1]), (ps[0], ps[2]), (ps[1], ps[2])]
            return circle(*max(pairs, key=lambda q: np.linalg.norm(q[0] - q[1])))
        ux = ((ax * ax + ay * ay) * (by - cy) + (bx * bx + by * by) * (cy - ay) + (cx * cx + cy * cy) * (ay - by)) / d
        uy = ((ax * ax + ay * ay) * (cx - bx) + (bx * bx + by * by) * (ax - cx) + (cx * cx + cy * cy) * (bx - ax)) / d
        c = np.array([ux, uy])
        return c, float(np.linalg.norm(ps[0] - c))

    outside = lambda p, c, r: np.linalg.norm(p - c) > r * (1 + 1e-12) + 1e-15  # noqa: E731
    c, r = circle(pts[0])
    for i in range(1, len(pts)):
        if outside(pts[i], c, r):
            c, r = circle(pts[i])
            for j in range(i):
                if outside(pts[j], c, r):
                    c, r = circle(pts[i], pts[j])
                    for k in range(j):
                        if outside(pts[k], c, r):
                            c, r = circle(pts[i], pts[j], pts[k])
    return c, float(np.max(np.linalg.norm(points - c, axis=1)))


def _hull_vertices(points):
    """The points on the convex hull (a capsule is convex: bounding them bounds all)."""
    if len(points) < 5:
        return points
    from scipy.spatial import ConvexHull, QhullError
    try:
        return points[ConvexHull(points, qhull_options="QJ").vertices]
    except (QhullError, ValueError):
        return points


def bounding_capsule(points):
    """``(a (3,), b (3,), radius)`` of a capsule containing every point (P, 3) (module docstring)."""
    points = np.unique(np.asarray(points, dtype=float).reshape(-1, 3), axis=0)
    if len(points) == 1:
        return points[0].copy(), points[0].copy(), 0.0
    points = _hull_vertices(points)
    rng = np.random.default_rng(0)
    centre = points.mean(axis=0)
    axes = np.linalg.svd(points - centre, full_matrices=True)[2]
    best = None
    for k in range(3):
        u, e1, e2 = axes[k], axes[(k + 1) % 3], axes[(k + 2) % 3]
        s = (points - centre) @ u
        xy = np.stack([(points - centre) @ e1, (points - centre) @ e2], axis=1)
        c2, r = _enclosing_circle(xy, rng)
        d = np.linalg.norm(xy - c2, axis=1)
        reach = np.sqrt(np.maximum(r * r - d * d, 0.0))
        s0, s1 = float(np.min(s + reach)), float(np.max(s - reach))
        origin = centre + c2[0] * e1 + c2[1] * e2
        if s0 > s1:  # shorter than wide: a sphere about the middle
            a = b = origin + 0.5 * (s0 + s1) * u
            r = float(np.max(np.linalg.norm(points - a, axis=1)))
        else:
            a, b = origin + s0 * u, origin + s1 * u
        volume = np.pi * r * r * (np.linalg.norm(b - a) + 4.0 * r / 3.0)
        if best is None or volume < best[0]:
            best = (volume, a, b, r)
    _, a, b, r = best
    # round-off: grow the radius to cover every vertex exactly
    r = max(r, float(np.max(segment_distance(points, a, b))))
    return a, b, r


def _geometry_capsule(geometry, urdf_path, package_dirs):
    """``(a, b, radius)`` bounding one URDF geometry in its own frame; ModelError when it cannot be had."""
    kind = type(geometry).__name__.lower()
    if kind == "sphere":
        return np.zeros(3), np.zeros(3), float(geometry.radius)
    if kind == "cylinder":
        half = 0.5 * float(geometry.length)
        return np.array([0, 0, -half]), np.array([0, 0, half]), float(geometry.radius)
    if kind == "box":
        size = np.asarray(geometry.size, dtype=float)
        return bounding_capsule(0.5 * size * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]))
    if kind == "mesh":
        path = resolve_mesh_path(geometry.filename, urdf_path, package_dirs)
        if path is None:
            raise ModelError(f"mesh {geometry.filename} not found")
        scale = np.asarray(geometry.scale if geometry.scale is not None else (1.0, 1.0, 1.0), dtype=float)
        return bounding_capsule(read_mesh_vertices(path) * scale)
    raise ModelError(f"geometry {kind} not supported")


def _geometry_lowest_point(geometry, R, p, urdf_path, package_dirs):
    """Lowest height (z) of one URDF geometry placed by rotation R (3, 3) and position p (3,); ModelError
    when it cannot be had. Exact: vertices for boxes and meshes, the support function for spheres and
    cylinders (axis z of their frame)."""
    kind = type(geometry).__name__.lower()
    if kind == "sphere":
        return float(p[2] - geometry.radius)
    if kind == "cylinder":
        k = abs(float(R[2, 2]))
        return float(p[2] - 0.5 * float(geometry.length) * k - float(geometry.radius) * np.sqrt(max(0.0, 1.0 - k * k)))
    if kind == "box":
        corners = 0.5 * np.asarray(geometry.size, dtype=float) * np.array(
            [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        return float(np.min(corners @ R[2]) + p[2])
    if kind == "mesh":
        path = resolve_mesh_path(geometry.filename, urdf_path, package_dirs)
        if path is None:
            raise ModelError(f"mesh {geometry.filename} not found")
        scale = np.asarray(geometry.scale if geometry.scale is not None else (1.0, 1.0, 1.0), dtype=float)
        return float(np.min((read_mesh_vertices(path) * scale) @ R[2]) + p[2])
    raise ModelError(f"geometry {kind} not supported")


def base_lowest_point(model, urdf_path=None, package_dirs=()):
    """``(height, link)``: the lowest point (z, m, base frame) of the collision geometry that no joint moves
    (the links merged into the base: a torso, a pedestal, a mounting plate), or None when those links have
    no geometry that can be read. Exact (vertices and support functions, not the bounding capsules)."""
    from . import spatial
    from .backend import NUMPY
    from .urdf_loader import _origin, parse_urdf
    robot, _ = parse_urdf(model.urdf_xml, urdf_path or "<URDF string>", keep_collisions=True)
    lowest = None
    for link in robot.links:
        frame = model.frames.get(link.name)
        if frame is None or frame.body >= 0:
            continue
        for element in getattr(link, "collisions", None) or []:
            R, p = spatial.compose(NUMPY, frame.R, frame.p, *_origin(element))
            try:
                z = _geometry_lowest_point(element.geometry, R, p, urdf_path, package_dirs)
            except ModelError:
                continue
            if lowest is None or z < lowest[0]:
                lowest = (z, link.name)
    return lowest


PEDESTAL_DEPTH = 0.01
"""m: a fixed base whose geometry reaches further below its origin stands on that lowest point (a pedestal),
not on the plane of its origin."""


def floor_height(model, urdf_path=None, package_dirs=()):
    """``(height, what)``: the floor the robot stands on, z in the base frame (m), and where it comes from:
    the lowest point of the fixed base's collision geometry when it reaches more than PEDESTAL_DEPTH below the
    base origin (a pedestal, :func:`base_lowest_point`), else the base's own plane, 0."""
    lowest = base_lowest_point(model, urdf_path, package_dirs)
    if lowest is not None and lowest[0] < -PEDESTAL_DEPTH:
        return lowest[0], f"the lowest point of {lowest[1]}"
    return 0.0, "the plane the base stands on"


def collision_element_capsules(link, urdf_path=None, package_dirs=()):
    """``(capsules, problems)``: one ``(a, b, radius)`` in the link's frame per ``<collision>`` element of
    the urdf_parser_py ``link`` (module docstring), and what could not be used (then no capsules)."""
    from . import spatial
    from .backend import NUMPY
    from .urdf_loader import _origin
    capsules, problems = [], []
    for element in getattr(link, "collisions", None) or []:
        try:
            a, b, r = _geometry_capsule(element.geometry, urdf_path, package_dirs)
        except ModelError as exc:
            problems.append(str(exc))
            continue
        R, p = spatial.compose(NUMPY, np.eye(3), np.zeros(3), *_origin(element))
        capsules.append((R @ a + p, R @ b + p, r))
    return ([] if problems else capsules), problems


def _contains(outer, inner):
    """Whether capsule ``inner`` lies inside ``outer`` (both of the same body)."""
    ends = np.stack([inner.a, inner.b])
    return bool(np.all(segment_distance(ends, outer.a, outer.b) + inner.radius <= outer.radius + 1e-12))


def link_capsules(model, urdf_path=None, package_dirs=(), default_radius=DEFAULT_LINK_RADIUS, link_geometry=None):
    """``(capsules, notes)``: a tuple of :class:`Capsule` covering every link of ``model`` (module
    docstring) and a list of what was approximated (links on link frames, meshes not found or read).

    The collision elements are read from ``model.urdf_xml``; ``urdf_path`` (the file it came from) and
    ``package_dirs`` resolve mesh file names (:func:`robodyn_ros.model.mesh_files.resolve_mesh_path`).
    ``link_geometry``: ``{link: [(a, b, radius), ...]}`` capsules in link frames that replace a link's
    collision elements (the bundled robots' fitted capsules). A link without geometry whose origin and
    child origins already lie inside its body's geometry gets no capsule of its own (a flange inside
    the hand)."""
    from .urdf_loader import parse_urdf
    if not default_radius > 0:
        raise ModelError(f"default_radius={default_radius}: the radius of link capsules must be positive")
    robot, _ = parse_urdf(model.urdf_xml, urdf_path or "<URDF string>", keep_collisions=True)
    link_geometry = dict(link_geometry or {})
    unknown = sorted(set(link_geometry) - set(model.frames))
    if unknown:
        raise ModelError(f"capsules given for unknown link(s) {', '.join(unknown)}")
    children = {link.name: [] for link in robot.links}
    for joint in robot.joints:
        children[joint.parent].append(joint)
    fitted, frame_only, notes = [], [], []
    for link in robot.links:
        if link.name not in model.frames:
            continue
        frame = model.frames[link.name]
        joint = model.joints[frame.body] if frame.body >= 0 else None
        capsules, problems = _link_geometry(frame, joint, link, link_geometry.get(link.name), urdf_path, package_dirs)
        if problems:
            notes.append(f"link '{link.name}': {'; '.join(problems)}: modelled on its link frames")
        if capsules:
            fitted += capsules
        else:
            frame_only.append(link)
    kept_frames = []
    for link in frame_only:
        capsules = _frame_capsules(model.frames[link.name], link, children[link.name], default_radius)
        if not all(_covered(c, fitted) for c in capsules):
            fitted += capsules
            kept_frames.append(link.name)
    if kept_frames:
        notes.append(f"{len(kept_frames)} link(s) without collision geometry modelled as capsules of radius "
                     f"{default_radius:g} m on their frames: {', '.join(kept_frames)}")
    kept = [c for i, c in enumerate(fitted)
            if not any(j != i and o.body == c.body and _contains(o, c) and (not _contains(c, o) or j < i)
                       for j, o in enumerate(fitted))]
    return tuple(kept), notes


def _link_geometry(frame, joint, link, given, urdf_path, package_dirs):
    """Capsules of one link in its body's frame (from ``given`` or its collision elements) and the
    problems met; no capsules when any element could not be used (the link falls back on its frames)."""
    if given is not None:
        shapes, problems, source = [tuple(np.asarray(x, dtype=float) for x in c) for c in given], [], "given"
    else:
        (shapes, problems), source = collision_element_capsules(link, urdf_path, package_dirs), "collision"
    capsules = []
    for a, b, r in shapes:
        a, b, r = _centred_on_axis(joint, frame.R @ a + frame.p, frame.R @ b + frame.p, float(r))
        capsules.append(Capsule(link.name, frame.body, a, b, r, source))
    return capsules, problems


AXIS_SNAP = 0.02
"""m: a capsule end this close to the axis of the revolute joint that moves its body is moved onto
the axis (radius grown by the shift): joint housings are round about their axis, and a capsule end on
the axis keeps its height when the joint turns (what makes a shoulder housing exempt from the floor)."""


def _centred_on_axis(joint, a, b, radius):
    """``(a, b, radius)`` with the ends within AXIS_SNAP of ``joint``'s axis (through the body origin)
    moved onto it; the radius grows by the largest shift, so the capsule still contains the old one."""
    if joint is None or joint.kind != "revolute":
        return a, b, radius
    k = joint.axis / np.linalg.norm(joint.axis)
    ends, shift = [], 0.0
    for e in (a, b):
        on_axis = (e @ k) * k
        if np.linalg.norm(e - on_axis) <= AXIS_SNAP:
            shift = max(shift, float(np.linalg.norm(e - on_axis)))
            e = on_axis
        ends.append(e)
    return ends[0], ends[1], radius + shift


def _frame_capsules(frame, link, child_joints, radius):
    """Capsules of ``radius`` from the link's origin to each child's origin (a sphere for a leaf link)."""
    from .urdf_loader import _origin
    ends = [_origin(j)[1] for j in child_joints] or [np.zeros(3)]
    return [Capsule(link.name, frame.body, frame.p.copy(), frame.R @ np.asarray(end, dtype=float) + frame.p,
                    float(radius), "link frames") for end in ends]


def _covered(capsule, others):
    """Whether both end points of ``capsule`` lie inside one capsule of ``others`` on the same body."""
    ends = np.stack([capsule.a, capsule.b])
    return any(o.body == capsule.body and np.all(segment_distance(ends, o.a, o.b) <= o.radius) for o in others)
