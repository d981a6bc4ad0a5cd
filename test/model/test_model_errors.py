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
    (urdf(good_links(), [JOINT.format(name="j1", parent="base", child="l1").replace("revolute", "planar"),
                         JOINT.format(name="j2", parent="l1", child="l2")]), "'j1'"),
    (urdf(good_links(), [JOINT.format(name="j1", parent="base", child="l1").replace("0 0 1", "0 0 0"),
                         JOINT.format(name="j2", parent="l1", child="l2")]), "'j1'"),
])
def test_bad_urdf_raises_model_error_naming_culprit(source, culprit):
    with pytest.raises(rd.ModelError) as info:
        rd.Model.from_urdf(source)
    assert culprit in str(info.value)


@pytest.mark.parametrize("links, culprit", [
    (good_links(ixx=-0.5), "'l2' has an inertia that is not positive definite"),
    (good_links(ixx=5.0), "'l2' has an inertia violating the triangle inequality"),
    (good_links()[:2] + ["<link name='l2'><inertial><mass value='0'/><inertia ixx='0.1' ixy='0' ixz='0' iyy='0.1' "
                         "iyz='0' izz='0.1'/></inertial></link>"], "'l2' has zero mass but a nonzero inertia"),
])
def test_non_physical_inertia_loads_with_note_and_warning_strict_refuses(links, culprit):
    """Finite non-physical inertias load as Pinocchio loads them (the same parameters), named in
    ``model.notes`` and in a warning; ``strict=True`` refuses them with the message naming the link."""
    import pinocchio as pin
    xml = urdf(links, good_joints())
    with pytest.warns(rd.model.errors.NonPhysicalInertiaWarning, match="'l2'"):
        m = rd.Model.from_urdf(xml)
    assert any(culprit in n for n in m.notes), m.notes
    pm = pin.buildModelFromXML(xml)
    q = np.array([0.3, -0.4])
    M = pin.crba(pm, pm.createData(), q)
    np.testing.assert_allclose(rd.crba(m, q), np.triu(M) + np.triu(M, 1).T, rtol=1e-12, atol=1e-14)
    with pytest.raises(rd.ModelError, match=culprit):
        rd.Model.from_urdf(xml, strict=True)


def test_moving_body_without_inertia_is_named_and_aba_refuses():
    """A joint whose subtree has no inertia makes M singular: the load names the link and joint in
    ``model.notes`` and warns, ``strict=True`` refuses it, and ``aba``/``aba_derivatives`` raise ModelError
    naming the body instead of returning inf/NaN or a bare LinAlgError; with armature on that joint the
    model is regular again and ``aba`` inverts ``crba``."""
    links = good_links()[:2] + ["<link name='l2'/>"]
    xml = urdf(links, good_joints())
    with pytest.warns(rd.model.errors.NonPhysicalInertiaWarning, match="'j2'"):
        m = rd.Model.from_urdf(xml)
    assert any("'l2' moved by joint 'j2'" in n for n in m.notes), m.notes
    with pytest.raises(rd.ModelError, match="'l2'.*'j2'"):
        rd.Model.from_urdf(xml, strict=True)
    q, v, tau = np.array([0.3, -0.4]), np.array([0.5, 1.0]), np.array([1.0, 0.0])
    for f in (rd.aba, rd.aba_derivatives):
        with pytest.raises(rd.ModelError, match="body 'l2' \\(joint 'j2'\\) is singular"):
            f(m, q, v, tau)
    m2 = m.with_armature({"j2": 0.01})
    a = rd.aba(m2, q, v, tau)
    np.testing.assert_allclose(rd.crba(m2, q) @ a + rd.nonlinear_effects(m2, q, v), tau, atol=1e-12)


def test_compiled_aba_refuses_a_singular_articulated_inertia_naming_the_body():
    """The compiled kernels divide by ``D = 0`` (inf/NaN out); the public functions check their output
    and name the body, as the interpreted algorithm does."""
    xml = urdf(good_links()[:2] + ["<link name='l2'/>"], good_joints())
    with pytest.warns(rd.model.errors.NonPhysicalInertiaWarning):
        m = rd.Model.from_urdf(xml)
    kernels = rd.compile_kernels(m)
    q, v, tau = np.array([0.3, -0.4]), np.array([0.5, 1.0]), np.array([1.0, 0.0])
    assert not np.all(np.isfinite(kernels.aba(q, v, tau)))       # the raw kernel: what users got before
    for f in (rd.aba, rd.aba_derivatives):
        with pytest.raises(rd.ModelError, match="body 'l2' \\(joint 'j2'\\) is singular"):
            f(m, q, v, tau)
    np.testing.assert_allclose(rd.rnea(m, q, v, np.zeros(2)), rd.rnea(m, q, v, np.zeros(2), pi=m.inertial_parameters()))


@pytest.mark.parametrize("armature", [np.nan, np.inf, -0.1, -np.inf, "abc"])
def test_bad_armature_is_refused_naming_the_joint(armature):
    m = rd.Model.from_urdf(urdf(good_links(), good_joints()))
    for value in (armature, {"j2": armature}):
        with pytest.raises((rd.ModelError, ValueError), match="armature"):
            m.with_armature(value)
    with pytest.raises(rd.ModelError, match="'j1'|'j2'"):
        rd.Model.from_urdf(urdf(good_links(), good_joints()), armature={"j2": armature})


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, "abc", None, [0.1, 0.2]])
def test_bad_locked_joint_value_is_refused_naming_the_joint(value):
    with pytest.raises(rd.ModelError, match="'j2'"):
        rd.Model.from_urdf(urdf(good_links(), good_joints()), locked_joints={"j2": value})


def test_parts_dynamics_never_reads_never_fail_the_load():
    """A ``<texture>`` without a file name, a ``<transmission>`` without a type, a broken ``<visual>``,
    ``<gazebo>``, ``<calibration>`` garbage: the model loads, equal to the one without them."""
    clean = urdf(good_links(), good_joints())
    noisy = clean.replace("<link name='base'/>", "<material name='grey'><texture/></material><link name='base'>"
                          "<visual><geometry><mesh/></geometry><material name='m'><texture/></material></visual>"
                          "</link><transmission name='t'><joint name='j1'/></transmission><gazebo>x</gazebo>")
    noisy = noisy.replace("<axis xyz=\"0 0 1\"/>", "<axis xyz=\"0 0 1\"/><calibration rising='abc'/>"
                          "<safety_controller k_velocity='x'/>")
    a, b = rd.Model.from_urdf(clean), rd.Model.from_urdf(noisy)
    assert a.fingerprint() == b.fingerprint()


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
