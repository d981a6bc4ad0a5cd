"""Mesh-based inertia (Kwon eqs. 15-34) against closed forms, an independent quadrature over a different
tetrahedral decomposition, the parallel-axis theorem and central finite differences. Meshes are generated
here (no binary fixtures are committed)."""
import numpy as np
import pytest
from conftest import assert_close
from scipy.linalg import expm

from robodyn_ros.model.errors import ModelError
from robodyn_ros.model.mesh_inertia import (
    density_fill_inertial, inertial_parameters_left_twist_derivative, mesh_inertial_parameters,
    mesh_inertial_parameters_vertex_derivative, parameters_from_pseudo_inertia, pseudo_inertia_from_parameters,
    read_stl, transform_inertial_parameters, transformed_inertial_parameters_derivative, write_stl_ascii,
    write_stl_binary)

RHO = 2700.0  # aluminium, kg/m^3


# ------------------------------------------------------------------------------------ fixture generators
def outward(vertices, faces):
    """Flip the faces of a CONVEX mesh whose normal points towards the vertex centroid (test-side
    orientation fix, independent of the library)."""
    centre = vertices.mean(axis=0)
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    inward = np.einsum("ij,ij->i", np.cross(b - a, c - a), (a + b + c) / 3 - centre) < 0
    faces = faces.copy()
    faces[inward] = faces[inward][:, ::-1]
    return faces


def box_mesh(lo, hi):
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    vertices = np.array([[(hi if (k >> d) & 1 else lo)[d] for d in range(3)] for k in range(8)])
    quads = [[0, 2, 6, 4], [1, 3, 7, 5], [0, 1, 5, 4], [2, 3, 7, 6], [0, 1, 3, 2], [4, 5, 7, 6]]
    faces = np.array([t for q in quads for t in ([q[0], q[1], q[2]], [q[0], q[2], q[3]])])
    return vertices, outward(vertices, faces)


def prism_mesh(n, r, height):
    """Regular n-gonal prism (circumradius r) centred at the origin, axis z: the polyhedron that
    approximates a cylinder."""
    t = 2 * np.pi * np.arange(n) / n
    ring = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
    vertices = np.vstack([np.column_stack([ring, np.full(n, -height / 2)]),
                          np.column_stack([ring, np.full(n, height / 2)]),
                          [[0, 0, -height / 2], [0, 0, height / 2]]])
    i, j = np.arange(n), (np.arange(n) + 1) % n
    faces = np.vstack([np.column_stack([np.full(n, 2 * n), i, j]),
                       np.column_stack([np.full(n, 2 * n + 1), n + i, n + j]),
                       np.column_stack([i, j, n + j]), np.column_stack([i, n + j, n + i])])
    return vertices, outward(vertices, faces)


