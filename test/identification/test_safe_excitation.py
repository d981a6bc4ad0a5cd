"""Exciting trajectories that keep the arm off the floor and out of self-collision (``robodyn excite``):
designed with robodyn_ros's capsules, checked INDEPENDENTLY (test/mesh_clearance.py: Pinocchio's forward
kinematics and coal's collision test on the URDF's own collision meshes, every 10 ms over a period) on
example-robot-data's UR10 and Kinova Jaco (not bundled) and on the bundled Panda; the check fails the old
unconstrained design; refusals leave nothing behind; ``--range`` narrows the joint ranges."""
import os

import numpy as np
import pytest

from conftest import CHECKOUT, erd_path
from mesh_clearance import MeshClearance
from robodyn_ros.cli.excite import main
from robodyn_ros.identification.collision_clearance import (
    clearance_model,
    segment_closest_parameters,
)
from robodyn_ros.identification.excitation import design_for_model
from robodyn_ros.model.collision_capsules import bounding_capsule, link_capsules, segment_distance
from robodyn_ros.model.mesh_files import read_mesh_vertices
from robodyn_ros.model.model import Model
from robodyn_ros.robots import bundled_robot_info

CLEARANCE = 0.05
UR10 = "ur_description/urdf/ur10_robot.urdf"
KINOVA = "kinova_description/robots/kinova.urdf"
PANDA = "panda_description/urdf/panda.urdf"
# the Kinova's joints 1, 4 and 6 are continuous: a range is the user's choice
KINOVA_RANGES = {"j2s6s200_joint_1": (-3.0, 3.0), "j2s6s200_joint_4": (-3.0, 3.0), "j2s6s200_joint_6": (-3.0, 3.0)}


def _samples(path):
    """Joint names and the configurations every 10 ms of a written trajectory CSV."""
    with open(path) as stream:
        names = stream.readline().strip().split(",")[1:]
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    return names, data[::10, 1:]


def _assert_clear(result, what):
    print(f"\n{what}: lowest checked point {result['floor']:.3f} m ({result['floor_what']}), shoulder housing "
          f"{result['housing']:.3f} m, samples with a self-collision {result['collisions']}")
    assert result["floor"] >= CLEARANCE, f"{what}: {result['floor_what']} at {result['floor']:.3f} m"
    assert result["housing"] > 0.0                    # the housing never touches the floor either
    assert result["collisions"] == 0, f"{what}: self-collision {result['collision_pairs']}"


def _ranged(model, ranges):
    lower, upper = model.lower.copy(), model.upper.copy()
    for name, (lo, hi) in ranges.items():
        j = model.joint_names.index(name)
        lower[j], upper[j] = lo, hi
    return lower, upper


# ------------------------------------------------------------------------------------------- geometry
def test_segment_closest_points_match_a_dense_search():
    rng = np.random.default_rng(3)
    grid = np.linspace(0.0, 1.0, 401)
    for _ in range(40):
        A1, B1, A2, B2 = rng.normal(size=(4, 3))
        if rng.random() < 0.2:
            B2 = A2.copy()                     # a point against a segment
        s, t = segment_closest_parameters(A1, B1, A2, B2)
        best = np.min(np.linalg.norm((A1 + grid[:, None, None] * (B1 - A1))
                                     - (A2 + grid[None, :, None] * (B2 - A2)), axis=-1))
        found = np.linalg.norm(A1 + s * (B1 - A1) - A2 - t * (B2 - A2))
        assert found <= best + 1e-9 and found >= best - 1e-2


def test_bounding_capsule_contains_every_point():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(500, 3)) * [0.3, 0.05, 0.08] + [0.1, 0.2, 0.0]
    a, b, r = bounding_capsule(points)
    assert np.all(segment_distance(points, a, b) <= r + 1e-12)
    assert r < 0.3                                     # it follows the long axis, not a sphere


@pytest.mark.parametrize("relative", [UR10, KINOVA, PANDA])
def test_capsules_contain_the_collision_meshes(relative):
    """Every vertex of every collision mesh, placed by Pinocchio at random configurations, lies inside a
    capsule of its link's body placed by robodyn_ros's kinematics (COLLADA meshes read by our reader, by assimp
    in Pinocchio)."""
    path = erd_path(relative)
    model = Model.from_urdf(path)
    capsules, _ = link_capsules(model, path)
    probe = clearance_model(model, capsules, lower=np.full(model.nv, -3.0), upper=np.full(model.nv, 3.0))
    meshes = MeshClearance(path)
    rng = np.random.default_rng(1)
    pin = meshes.pin
    for q in rng.uniform(-3.0, 3.0, size=(5, model.nv)):
        ends = probe.end_points(q[None])[0]
        pin.framesForwardKinematics(meshes.model, meshes.data, meshes.configuration(model.joint_names, q))
        pin.updateGeometryPlacements(meshes.model, meshes.data, meshes.geometry, meshes.geometry_data)
        for k, g in enumerate(meshes.geometry.geometryObjects):
            link = meshes.model.frames[g.parentFrame].name
            M = meshes.geometry_data.oMg[k]
            world = meshes.points[k] @ M.rotation.T + M.translation
            inside = np.zeros(len(world), dtype=bool)
            for c, capsule in enumerate(capsules):       # a capsule inside another of its body is dropped
                if capsule.body == model.frames[link].body:
                    inside |= segment_distance(world, ends[2 * c], ends[2 * c + 1]) <= capsule.radius + 1e-6
            assert np.all(inside), f"{relative}: {g.name}: {np.sum(~inside)} vertices outside the capsules of {link}"


