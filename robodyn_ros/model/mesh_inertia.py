"""Mesh-based inertia: inertial parameters of a closed triangle mesh of uniform density, their analytic
derivatives with respect to the vertices, and the derivative of a rigidly transformed inertia
(Kwon, "Differential Dynamics and Mesh-Based Inertia", sec. 4 eqs. 15-28 and sec. 5 eqs. 29-34).

Conventions (those of :mod:`robodyn_ros.model.spatial`):

* ``pi = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` with ``I`` about the frame ORIGIN
  (not the centre of mass), in the frame's axes; ``h = m c`` is the first moment.
* A mesh is ``vertices (nv, 3)`` float and ``faces (nf, 3)`` int, each face ordered counter-clockwise
  seen from outside, so that Kwon's ``n_F = (v2 - v1) x (v3 - v1)`` points outwards (eq. 15).
* Twists are ``[v; w]`` (linear first) and a placement ``(R, p)`` of frame B in frame A maps
  ``x_A = R x_B + p``.

The solid is cut into one signed tetrahedron per face, with apex at a reference point ``o``; each
tetrahedron's pseudo-inertia (4x4 homogeneous second moment) has the closed form
``J = mu det(F) / 120 * (sum_k v~_k v~_k^T + s~ s~^T)`` over its four homogeneous vertices
``v~ = [v; 1]`` (apex included, ``s~ = sum_k v~_k``), which gathers Kwon's eqs. 17 (mass), 20 (first
moment) and 22/25 (second moments) in one expression. Summing the faces of a closed, consistently
oriented mesh makes ``J`` independent of ``o`` (the edges cancel); ``o`` is taken at the vertex centroid
only for round-off, and the result is moved back to the frame origin.

NumPy only; no ROS.
"""
from __future__ import annotations

import os
import re
import struct

import numpy as np

from . import spatial
from .backend import NUMPY
from .errors import ModelError

# ------------------------------------------------------------------------------------------------ STL files
_BINARY_HEADER = 80
_BINARY_RECORD = 50  # 12 float32 (normal, 3 vertices) + uint16 attribute byte count
_FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
_VERTEX_LINE = re.compile(rf"vertex\s+({_FLOAT})\s+({_FLOAT})\s+({_FLOAT})", re.IGNORECASE)
_FACET = re.compile(r"\bfacet\b", re.IGNORECASE)