def icosphere(level, r=1.0):
    g = (1 + 5 ** 0.5) / 2
    vertices = [(-1, g, 0), (1, g, 0), (-1, -g, 0), (1, -g, 0), (0, -1, g), (0, 1, g), (0, -1, -g), (0, 1, -g),
                (g, 0, -1), (g, 0, 1), (-g, 0, -1), (-g, 0, 1)]
    vertices = [np.array(v, float) / np.linalg.norm(v) for v in vertices]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
             (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    for _ in range(level):
        cache, refined = {}, []

        def midpoint(a, b):
            key = (min(a, b), max(a, b))
            if key not in cache:
                m = vertices[a] + vertices[b]
                vertices.append(m / np.linalg.norm(m))
                cache[key] = len(vertices) - 1
            return cache[key]
        for a, b, c in faces:
            ab, bc, ca = midpoint(a, b), midpoint(b, c), midpoint(c, a)
            refined += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = refined
    vertices = r * np.array(vertices)
    return vertices, outward(vertices, np.array(faces))


def random_rotation(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def se3(xi):
    """4x4 exp of the twist xi = [v; w] (scipy's matrix exponential: independent of the library)."""
    X = np.zeros((4, 4))
    X[:3, :3] = [[0, -xi[5], xi[4]], [xi[5], 0, -xi[3]], [-xi[4], xi[3], 0]]
    X[:3, 3] = xi[:3]
    return expm(X)


# ------------------------------------------------------------------------------------- references
def assert_parameters_close(actual, expected, rtol, what=""):
    """Per-group relative comparison of 10-vectors: mass by m, first moments by m L, inertias by max |I|
    (L = radius of gyration), so that small entries are not judged on the mass's scale."""
    m, inertia = abs(expected[0]), np.abs(expected[4:]).max()
    scale = np.array([m] + [m * np.sqrt(inertia / m)] * 3 + [inertia] * 6)
    err = np.max(np.abs(np.asarray(actual) - expected) / scale)
    assert err <= rtol, f"{what}: max scaled error {err:.3e} > {rtol:.1e}"
    return err


def box_parameters(lo, hi, rho):
    """Closed form about the origin: products of 1-D integrals of 1, x, x^2 over [lo, hi]."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    i0, i1, i2 = hi - lo, (hi ** 2 - lo ** 2) / 2, (hi ** 3 - lo ** 3) / 3
    vol = np.prod(i0)
    first = np.array([i1[d] * vol / i0[d] for d in range(3)])
    C = np.array([[(i2[a] * vol / i0[a]) if a == b else i1[a] * i1[b] * vol / (i0[a] * i0[b]) for b in range(3)]
                  for a in range(3)])
    return rho * integrals_to_parameters(vol, first, C)


def integrals_to_parameters(vol, first, C):
    """[m, h, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] from int 1, int x, int x x^T (unit density)."""
    I = np.trace(C) * np.eye(3) - C
    return np.array([vol, *first, I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def prism_parameters(n, r, height, rho):
    """Exact regular n-gonal prism: area n r^2 sin(t)/2, polar area moment n r^4 sin(t)(2 + cos t)/12,
    t = 2 pi / n, in-plane second moment isotropic (n-fold symmetry)."""
    t = 2 * np.pi / n
    area, polar = n * r ** 2 * np.sin(t) / 2, n * r ** 4 * np.sin(t) * (2 + np.cos(t)) / 12
    ixx = height * polar / 2 + area * height ** 3 / 12
    return rho * np.array([area * height, 0, 0, 0, ixx, 0, ixx, 0, 0, height * polar])


def cylinder_parameters(r, height, rho):
    m = rho * np.pi * r ** 2 * height
    ixx = m * (3 * r ** 2 + height ** 2) / 12
    return np.array([m, 0, 0, 0, ixx, 0, ixx, 0, 0, m * r ** 2 / 2])


def sphere_parameters(r, rho):
    m = rho * 4 / 3 * np.pi * r ** 3
    return np.array([m, 0, 0, 0, 0.4 * m * r ** 2, 0, 0.4 * m * r ** 2, 0, 0, 0.4 * m * r ** 2])


def quadrature_parameters(vertices, faces, rho, apex):
    """Independent value: tetrahedra (apex, face) with a different apex, each integrated with the
    degree-2-exact 4-point Keast rule (barycentric (a, b, b, b), a = (5 + 3 sqrt 5)/20, weight vol/4).
    Also returns the pseudo-inertia int [x;1][x;1]^T dm."""
    a, b = (5 + 3 * 5 ** 0.5) / 20, (5 - 5 ** 0.5) / 20
    corners = np.concatenate([np.broadcast_to(apex, (len(faces), 1, 3)), vertices[faces]], axis=1)  # (nf,4,3)
    vol = np.linalg.det(corners[:, 1:] - corners[:, :1]) / 6                                   # signed
    bary = np.full((4, 4), b) + (a - b) * np.eye(4)
    points = np.einsum("qk,fkd->fqd", bary, corners)                                           # (nf, 4, 3)
    hom = np.concatenate([points, np.ones(points.shape[:2] + (1,))], axis=2)
    J = rho * np.einsum("f,fqi,fqj->ij", vol / 4, hom, hom)
    return rho * integrals_to_parameters(J[3, 3] / rho, J[:3, 3] / rho, J[:3, :3] / rho), J


# -------------------------------------------------------------------------------------------- values
def test_box_matches_closed_form_about_the_origin():
    lo, hi = [0.3, -0.2, 0.1], [1.1, 0.5, 0.35]
    pi = mesh_inertial_parameters(*box_mesh(lo, hi), RHO)
    assert_parameters_close(pi, box_parameters(lo, hi, RHO), 1e-14, what="box")
    # a centred cube: m a^2 / 6 on the diagonal, no products
    pi = mesh_inertial_parameters(*box_mesh([-0.5] * 3, [0.5] * 3), 1.0)
    assert_close(pi, [1, 0, 0, 0, 1 / 6, 0, 1 / 6, 0, 0, 1 / 6], rtol=1e-15, what="unit cube")


def test_prism_is_exact_and_converges_to_the_cylinder():
    r, height = 0.05, 0.3
    errors = []
    for n in (64, 128, 256, 512):
        pi = mesh_inertial_parameters(*prism_mesh(n, r, height), RHO)
        assert_parameters_close(pi, prism_parameters(n, r, height, RHO), 1e-12, what=f"prism n={n}")
        exact = cylinder_parameters(r, height, RHO)
        errors.append(np.max(np.abs(pi - exact)[[0, 4, 6, 9]] / exact[[0, 4, 6, 9]]))
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all(np.abs(ratios - 4) < 0.05), f"second-order convergence expected, error ratios {ratios}"
    # Fine tessellation: relative error ~ (2 pi / n)^2 / 3 = 2e-7 for n = 8192
    n = 8192
    pi = mesh_inertial_parameters(*prism_mesh(n, r, height), RHO)
    exact = cylinder_parameters(r, height, RHO)
    rel = np.abs(pi - exact)[[0, 4, 6, 9]] / exact[[0, 4, 6, 9]]
    assert np.max(rel) < 1e-6, rel
    assert_parameters_close(pi, prism_parameters(n, r, height, RHO), 1e-12, what=f"prism n={n}")


def test_icosphere_against_quadrature_and_converging_to_the_sphere():
    r = 0.2
    errors = []
    for level in (2, 3, 4, 5):
        vertices, faces = icosphere(level, r)
        pi = mesh_inertial_parameters(vertices, faces, RHO)
        ref, _ = quadrature_parameters(vertices, faces, RHO, apex=vertices[0])  # apex on the surface
        assert_parameters_close(pi, ref, 1e-12, what=f"icosphere {level} vs quadrature")
        exact = sphere_parameters(r, RHO)
        assert pi[0] < exact[0] and pi[4] < exact[4]  # an inscribed polyhedron is lighter
        errors.append(np.max(np.abs(pi - exact)[[0, 4, 6, 9]] / exact[[0, 4, 6, 9]]))
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    # Each subdivision halves the edge: the sagitta, hence the missing volume, shrinks ~4x.
    assert np.all((ratios > 3.5) & (ratios < 4.5)), ratios
    # Level 2 misses 5.6 %; four more quarterings give 5.6e-2 / 4^3 = 8.7e-4.
    assert errors[-1] < 1e-3, errors


def test_pseudo_inertia_round_trip_and_quadrature():
    vertices, faces = icosphere(2, 0.3)
    vertices = vertices * [1.0, 0.7, 1.4] + [0.2, -0.4, 0.5]
    pi = mesh_inertial_parameters(vertices, faces, RHO)
    _, J = quadrature_parameters(vertices, faces, RHO, apex=np.array([0.1, -0.3, 0.6]))
    assert_close(pseudo_inertia_from_parameters(pi), J, rtol=1e-13, what="pseudo-inertia")
    assert_close(parameters_from_pseudo_inertia(J), pi, rtol=1e-13, what="params from J")


def test_moved_mesh_follows_the_parallel_axis_theorem():
    rng = np.random.default_rng(3)
    vertices, faces = box_mesh([0, 0, 0], [0.4, 0.2, 0.1])
    pi = mesh_inertial_parameters(vertices, faces, RHO)
    m, c = pi[0], pi[1:4] / pi[0]
    I0 = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
    Ic = I0 - m * (c @ c * np.eye(3) - np.outer(c, c))
    for _ in range(3):
        R, p = random_rotation(rng), rng.normal(size=3)
        moved = mesh_inertial_parameters(vertices @ R.T + p, faces, RHO)
        c2 = R @ c + p
        I2 = R @ Ic @ R.T + m * (c2 @ c2 * np.eye(3) - np.outer(c2, c2))  # Steiner, written out here
        steiner = np.array([m, *(m * c2), I2[0, 0], I2[0, 1], I2[1, 1], I2[0, 2], I2[1, 2], I2[2, 2]])
        assert_parameters_close(moved, steiner, 1e-12, what="moved mesh vs Steiner")
        assert_parameters_close(transform_inertial_parameters(pi, R, p), steiner, 1e-12, what="transform")


def test_far_from_origin_keeps_accuracy():
    lo, hi = np.array([1000.0, -2000.0, 500.0]), np.array([1000.5, -1999.75, 500.125])
    pi = mesh_inertial_parameters(*box_mesh(lo, hi), RHO)
    ref = box_parameters(lo, hi, RHO)
    assert_parameters_close(pi, ref, 1e-12, what="far box")


# --------------------------------------------------------------------------------------- derivatives
def lumpy_mesh(seed=0):
    rng = np.random.default_rng(seed)
    vertices, faces = icosphere(1, 0.3)
    vertices = vertices * (1 + 0.2 * rng.uniform(-1, 1, size=(len(vertices), 1))) + [0.1, -0.2, 0.3]
    return vertices, faces


def test_vertex_derivative_matches_central_differences():
    vertices, faces = lumpy_mesh()
    D = mesh_inertial_parameters_vertex_derivative(vertices, faces, RHO)
    assert D.shape == (10, len(vertices), 3)
    step = 1e-5
    fd = np.zeros_like(D)
    for k in range(len(vertices)):
        for i in range(3):
            e = np.zeros_like(vertices)
            e[k, i] = step
            fd[:, k, i] = (mesh_inertial_parameters(vertices + e, faces, RHO)
                           - mesh_inertial_parameters(vertices - e, faces, RHO)) / (2 * step)
    err = np.abs(D - fd).max() / np.abs(D).max()
    assert err < 1e-8, err
    # A rigid translation moves the mass nowhere: sum_v dm/dv = 0 and sum_v dh/dv = m 1.
    pi = mesh_inertial_parameters(vertices, faces, RHO)
    assert_close(D[0].sum(axis=0), np.zeros(3), atol=1e-10 * pi[0], what="dm under translation")
    assert_close(D[1:4].sum(axis=1), pi[0] * np.eye(3), rtol=1e-12, what="dh under translation")


def test_vertex_derivative_ignores_unused_vertices():
    vertices, faces = lumpy_mesh(1)
    extra = np.vstack([vertices, [[5.0, 5.0, 5.0]]])
    D = mesh_inertial_parameters_vertex_derivative(extra, faces, RHO)
    assert np.all(D[:, -1] == 0)
    assert_close(D[:, :-1], mesh_inertial_parameters_vertex_derivative(vertices, faces, RHO), rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_transformed_inertia_derivative_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    vertices, faces = lumpy_mesh(seed)
    pi = mesh_inertial_parameters(vertices, faces, RHO)
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = random_rotation(rng), rng.normal(size=3)

    def moved(T2):
        return transform_inertial_parameters(pi, T2[:3, :3], T2[:3, 3])

    step = 1e-6
    right = np.stack([(moved(T @ se3(step * e)) - moved(T @ se3(-step * e))) / (2 * step) for e in np.eye(6)], 1)
    left = np.stack([(moved(se3(step * e) @ T) - moved(se3(-step * e) @ T)) / (2 * step) for e in np.eye(6)], 1)
    D_right = transformed_inertial_parameters_derivative(pi, T[:3, :3], T[:3, 3])
    D_left = inertial_parameters_left_twist_derivative(moved(T))
    scale = np.abs(moved(T)).max()
    assert np.abs(D_right - right).max() < 1e-7 * scale, np.abs(D_right - right).max()
    assert np.abs(D_left - left).max() < 1e-7 * scale, np.abs(D_left - left).max()
    assert np.all(D_left[0] == 0)  # Kwon eq. 34: the mass does not move


# ----------------------------------------------------------------------------------------- STL files
def test_stl_round_trips(tmp_path):
    vertices, faces = box_mesh([-0.25, 0.5, 0.125], [0.75, 1.5, 0.375])  # float32-exact coordinates
    pi = mesh_inertial_parameters(vertices, faces, RHO)
    for name, writer in (("a.stl", write_stl_ascii), ("b.stl", write_stl_binary)):
        writer(tmp_path / name, vertices, faces)
        v2, f2 = read_stl(tmp_path / name)
        assert v2.shape == (8, 3) and f2.shape == (12, 3), name  # 36 corners merged to 8 vertices
        assert_close(v2[f2], vertices[faces], atol=0.0, what=name)  # same triangles, same winding
        assert_close(mesh_inertial_parameters(v2, f2, RHO), pi, rtol=1e-15, what=name)
    # ASCII keeps full double precision; binary rounds to float32
    vertices, faces = lumpy_mesh()
    write_stl_ascii(tmp_path / "c.stl", vertices, faces)
    write_stl_binary(tmp_path / "d.stl", vertices, faces, header=b"solid looks like ascii but is binary")
    v2, f2 = read_stl(tmp_path / "c.stl")
    assert_close(v2[f2], vertices[faces], atol=0.0, what="ascii exact")
    v3, f3 = read_stl(tmp_path / "d.stl")
    assert len(v3) == len(vertices)
    assert_close(v3[f3], vertices[faces], atol=1e-7, what="binary float32")


def test_nearly_equal_corners_are_merged(tmp_path):
    """CAD exporters may print a shared corner with different last digits: corners equal to ~1e-12 of the
    mesh size are one vertex, so the surface stays closed."""
    rng = np.random.default_rng(5)
    vertices, faces = box_mesh([-0.25, 0.5, 0.125], [0.75, 1.5, 0.375])
    corners = vertices[faces] + rng.uniform(-1e-15, 1e-15, size=(len(faces), 3, 3))
    text = ["solid soup"] + [" facet normal 0 0 0\n  outer loop\n" + "".join(
        "   vertex {:.17g} {:.17g} {:.17g}\n".format(*c) for c in tri) + "  endloop\n endfacet" for tri in corners]
    (tmp_path / "soup.stl").write_text("\n".join(text + ["endsolid soup\n"]))
    v2, f2 = read_stl(tmp_path / "soup.stl")
    assert v2.shape == (8, 3) and f2.shape == (12, 3)
    assert_parameters_close(mesh_inertial_parameters(v2, f2, RHO), mesh_inertial_parameters(vertices, faces, RHO),
                            1e-13, what="merged soup")


@pytest.mark.parametrize("content, message", [
    (b"", "neither binary"),
    (b"solid empty\nendsolid empty\n", "no triangles"),
    (b"solid x\n facet normal 0 0 1\n outer loop\n vertex 0 0 0\n vertex 1 0 0\n endloop\n endfacet\n"
     b"endsolid x\n", "malformed"),
    (b"solid x\n facet normal 0 0 1\n outer loop\n vertex 0 0 0\n vertex 1 0 0\n vertex 0 nan 0\n endloop\n"
     b" endfacet\nendsolid x\n", "non-finite"),
    (b"\0" * 80 + (0).to_bytes(4, "little"), "no triangles"),
    (b"\0" * 80 + (2).to_bytes(4, "little") + b"\0" * 60, "neither binary"),  # truncated
    (b"PK\x03\x04 a zip file", "neither binary"),
], ids=["empty", "ascii-no-facets", "ascii-missing-vertex", "ascii-nan", "binary-zero-triangles",
        "binary-truncated", "not-stl"])
def test_bad_stl_files_raise_model_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad_mesh.stl"
    path.write_bytes(content)
    with pytest.raises(ModelError, match=message) as info:
        read_stl(path)
    assert "bad_mesh.stl" in str(info.value)


def test_missing_file_raises_model_error(tmp_path):
    with pytest.raises(ModelError, match="nowhere.stl"):
        read_stl(tmp_path / "nowhere.stl")


def test_open_inside_out_and_flat_meshes_are_rejected(tmp_path):
    vertices, faces = box_mesh([0, 0, 0], [1, 1, 1])
    with pytest.raises(ModelError, match="closed"):
        mesh_inertial_parameters(vertices, faces[:-1], RHO)
    flipped = faces.copy()
    flipped[0] = flipped[0][::-1]
    with pytest.raises(ModelError, match="closed"):
        mesh_inertial_parameters(vertices, flipped, RHO)
    with pytest.raises(ModelError, match="non-positive volume"):
        mesh_inertial_parameters(vertices, faces[:, ::-1], RHO)
    with pytest.raises(ModelError, match="non-positive volume"):
        mesh_inertial_parameters(vertices * [1, 1, 0], faces, RHO)
    with pytest.raises(ModelError, match="density"):
        mesh_inertial_parameters(vertices, faces, 0.0)
    write_stl_binary(tmp_path / "open.stl", vertices, faces[:-1])
    with pytest.raises(ModelError, match="open.stl.*closed"):
        density_fill_inertial(tmp_path / "open.stl", RHO)


def test_density_fill_scales_mirrors_and_places_the_mesh(tmp_path):
    rng = np.random.default_rng(7)
    lo, hi = np.array([0.0, -0.25, 0.5]), np.array([0.5, 0.25, 1.0])
    write_stl_binary(tmp_path / "box.stl", *box_mesh(lo, hi))
    R, p = random_rotation(rng), rng.normal(size=3)
    for scale in ([2.0, 1.0, 0.5], [-1.0, 3.0, 1.0]):
        s = np.array(scale)
        corners = np.stack([lo * s, hi * s])
        expected = box_parameters(corners.min(axis=0), corners.max(axis=0), RHO)
        got = density_fill_inertial(tmp_path / "box.stl", RHO, scale=scale, origin=(R, p))
        assert_parameters_close(got, transform_inertial_parameters(expected, R, p), 1e-12, what=f"scale {scale}")
    assert_parameters_close(density_fill_inertial(str(tmp_path / "box.stl"), RHO), box_parameters(lo, hi, RHO), 1e-14)


def test_urdf_loader_fills_a_missing_inertial_from_the_collision_mesh(tmp_path):
    """The loader's contract: a link without <inertial> gets density_fill_inertial of its collision mesh,
    placed by the collision origin, and says so in the model's notes."""
    import robodyn_ros as rd
    from robodyn_ros.model.spatial import rpy_to_matrix
    lo, hi = [-0.05, -0.05, 0.0], [0.05, 0.05, 0.4]
    write_stl_ascii(tmp_path / "link1.stl", *box_mesh(lo, hi))
    (tmp_path / "r.urdf").write_text(
        '<robot name="r"><link name="base"/><link name="l1"><collision><origin xyz="0 0.02 0.1" rpy="0.3 0 0.5"/>'
        '<geometry><mesh filename="link1.stl" scale="1 1 2"/></geometry></collision></link>'
        '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    model = rd.Model.from_urdf(str(tmp_path / "r.urdf"), mesh_density=1000.0)
    expected = transform_inertial_parameters(box_parameters(lo, [0.05, 0.05, 0.8], 1000.0),
                                             rpy_to_matrix([0.3, 0.0, 0.5]), [0.0, 0.02, 0.1])
    assert_parameters_close(model.inertial_parameters(), expected, 1e-12, what="filled link")
    assert any("link1.stl" in note for note in model.notes)


def test_transform_matches_pinocchio_se3_action():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(11)
    pi = mesh_inertial_parameters(*lumpy_mesh(2), RHO)
    R, p = random_rotation(rng), rng.normal(size=3)
    theirs = pin.SE3(R, p).act(pin.Inertia.FromDynamicParameters(pi)).toDynamicParameters()
    assert_parameters_close(transform_inertial_parameters(pi, R, p), theirs, 1e-12, what="vs Pinocchio")


def test_refined_icospheres_extrapolate_to_the_analytic_sphere():
    """The inscribed icosphere's error is O(h^2) (a factor 4 per subdivision level), so Richardson
    extrapolation of levels 5 and 6, (4 I_6 - I_5) / 3, must match the analytic sphere to 1e-6 relative
    (measured 1.2e-7), and the raw level-6 mesh must be within 3e-4 (measured 2.3e-4)."""
    r, rho = 0.3, 1000.0
    exact = sphere_parameters(r, rho)
    I5, I6 = (mesh_inertial_parameters(*icosphere(level, r), rho) for level in (5, 6))
    nonzero = [0, 4, 6, 9]                      # m, Ixx, Iyy, Izz (the others vanish by symmetry)
    relative = lambda x: np.abs(x[nonzero] - exact[nonzero]) / np.abs(exact[nonzero])
    assert relative(I6).max() < 3e-4
    assert relative((4 * I6 - I5) / 3).max() < 1e-6
