"""Model.from_urdf fills a link's missing inertial from its collision mesh and a density, and says so."""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import assert_close
from robodyn_ros.model.mesh_inertia import write_stl_binary

CUBE_V = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], dtype=float) - 0.5
CUBE_F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                   [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])


def urdf_with_mesh(mesh, scale="0.2 0.2 0.2", xyz="0 0 0.3"):
    return f"""<robot name="m"><link name="base"/>
      <link name="arm"><collision><origin xyz="{xyz}"/><geometry><mesh filename="{mesh}" scale="{scale}"/></geometry></collision></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
      <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""


def test_inertial_filled_from_mesh(tmp_path):
    # orientation of the cube faces: make sure normals point outwards (flip if the volume is negative)
    v, f = CUBE_V, CUBE_F
    if np.einsum("ij,ij->i", v[f[:, 0]], np.cross(v[f[:, 1]], v[f[:, 2]])).sum() < 0:
        f = f[:, ::-1]
    write_stl_binary(tmp_path / "cube.stl", v, f)
    model = rd.Model.from_urdf(urdf_with_mesh("cube.stl").replace('filename="cube.stl"', f'filename="{tmp_path}/cube.stl"'),
                               mesh_density=1000.0)
    m = 1000.0 * 0.2**3
    side_inertia = m * (0.2**2 + 0.2**2) / 12
    com = np.array([0, 0, 0.3])
    expected_Io = side_inertia * np.eye(3) + m * (com @ com * np.eye(3) - np.outer(com, com))
    pi = model.inertias[0]
    assert_close(pi[:4], [m, 0, 0, m * 0.3], rtol=1e-12)
    assert_close(pi[4:], [expected_Io[0, 0], 0, expected_Io[1, 1], 0, 0, expected_Io[2, 2]], rtol=1e-12)
    assert any("filled from mesh" in n for n in model.notes)


def test_without_density_inertia_stays_zero(tmp_path):
    write_stl_binary(tmp_path / "cube.stl", CUBE_V, CUBE_F)
    with pytest.warns(rd.model.errors.NonPhysicalInertiaWarning, match="no inertia moved by joint"):
        model = rd.Model.from_urdf(urdf_with_mesh(f"{tmp_path}/cube.stl"))
    assert np.all(model.inertias == 0)


def test_package_uri_is_a_clear_error():
    with pytest.raises(rd.ModelError, match="package://"):
        rd.Model.from_urdf(urdf_with_mesh("package://robot/meshes/arm.stl"), mesh_density=1000.0)


def test_missing_mesh_file_is_named(tmp_path):
    with pytest.raises(rd.ModelError, match="nothere.stl"):
        rd.Model.from_urdf(urdf_with_mesh(f"{tmp_path}/nothere.stl"), mesh_density=1000.0)
