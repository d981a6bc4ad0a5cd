"""Robot data several test modules use: Müller and Kumar's Table 1 (the KUKA LBR iiwa 14 as printed), the bundled
iiwa with exactly those inertias, a smooth motion of the bundled UR5 with its joint torques, and a plant's
inverse dynamics along seconds of motion."""
import numpy as np

import robodyn_ros as rd
from robodyn_ros.robots import bundled_robot_info, bundled_urdf_path

# Müller & Kumar 2021, Table 1, typed in again here (independently of tools/make_bundled_urdfs.py):
# m [kg], COM (x, y, z) [m] in the link frame, Θxx, Θxy, Θxz, Θyy, Θyz, Θzz [kg m²] about the COM.
TABLE_1 = np.array([
    [3.94781, -0.00351, 0.00160, -0.03139, 0.00455, 0.00000, -0.00000, 0.00454, 0.00001, 0.00029],
    [4.50275, -0.00767, 0.16669, -0.00355, 0.00032, 0.00000, 0.00000, 0.00010, -0.00000, 0.00042],
    [2.45520, -0.00225, -0.03492, -0.02652, 0.00223, -0.00005, 0.00007, 0.00219, 0.00007, 0.00073],
    [2.61155, 0.00020, -0.05268, 0.03818, 0.03844, 0.00088, -0.00112, 0.01144, -0.00111, 0.04988],
    [3.41000, 0.00005, -0.00237, -0.21134, 0.00277, -0.00001, 0.00001, 0.00284, -0.00000, 0.00012],
    [3.38795, 0.00049, 0.02019, -0.02750, 0.00050, -0.00005, -0.00003, 0.00281, -0.00004, 0.00232],
    [0.35432, -0.03466, -0.02324, 0.07138, 0.00795, 0.00022, -0.00029, 0.01089, -0.00029, 0.00294],
])


def iiwa_as_published():
    """The bundled iiwa 14 with the inertias of Müller and Kumar's Table 1 exactly as printed (the bundled
    file holds the nearest physical ones; the table's links 4 and 7 violate the triangle inequality)."""
    import xml.etree.ElementTree as ET
    root = ET.parse(bundled_urdf_path("iiwa")).getroot()
    for i, row in enumerate(TABLE_1, start=1):
        inertial = root.find(f"link[@name='iiwa_link_{i}']/inertial")
        inertial.find("mass").set("value", repr(float(row[0])))
        inertial.find("origin").set("xyz", " ".join(repr(float(x)) for x in row[1:4]))
        for key, value in zip(("ixx", "ixy", "ixz", "iyy", "iyz", "izz"), row[4:]):
            inertial.find("inertia").set(key, repr(float(value)))
    return ET.tostring(root, encoding="unicode")


def ur5_motion(n=200, rate=100.0):
    """``t, q, v, tau`` of a smooth multi-sine motion about the home pose; tau from our RNEA (compiled:
    :func:`plant_rnea`)."""
    model = rd.Model.from_urdf(bundled_urdf_path("ur5"))
    t = np.arange(n) / rate
    w = 2 * np.pi * np.array([0.3, 0.5, 0.7, 0.9, 1.1, 1.3])
    phase = np.outer(t, w) + np.arange(6)
    q = np.array(bundled_robot_info("ur5")["home"]) + 0.4 * np.sin(phase)
    v, a = 0.4 * w * np.cos(phase), -0.4 * w ** 2 * np.sin(phase)
    tau = plant_rnea(model, q, v, a)
    return model, t, q, v, tau


def plant_rnea(model, Q, V, A):
    """Inverse dynamics (rigid bodies and armature, as ``rd.rnea``) of ``model`` along ``(Q, V, A)`` (N, nv):
    the batch RNEA of the model's compiled kernels (built once per model and kept in the disk cache; compared
    with Pinocchio in test/kernels), for tests that generate a plant's torques over seconds at 1 kHz, where the
    interpreted algorithm costs a millisecond a sample. Nothing is registered: ``rd.*`` of ``model`` stay as
    they were."""
    kernels = rd.compile_kernels(model, parts=("dynamics",), register=False)
    Q, V, A = (np.ascontiguousarray(X, dtype=float) for X in (Q, V, A))
    return kernels.rnea_batch(Q, V, A)


def plant_gravity(model, Q):
    """Gravity torques (N, nv) of ``model`` at the positions ``Q``: :func:`plant_rnea` at rest."""
    zeros = np.zeros((len(Q), model.nv))
    return plant_rnea(model, Q, zeros, zeros)