def read_stl(path):
    """Triangle mesh of a binary or ASCII STL file, with duplicate vertices merged.

    Returns ``vertices (nv, 3)`` float64 and ``faces (nf, 3)`` int (indices into ``vertices``, in the
    file's vertex order, so the file's orientation is kept). Two corners are the same vertex when their
    coordinates agree after rounding to ``1e-12`` of the largest coordinate magnitude (STL repeats every
    corner in every facet; CAD exporters write bit-identical copies). Faces that collapse onto a repeated
    vertex are dropped (zero area).

    Raises :class:`ModelError` naming ``path`` for a missing, unreadable, truncated, malformed or empty
    file or non-finite coordinates.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ModelError(f"STL file '{path}' cannot be read: {exc.strerror or exc}") from exc
    if _looks_binary(data):
        corners = _binary_corners(path, data)
    elif data.lstrip()[:5].lower() == b"solid":
        corners = _ascii_corners(path, data)
    else:
        raise ModelError(f"STL file '{path}' is neither binary STL (size != 84 + 50 * triangle count) "
                         f"nor ASCII STL (does not start with 'solid'); {len(data)} bytes")
    if corners.shape[0] == 0:
        raise ModelError(f"STL file '{path}' contains no triangles")
    if not np.all(np.isfinite(corners)):
        raise ModelError(f"STL file '{path}' has non-finite vertex coordinates")
    return merge_duplicate_vertices(corners.reshape(-1, 3, 3))


def _looks_binary(data):
    if len(data) < _BINARY_HEADER + 4:
        return False
    (count,) = struct.unpack_from("<I", data, _BINARY_HEADER)
    return len(data) == _BINARY_HEADER + 4 + _BINARY_RECORD * count


def _binary_corners(path, data):
    """``(3 nf, 3)`` corner coordinates of a binary STL (normals ignored: orientation comes from the order)."""
    (count,) = struct.unpack_from("<I", data, _BINARY_HEADER)
    record = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attr", "<u2")])
    tris = np.frombuffer(data, dtype=record, count=count, offset=_BINARY_HEADER + 4)
    return tris["corners"].astype(np.float64).reshape(-1, 3)


def _ascii_corners(path, data):
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise ModelError(f"STL file '{path}' starts with 'solid' but is not ASCII text, and its size "
                         f"does not match a binary STL") from exc
    values = _VERTEX_LINE.findall(text)
    nfacets = len(_FACET.findall(text))
    if len(values) != 3 * nfacets:
        raise ModelError(f"ASCII STL file '{path}' is malformed: {nfacets} facets but {len(values)} "
                         f"parsable 'vertex x y z' lines (expected 3 per facet)")
    return np.array(values, dtype=np.float64).reshape(-1, 3)


def merge_duplicate_vertices(triangles):
    """``(vertices (nv, 3), faces (nf, 3))`` from per-face corners ``triangles (nf, 3, 3)``, merging corners
    equal after rounding to ``1e-12`` of the largest coordinate magnitude; degenerate faces are dropped."""
    corners = np.asarray(triangles, dtype=float).reshape(-1, 3)
    quantum = 1e-12 * max(float(np.abs(corners).max(initial=0.0)), np.finfo(float).tiny)
    keys = np.round(corners / quantum)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    faces = inverse.reshape(-1, 3)
    keep = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 2] != faces[:, 0])
    return corners[first], faces[keep].astype(np.int64)


def _face_normals(vertices, faces):
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    n = np.cross(b - a, c - a)
    norm = np.linalg.norm(n, axis=1, keepdims=True)
    return np.divide(n, norm, out=np.zeros_like(n), where=norm > 0)


def write_stl_ascii(path, vertices, faces, name="mesh"):
    """Write an ASCII STL (17 significant digits, so that reading it back is exact)."""
    vertices, faces = np.asarray(vertices, dtype=float), np.asarray(faces, dtype=int)
    lines = [f"solid {name}"]
    for f, n in zip(faces, _face_normals(vertices, faces)):
        lines.append("  facet normal {:.17g} {:.17g} {:.17g}".format(*n))
        lines.append("    outer loop")
        lines.extend("      vertex {:.17g} {:.17g} {:.17g}".format(*vertices[k]) for k in f)
        lines.append("    endloop")
        lines.append("  endfacet")
    lines.append(f"endsolid {name}\n")
    with open(path, "w", encoding="ascii") as fh:
        fh.write("\n".join(lines))


def write_stl_binary(path, vertices, faces, header=b"robodyn_ros mesh"):
    """Write a binary STL (coordinates rounded to float32, as the format stores them)."""
    vertices, faces = np.asarray(vertices, dtype=float), np.asarray(faces, dtype=int)
    record = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attr", "<u2")])
    tris = np.zeros(len(faces), dtype=record)
    tris["normal"] = _face_normals(vertices, faces)
    tris["corners"] = vertices[faces]
    with open(path, "wb") as fh:
        fh.write(header[:_BINARY_HEADER].ljust(_BINARY_HEADER, b"\0"))
        fh.write(struct.pack("<I", len(faces)))
        fh.write(tris.tobytes())


# ------------------------------------------------------------------------------ parameter representations
def pseudo_inertia_from_parameters(pi):
    """4x4 pseudo-inertia ``J = [[Sigma, h], [h^T, m]]`` of ``pi (10,)``, with the second moment
    ``Sigma = int x x^T dm = tr(I)/2 * 1 - I`` about the origin."""
    m, h, I = spatial.inertia_from_params(NUMPY, np.asarray(pi, dtype=float))
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(I) * np.eye(3) - I
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


def parameters_from_pseudo_inertia(J):
    """``pi (10, ...)`` of a pseudo-inertia ``J (4, 4, ...)`` (trailing axes carried along, so the same
    linear map turns derivatives ``dJ/dx (4, 4, n)`` into ``dpi/dx (10, n)``): ``I = tr(Sigma) 1 - Sigma``."""
    J = np.asarray(J, dtype=float)
    S = J[:3, :3]
    tr = S[0, 0] + S[1, 1] + S[2, 2]
    return np.stack([J[3, 3], J[0, 3], J[1, 3], J[2, 3],
                     tr - S[0, 0], -S[0, 1], tr - S[1, 1], -S[0, 2], -S[1, 2], tr - S[2, 2]])


# ------------------------------------------------------------------------------------ mesh mass properties
def _validated_mesh(vertices, faces):
    vertices = np.asarray(vertices, dtype=float)
    faces = np.asarray(faces)
    if vertices.ndim != 2 or vertices.shape[1] != 3:
        raise ModelError(f"mesh vertices must have shape (nv, 3), got {vertices.shape}")
    if faces.ndim != 2 or faces.shape[1] != 3 or faces.shape[0] == 0:
        raise ModelError(f"mesh faces must have shape (nf, 3) with nf > 0, got {faces.shape}")
    if not np.issubdtype(faces.dtype, np.integer):
        raise ModelError(f"mesh faces must be integer vertex indices, got dtype {faces.dtype}")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise ModelError(f"mesh face indices must lie in [0, {len(vertices)}), got [{faces.min()}, {faces.max()}]")
    if not np.all(np.isfinite(vertices)):
        raise ModelError("mesh vertices must be finite")
    distinct = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 2] != faces[:, 0])
    if not np.any(distinct):
        raise ModelError("mesh has no face with three distinct vertices")
    return vertices, faces[distinct].astype(np.int64)  # a face on a repeated vertex encloses nothing


def check_closed_oriented(faces, nv):
    """Raise :class:`ModelError` unless every directed edge ``a -> b`` of the faces is matched by as many
    ``b -> a`` (a closed, consistently oriented surface: the condition under which the tetrahedra of
    Kwon's sums tile the solid whatever the apex)."""
    faces = np.asarray(faces, dtype=np.int64)
    tails = faces.reshape(-1)
    heads = np.roll(faces, -1, axis=1).reshape(-1)
    # Net circulation of each undirected edge: +1 per use as low -> high, -1 per use as high -> low.
    edges, index = np.unique(np.minimum(tails, heads) * nv + np.maximum(tails, heads), return_inverse=True)
    net = np.bincount(index.reshape(-1), weights=np.where(tails < heads, 1.0, -1.0), minlength=len(edges))
    unmatched = int(np.count_nonzero(net))
    if unmatched:
        raise ModelError(f"mesh is not a closed, consistently oriented surface: {unmatched} edge(s) of "
                         f"{len(edges)} are not traversed equally often in both directions (holes, or "
                         f"faces with flipped winding)")


def _face_tetrahedra(vertices, faces, o):
    """Per face: corners ``a, b, c (nf, 3)`` relative to ``o`` and ``det(F) = a . (b x c)`` (Kwon eq. 15)."""
    a, b, c = (vertices[faces[:, k]] - o for k in range(3))
    return a, b, c, np.einsum("ij,ij->i", a, np.cross(b, c))


def _homogeneous_tetra_moment(a, b, c):
    """``Q~ = sum_k v~_k v~_k^T + s~ s~^T (nf, 4, 4)`` over the homogeneous corners of the tetrahedron
    ``(o, a, b, c)``, ``v~ = [v; 1]``, apex ``o = 0``: ``J_tet = mu det(F) / 120 * Q~``."""
    nf = a.shape[0]
    corners = np.zeros((nf, 4, 4))
    corners[:, 0, :3], corners[:, 1, :3], corners[:, 2, :3] = a, b, c
    corners[:, :, 3] = 1.0
    s = corners.sum(axis=1)
    return np.einsum("fki,fkj->fij", corners, corners) + np.einsum("fi,fj->fij", s, s), corners, s


def _reference_point(vertices, faces):
    return vertices[np.unique(faces)].mean(axis=0)


def _translation_map(o):
    """10x10 matrix taking parameters about ``o`` (axes unchanged) to parameters about the origin."""
    return np.stack([transform_inertial_parameters(e, np.eye(3), o) for e in np.eye(10)], axis=1)


def mesh_inertial_parameters(vertices, faces, density):
    """Inertial parameters ``pi (10,)`` about the mesh frame ORIGIN of the solid bounded by a closed,
    outward-oriented triangle mesh of uniform ``density`` (kg/m^3).

    Signed-tetrahedron decomposition (Kwon eqs. 15-28): with ``det(F) = det([v1 v2 v3])`` of each face
    (eq. 15), the mass is ``mu/6 sum det(F)`` (eq. 17), the first moment ``mu/24 sum det(F) (v1+v2+v3)``
    (eq. 20 in volume form) and the second moments ``mu/120 sum det(F) (sum_k v_k v_k^T + s s^T)``
    (``s = v1+v2+v3``; eqs. 22 and 25), gathered here as the tetrahedra's pseudo-inertias.

    vertices (nv, 3), faces (nf, 3) int, density > 0. Raises :class:`ModelError` for a surface that is not
    closed and consistently oriented, or whose enclosed volume is not positive (inward normals).
    """
    vertices, faces = _validated_mesh(vertices, faces)
    density = _positive_density(density)
    check_closed_oriented(faces, len(vertices))
    o = _reference_point(vertices, faces)
    a, b, c, det = _face_tetrahedra(vertices, faces, o)
    _check_volume(det, vertices - o)
    Q, _, _ = _homogeneous_tetra_moment(a, b, c)
    J = density / 120.0 * np.einsum("f,fij->ij", det, Q)
    return _translation_map(o) @ parameters_from_pseudo_inertia(J)


def mesh_inertial_parameters_vertex_derivative(vertices, faces, density):
    """Derivative ``dpi/dV (10, nv, 3)`` of :func:`mesh_inertial_parameters` w.r.t. every vertex coordinate
    (Kwon eqs. 16, 18, 21, 23-24, 27-28, in pseudo-inertia form).

    For a face with corners ``v_s`` (slot ``s = 1, 2, 3``): ``d det(F)/d v_s = v_j x v_k`` ((s, j, k)
    cyclic; eq. 16) and ``d Q~ / d v_s,i = e_i u~^T + u~ e_i^T`` with ``u~ = v~_s + s~`` (the
    ``r(v_i + sum_j v_j)`` of eq. 28), so ``dJ_tet/dv_s,i = mu/120 (Q~ d det/dv_s,i + det dQ~/dv_s,i)``.
    A vertex gathers the terms of every face it belongs to; unreferenced vertices get zeros.
    """
    vertices, faces = _validated_mesh(vertices, faces)
    density = _positive_density(density)
    check_closed_oriented(faces, len(vertices))
    nv = len(vertices)
    o = _reference_point(vertices, faces)
    a, b, c, det = _face_tetrahedra(vertices, faces, o)
    _check_volume(det, vertices - o)
    Q, corners, s = _homogeneous_tetra_moment(a, b, c)
    ddet = np.stack([np.cross(b, c), np.cross(c, a), np.cross(a, b)], axis=1)  # (nf, slot, i)
    u = corners[:, :3, :] + s[:, None, :]                                      # (nf, slot, 4)
    E = np.eye(4)[:3]                                                          # e_i, (i, 4)
    dQ = np.einsum("ik,fsl->fsikl", E, u) + np.einsum("fsk,il->fsikl", u, E)  # (nf, slot, i, 4, 4)
    dJ = density / 120.0 * (np.einsum("fkl,fsi->fsikl", Q, ddet) + det[:, None, None, None, None] * dQ)
    dJ_dV = np.zeros((4, 4, nv, 3))
    for slot in range(3):
        np.add.at(dJ_dV, (slice(None), slice(None), faces[:, slot]), np.moveaxis(dJ[:, slot], (2, 3), (0, 1)))
    dpi_o = parameters_from_pseudo_inertia(dJ_dV).reshape(10, nv * 3)
    # pi does not depend on the apex o of a closed mesh, so o is held fixed in the derivative.
    return (_translation_map(o) @ dpi_o).reshape(10, nv, 3)


def _positive_density(density):
    try:
        mu = float(density)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"mesh density must be a number, got {density!r}") from exc
    if not (np.isfinite(mu) and mu > 0):
        raise ModelError(f"mesh density must be positive and finite, got {density!r}")
    return mu