def test_collada_reader_agrees_with_assimp():
    path = erd_path("kinova_description/meshes/arm.dae")
    ours = read_mesh_vertices(path)
    meshes = MeshClearance(erd_path(KINOVA))
    theirs = next(meshes.points[k] for k, g in enumerate(meshes.geometry.geometryObjects)
                  if g.name.startswith("j2s6s200_link_2"))
    np.testing.assert_allclose(ours.min(axis=0), theirs.min(axis=0), atol=1e-6)
    np.testing.assert_allclose(ours.max(axis=0), theirs.max(axis=0), atol=1e-6)


def test_clearance_gradients_match_finite_differences():
    path = erd_path(UR10)
    model = Model.from_urdf(path)
    clearance = clearance_model(model, link_capsules(model, path)[0])
    Q = np.random.default_rng(2).uniform(-2.0, 2.0, size=(6, model.nv))
    _, gradient = clearance.smooth_slack(Q)
    step = 1e-6
    numeric = np.stack([(clearance.smooth_slack(Q + step * e)[0] - clearance.smooth_slack(Q - step * e)[0]) / (2 * step)
                        for e in np.eye(model.nv)], axis=-1)
    np.testing.assert_allclose(gradient, numeric, atol=1e-6)
    # the smooth bound never exceeds the exact minimum
    assert np.all(clearance.smooth_slack(Q)[0].min(axis=1) <= clearance.slack(Q) + 1e-12)


# ------------------------------------------------------------------------------- designs, checked
@pytest.mark.parametrize("relative, ranges", [(UR10, {}), (KINOVA, KINOVA_RANGES)], ids=["ur10", "kinova"])
def test_library_design_keeps_clear_of_floor_and_itself(relative, ranges):
    path = erd_path(relative)
    model = Model.from_urdf(path)
    lower, upper = _ranged(model, ranges)
    capsules, _ = link_capsules(model, path)
    clearance = clearance_model(model, capsules, clearance=CLEARANCE, lower=lower, upper=upper)
    trajectory, kappa = design_for_model(model, harmonics=3, max_iterations=4, clearance=clearance,
                                         lower=lower, upper=upper)
    t = np.arange(0.0, trajectory.period, 0.01)
    q = trajectory.derivatives(t, 0)
    assert np.all(q >= lower) and np.all(q <= upper)
    _assert_clear(MeshClearance(path).check(model.joint_names, q), f"{relative} (condition number {kappa:.1f})")


@pytest.fixture(scope="module")
def panda_cli(tmp_path_factory):
    out = tmp_path_factory.mktemp("safe_excite")
    code = main(["--urdf", "panda", "--output", str(out / "traj.csv"), "--plot", str(out / "traj.png"),
                 "--iterations", "6"])
    assert code == 0
    return out


def test_bundled_panda_from_the_command_line_is_clear(panda_cli, capsys):
    names, Q = _samples(panda_cli / "traj.csv")
    _assert_clear(MeshClearance(erd_path(PANDA)).check(names, Q), "robodyn excite --urdf panda")
    assert (panda_cli / "traj.png").stat().st_size > 10000


def test_the_check_fails_the_unconstrained_design():
    """The same independent check on the design without clearance constraints (the command before it
    knew the floor): parts of the arm go below the base plane."""
    info = bundled_robot_info("panda")
    model = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    trajectory, _ = design_for_model(model, max_iterations=3)
    q = trajectory.derivatives(np.arange(0.0, trajectory.period, 0.01), 0)
    result = MeshClearance(erd_path(PANDA)).check(model.joint_names, q)
    print(f"\nunconstrained Panda design: lowest point {result['floor']:.3f} m ({result['floor_what']}), "
          f"{100 * result['below']:.0f} % of the samples below {CLEARANCE} m")
    assert result["floor"] < 0.0


