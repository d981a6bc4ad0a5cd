"""Vertices of the mesh files a URDF's ``<mesh filename=...>`` names (STL, COLLADA ``.dae``, Wavefront
``.obj``), and the resolution of those file names (``package://``, ``file://``, relative paths).

Only vertex positions are read: what a bounding shape needs. A COLLADA file's vertices are placed by the
transforms (``matrix``, ``translate``, ``rotate``, ``scale``) of the scene nodes that instance them and
scaled by its ``<unit meter=...>``; ``<up_axis>`` is not applied (robot descriptions use Z_UP, the default
of the exporters that write them).
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

from .errors import ModelError
from .mesh_inertia import read_stl


def resolve_mesh_path(filename, urdf_path=None, package_dirs=()):
    """Absolute path of a URDF mesh reference, or None when it cannot be found.

    ``package://NAME/REST`` is looked up as ``DIR/NAME/REST`` for DIR in ``package_dirs``, in the folders of
    ``ROS_PACKAGE_PATH`` and ``AMENT_PREFIX_PATH/share``, and as ``ANCESTOR/REST`` for every ancestor folder
    of ``urdf_path`` named NAME (a description read from its own package). ``file://PATH`` and plain
    paths are taken as they are, relative ones from the URDF's folder."""
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://"):].partition("/")
        roots = list(package_dirs)
        roots += [d for d in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if d]
        roots += [os.path.join(d, "share") for d in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if d]
        candidates = [os.path.join(root, package, rest) for root in roots]
        if urdf_path:
            folder = os.path.dirname(os.path.abspath(urdf_path))
            while True:
                if os.path.basename(folder) == package:
                    candidates.append(os.path.join(folder, rest))
                parent = os.path.dirname(folder)
                if parent == folder:
                    break
                folder = parent
    else:
        path = filename[len("file://"):] if filename.startswith("file://") else filename
        if not os.path.isabs(path) and urdf_path:
            path = os.path.join(os.path.dirname(os.path.abspath(urdf_path)), path)
        candidates = [path]
    return next((os.path.abspath(c) for c in candidates if os.path.isfile(c)), None)


def read_mesh_vertices(path):
    """Vertex positions (nv, 3) of an STL, COLLADA (.dae) or OBJ file, in the file's units placed by its
    own scene transforms (COLLADA, module docstring). ModelError naming ``path`` for an unknown suffix,
    an unreadable or malformed file, or one without vertices."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".stl":
        vertices = read_stl(path)[0]
    elif suffix == ".dae":
        vertices = _collada_vertices(path)
    elif suffix == ".obj":
        vertices = _obj_vertices(path)
    else:
        raise ModelError(f"mesh '{path}': unsupported format '{suffix}' (STL, DAE and OBJ are read)")
    if vertices.size == 0:
        raise ModelError(f"mesh '{path}' has no vertices")
    if not np.all(np.isfinite(vertices)):
        raise ModelError(f"mesh '{path}' has non-finite vertex coordinates")
    return vertices


def _obj_vertices(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            rows = [line.split()[1:4] for line in stream if line.startswith("v ")]
        return np.array(rows, dtype=float).reshape(-1, 3)
    except (OSError, ValueError) as exc:
        raise ModelError(f"OBJ file '{path}' cannot be read: {exc}") from exc


def _local(tag):
    return tag.rsplit("}", 1)[-1]


def _children(element, name):
    return [c for c in element if _local(c.tag) == name]


def _numbers(element):
    return np.array((element.text or "").split(), dtype=float)


def _node_transform(node):
    """4x4 transform of a COLLADA ``<node>`` (its transform elements applied in document order)."""
    T = np.eye(4)
    for child in node:
        kind, values = _local(child.tag), None
        if kind not in ("matrix", "translate", "rotate", "scale"):
            continue
        values = _numbers(child)
        step = np.eye(4)
        if kind == "matrix":
            step = values.reshape(4, 4)
        elif kind == "translate":
            step[:3, 3] = values[:3]
        elif kind == "scale":
            step[:3, :3] = np.diag(values[:3])
        else:
            axis, angle = values[:3] / np.linalg.norm(values[:3]), np.radians(values[3])
            K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
            step[:3, :3] = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K
        T = T @ step
    return T


def _geometry_positions(geometry, ids):
    """(n, 3) POSITION array of a COLLADA ``<geometry>``'s mesh (its ``<vertices>`` input)."""
    points = []
    for mesh in _children(geometry, "mesh"):
        for vertices in _children(mesh, "vertices"):
            for item in _children(vertices, "input"):
                if item.get("semantic") != "POSITION":
                    continue
                source = ids.get(item.get("source", "").lstrip("#"))
                arrays = [] if source is None else _children(source, "float_array")
                if not arrays:
                    continue
                stride = 3
                for accessor in source.iter():
                    if _local(accessor.tag) == "accessor":
                        stride = int(accessor.get("stride", 3))
                values = _numbers(arrays[0])
                points.append(values[:len(values) // stride * stride].reshape(-1, stride)[:, :3])
    return np.vstack(points) if points else np.zeros((0, 3))


def _collada_vertices(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ModelError(f"COLLADA file '{path}' cannot be read: {exc}") from exc
    try:
        ids = {e.get("id"): e for e in root.iter() if e.get("id")}
        unit = 1.0
        for element in root.iter():
            if _local(element.tag) == "unit" and element.get("meter"):
                unit = float(element.get("meter"))
                break
        placed = []

        def visit(node, T):
            T = T @ _node_transform(node)
            for child in node:
                kind = _local(child.tag)
                if kind == "instance_geometry" and child.get("url", "").lstrip("#") in ids:
                    p = _geometry_positions(ids[child.get("url").lstrip("#")], ids)
                    placed.append(p @ T[:3, :3].T + T[:3, 3])
                elif kind == "node":
                    visit(child, T)

        scenes = [e for e in root.iter() if _local(e.tag) == "visual_scene"]
        for scene in scenes:
            for node in _children(scene, "node"):
                visit(node, np.eye(4))
        if not scenes:  # no scene: every geometry as it is
            placed = [_geometry_positions(g, ids) for g in root.iter() if _local(g.tag) == "geometry"]
    except (ValueError, ZeroDivisionError) as exc:
        raise ModelError(f"COLLADA file '{path}' is malformed: {exc}") from exc
    return unit * (np.vstack(placed) if placed else np.zeros((0, 3)))