def _check_volume(det, centred_vertices):
    volume = det.sum() / 6.0
    extent = float(np.abs(centred_vertices).max(initial=0.0))
    if not volume > 1e-12 * extent ** 3:
        raise ModelError(f"mesh encloses a non-positive volume ({volume:.6g}): faces must be ordered "
                         f"counter-clockwise seen from outside (outward normals), and the solid not flat")


# --------------------------------------------------------------------------------- transformed inertia
def transform_inertial_parameters(pi, R, p):
    """Parameters ``pi (10,)`` given in frame B, expressed in frame A, where ``(R (3, 3), p (3,))`` is the
    placement of B in A (``x_A = R x_B + p``): Kwon eq. 29, ``G_A = Ad_T^{-T} G_B Ad_T^{-1}``, i.e.
    ``h' = R h + m p``, ``I' = R I R^T - m [p]^2 - [R h][p] - [p][R h]``. Returns (10,)."""
    inertia = spatial.inertia_from_params(NUMPY, np.asarray(pi, dtype=float))
    m, h, I = spatial.inertia_act(NUMPY, np.asarray(R, dtype=float), np.asarray(p, dtype=float), inertia)
    return spatial.params_from_inertia(NUMPY, m, h, I)


def inertial_parameters_left_twist_derivative(pi):
    """``dpi/deta (10, 6)`` of parameters ``pi (10,)`` (expressed in frame A) when the body is moved by a
    twist ``eta = [dv; dw]`` expressed in A, i.e. the placement ``T`` of the body in A becomes
    ``exp(eta) T`` (LEFT / spatial perturbation, ``[eta] = dT T^{-1}``): Kwon eqs. 30-34,

    ``dm = 0``, ``dh = m dv - [h] dw`` (eq. 33), ``dI = [dw] I - I [dw] - [dv][h] - [h][dv]`` (eq. 32).
    The columns follow ``[v; w]``: 0-2 linear, 3-5 angular.
    """
    m, h, I = spatial.inertia_from_params(NUMPY, np.asarray(pi, dtype=float))
    S = NUMPY.skew
    columns = []
    for eta in np.eye(6):
        dv, dw = eta[:3], eta[3:]
        dh = m * dv - S(h) @ dw
        dI = S(dw) @ I - I @ S(dw) - S(dv) @ S(h) - S(h) @ S(dv)
        columns.append(spatial.params_from_inertia(NUMPY, 0.0, dh, dI))
    return np.stack(columns, axis=1)