def test_both_checks_see_a_self_collision():
    """A configuration of the UR10 that the unconstrained design with --start 0,-1.57,1.4,-1.57,-1.57,0
    --margin 0.2 passed through (t = 6.85 s): the wrist folded onto the forearm. coal finds the contact
    of the meshes, and the capsule model names the same pair."""
    path = erd_path(UR10)
    model = Model.from_urdf(path)
    q = np.array([-0.064, -1.472, 1.673, 1.625, -2.352, -1.51])
    result = MeshClearance(path).check(model.joint_names, q[None])
    assert result["collisions"] == 1 and ("forearm_link_0", "wrist_3_link_0") in result["collision_pairs"]
    problem = clearance_model(model, link_capsules(model, path)[0]).violation(q[None])
    assert problem is not None and "forearm_link" in problem and "wrist_3_link" in problem
    # capsules that overlap say so (it said "come within -0.438 m" of Baxter's pedestal and gripper)
    assert "overlap by" in problem and "within -" not in problem, problem


# ------------------------------------------------------------------------------- refusals, ranges
def test_an_infeasible_table_is_refused_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["--urdf", "panda", "--output", str(out), "--table-height", "0.9", "--iterations", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "floor" in err and "nothing was written" in err
    assert os.listdir(tmp_path) == []


def test_a_violating_trajectory_is_refused(tmp_path, capsys, monkeypatch):
    """The final check on the written samples refuses what the design hands over when it breaks a
    clearance (here: a design that ignores the clearance model)."""
    import robodyn_ros.identification.excitation as excitation
    unconstrained = excitation.design_for_model
    monkeypatch.setattr(excitation, "design_for_model",
                        lambda model, **kw: unconstrained(model, **{**kw, "clearance": None}))
    out = tmp_path / "t.csv"
    assert main(["--urdf", "panda", "--output", str(out), "--iterations", "3", "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert "refusing to write" in err and len(err.splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_ranges_narrow_the_motion(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["--urdf", "panda", "--output", str(out), "--iterations", "2", "--harmonics", "3",
                 "--range", "panda_joint1=-0.5:0.5", "--range", "panda_joint4=-2.5:-1.0"]) == 0
    names, Q = _samples(out)
    j1, j4 = names.index("panda_joint1"), names.index("panda_joint4")
    assert Q[:, j1].min() >= -0.5 and Q[:, j1].max() <= 0.5
    assert Q[:, j4].min() >= -2.5 and Q[:, j4].max() <= -1.0
    for bad, message in ((["panda_joint1=0.5:-0.5"], "LO must be below HI"),
                         (["panda_joint1=-4:0"], "outside the URDF's limits"),
                         (["no_joint=0:1"], "no movable joint 'no_joint'"),
                         (["panda_joint1=a:b"], "JOINT=LO:HI")):
        assert main(["--urdf", "panda", "--output", str(tmp_path / "u.csv"), "--range", *bad]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "u.csv").exists()


def test_workspace_box_contains_the_moving_links(tmp_path, capsys):
    low, high = np.array([-0.6, -0.6, -0.2]), np.array([0.6, 0.6, 1.2])
    out = tmp_path / "t.csv"
    assert main(["--urdf", "panda", "--output", str(out), "--iterations", "2", "--harmonics", "3",
                 "--workspace=" + ",".join(str(x) for x in (*low, *high))]) == 0
    assert "minimum distance to the workspace box" in capsys.readouterr().out
    names, Q = _samples(out)
    result = MeshClearance(erd_path(PANDA)).check(names, Q)
    print(f"\nworkspace box: meshes span {result['extent'][0].round(3)} to {result['extent'][1].round(3)}")
    assert np.all(result["extent"][0] >= low) and np.all(result["extent"][1] <= high)
    assert result["floor"] >= CLEARANCE
    assert main(["--urdf", "panda", "--output", str(tmp_path / "u.csv"), "--workspace", "0,0,0,1,1"]) == 2
    assert "--workspace" in capsys.readouterr().err


def test_continuous_joints_need_a_range(tmp_path, capsys):
    assert main(["--urdf", erd_path(KINOVA), "--output", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert "j2s6s200_joint_1" in err and "--range" in err
    assert os.listdir(tmp_path) == []


def test_bundled_capsules_are_the_fit_of_the_source_meshes():
    """tools/fit_bundled_capsules.py --check: the capsules shipped with the bundled Panda and UR5 are what
    the fit of example-robot-data's collision geometry gives (the test above checks that such fits
    contain the meshes)."""
    import importlib.util
    root = CHECKOUT
    spec = importlib.util.spec_from_file_location("fit_bundled_capsules",
                                                  os.path.join(root, "tools", "fit_bundled_capsules.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--check"]) == 0
    info = bundled_robot_info("panda")
    model = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    capsules, notes = link_capsules(model, info["urdf"], link_geometry=info["capsules"])
    assert {c.link for c in capsules} >= {f"panda_link{i}" for i in range(8)} | {"panda_hand"}
    assert all(c.source == "given" or c.link == "panda_hand_tcp" for c in capsules), notes
