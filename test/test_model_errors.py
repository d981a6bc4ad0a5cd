"""Bad input gives ModelError (or ValueError for shapes) naming the culprit, and nothing else."""
import numpy as np
import pytest

import robodyn_ros as rd

LINK = """<link name="{name}"><inertial><origin xyz="0 0 0.1"/><mass value="{mass}"/>
  <inertia ixx="{ixx}" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>"""
JOINT = """<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>
  <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="2"/></joint>"""


def urdf(links, joints):
    return "<robot name='bad'>" + "".join(links) + "".join(joints) + "</robot>"


def good_links(mass=1.0, ixx=0.1):
    return ["<link name='base'/>", LINK.format(name="l1", mass=1.0, ixx=0.1), LINK.format(name="l2", mass=mass, ixx=ixx)]


def good_joints():
    return [JOINT.format(name="j1", parent="base", child="l1"), JOINT.format(name="j2", parent="l1", child="l2")]


def test_good_model_loads():
    m = rd.Model.from_urdf(urdf(good_links(), good_joints()))
    assert m.joint_names == ("j1", "j2") and m.body_names == ("l1", "l2")


@pytest.mark.parametrize("source, culprit", [
    ("/nonexistent/robot.urdf", "/nonexistent/robot.urdf"),
    ("<robot name='x'><link name='a'></robot>", "malformed"),
    (urdf(good_links(), [JOINT.format(name="j1", parent="base", child="l1"),
                         JOINT.format(name="j2", parent="nolink", child="l2")]), "'j2'"),
    (urdf(good_links(), [JOINT.format(name="j1", parent="base", child="l1"),
                         JOINT.format(name="j2", parent="l1", child="ghost")]), "'ghost'"),
    (urdf(good_links(), good_joints() + [JOINT.format(name="j3", parent="l2", child="l1")]), "kinematic loop"),
    (urdf(good_links(mass=-2.0), good_joints()), "'l2'"),
    (urdf(good_links(ixx=-0.5), good_joints()), "'l2'"),
    (urdf(good_links(ixx=5.0), good_joints()), "triangle inequality"),
    (urdf(good_links(), [JOINT.format(name="j1", parent="base", child="l1").replace("revolute", "planar"),
                         JOINT.format(name="j2", parent="l1", child="l2")]), "'j1'"),
    (urdf(good_links(), [JOINT.format(name="j1", parent="base", child="l1").replace("0 0 1", "0 0 0"),
                         JOINT.format(name="j2", parent="l1", child="l2")]), "'j1'"),
])
def test_bad_urdf_raises_model_error_naming_culprit(source, culprit):
    with pytest.raises(rd.ModelError) as info:
        rd.Model.from_urdf(source)
    assert culprit in str(info.value)


def test_parser_warnings_do_not_reach_the_terminal(capfd):
    xml = urdf(good_links(), good_joints()).replace("<axis", "<dynamics damping='0.1' unknown_attr='1'/><axis")
    m = rd.Model.from_urdf(xml)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert any("unknown_attr" in n for n in m.notes)


def test_nan_and_shape_errors():
    m = rd.Model.from_urdf(urdf(good_links(), good_joints()))
    with pytest.raises(rd.ModelError, match=r"q\[1\]"):
        rd.rnea(m, np.array([0.0, np.nan]), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match=r"v has shape \(3,\)"):
        rd.rnea(m, np.zeros(2), np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="f_ext"):
        rd.rnea(m, np.zeros(2), np.zeros(2), np.zeros(2), f_ext=np.zeros((3, 6)))
    with pytest.raises(rd.ModelError, match="tau"):
        rd.aba(m, np.zeros(2), np.zeros(2), np.array([np.inf, 0.0]))


def test_unknown_names():
    m = rd.Model.from_urdf(urdf(good_links(), good_joints()))
    with pytest.raises(rd.ModelError, match="nolink"):
        rd.frame_placement(m, np.zeros(2), "nolink")
    with pytest.raises(rd.ModelError, match="jx"):
        m.with_armature({"jx": 0.1})
    with pytest.raises(rd.ModelError, match="jx"):
        rd.Model.from_urdf(urdf(good_links(), good_joints()), locked_joints={"jx": 0.0})


def test_model_is_read_only():
    m = rd.Model.from_urdf(urdf(good_links(), good_joints()))
    with pytest.raises(ValueError):
        m.inertias[0, 0] = 3.0
    m2 = m.with_inertial_parameters(m.inertial_parameters() * 2)
    assert m.inertias[0, 0] == 1.0 and m2.inertias[0, 0] == 2.0