def transformed_inertial_parameters_derivative(pi, R, p):
    """``d/dxi transform_inertial_parameters(pi, T exp(xi)) (10, 6)`` at ``xi = 0`` for parameters
    ``pi (10,)`` given in frame B and the placement ``T = (R, p)`` of B in A, perturbed on the RIGHT
    (``xi = [dv; dw]`` a twist expressed in the body frame B). Since ``T exp(xi) = exp(Ad_T xi) T``, this is
    :func:`inertial_parameters_left_twist_derivative` of the transformed parameters times ``Ad_T``
    (``[[R, [p] R], [0, R]]`` in ``[v; w]`` order)."""
    R, p = np.asarray(R, dtype=float), np.asarray(p, dtype=float)
    left = inertial_parameters_left_twist_derivative(transform_inertial_parameters(pi, R, p))
    return left @ spatial.motion_matrix(NUMPY, R, p)


# ------------------------------------------------------------------------------------- URDF density fill
def density_fill_inertial(mesh_path, density, scale=(1.0, 1.0, 1.0), origin=(np.eye(3), np.zeros(3))):
    """Inertial parameters ``pi (10,)`` of a link, about the link origin in link axes, from a closed STL
    collision mesh of uniform ``density``: the mesh vertices are scaled by ``scale (3,)`` (URDF
    ``<mesh scale>``; an odd number of negative factors mirrors the mesh, and the face order is flipped to
    keep normals outward), then the solid is placed by ``origin = (R (3, 3), p (3,))`` of the collision
    geometry in the link frame (:func:`transform_inertial_parameters`).

    Raises :class:`ModelError` naming ``mesh_path`` for an unreadable or unusable mesh.
    """
    scale = np.asarray(scale, dtype=float).reshape(-1)
    if scale.shape != (3,) or not np.all(np.isfinite(scale)) or np.any(scale == 0):
        raise ModelError(f"mesh '{mesh_path}': scale must be 3 finite non-zero factors, got {scale.tolist()}")
    R, p = (np.asarray(x, dtype=float) for x in origin)
    vertices, faces = read_stl(os.fspath(mesh_path))
    if np.prod(scale) < 0:
        faces = faces[:, ::-1]
    try:
        pi_mesh = mesh_inertial_parameters(vertices * scale, faces, density)
    except ModelError as exc:
        raise ModelError(f"mesh '{mesh_path}': {exc}") from exc
    return transform_inertial_parameters(pi_mesh, R, p)
