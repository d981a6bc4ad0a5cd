#!/usr/bin/env python3
"""Writes the robot descriptions bundled in ``robodyn_ros/robots/`` (panda.urdf, ur5.urdf, iiwa.urdf).

* panda, ur5: copied from example-robot-data (``pip install example-robot-data``) with every ``<visual>``
  and ``<collision>`` element removed, and with them every mesh reference; all other elements and all
  attribute strings (kinematics, inertials, limits, safety controllers, dynamics, transmissions) are kept
  verbatim, so models built from the bundled file and from the source are numerically identical.
* iiwa: the KUKA LBR iiwa 14 R820 written from Müller & Kumar, "Closed-form time derivatives of the
  equations of motion of rigid body systems", Multibody Syst. Dyn. 2021, Sect. 6.2 and Table 1 (link data
  identified by Stürz et al., IFAC 2017), with KUKA data-sheet limits and nominal joint friction.

Usage: ``python tools/make_bundled_urdfs.py [--out DIR] [--check]``; ``--check`` compares instead of writing
and exits 1 if a bundled file is out of date.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import re
import site
import sys
import xml.etree.ElementTree as ET

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, os.pardir, "robodyn_ros", "robots")

# ----------------------------------------------------------------------------------------------- sources
ERD_SOURCES = {
    "panda": {
        "relative": "panda_description/urdf/panda.urdf",
        "readme": "panda_description/README.md",
        "title": "Franka Emika Panda arm with hand; the two fingers are prismatic joints (finger 2 mimics 1)",
    },
    "ur5": {
        "relative": "ur_description/urdf/ur5_robot.urdf",
        "readme": "ur_description/README.md",
        "title": "Universal Robots UR5 (ur5_robot: joint ranges +-2 pi, elbow +-pi)",
    },
}


def erd_robots_root():
    """Folder ``.../cmeel.prefix/share/example-robot-data/robots`` of the installed example-robot-data."""
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    raise SystemExit("example-robot-data is not installed: pip install example-robot-data")


def erd_version():
    """Installed example-robot-data version (from its dist-info), or 'unknown'."""
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        for meta in glob.glob(os.path.join(base, "example_robot_data-*.dist-info", "METADATA")):
            with open(meta, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
    return "unknown"


def readme_fields(path):
    """``upstream`` and ``license`` lines of an example-robot-data robot README (dict, may be empty)."""
    fields = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"\s*(upstream|license)\s*:\s*(\S.*)$", line, re.IGNORECASE)
                if m:
                    fields[m.group(1).lower()] = m.group(2).strip()
    return fields


# ------------------------------------------------------------------------------------- strip visuals
STRIPPED_TAGS = ("visual", "collision")


def strip_visual_and_collision(root):
    """Remove every ``<visual>``/``<collision>`` element, and the comments directly before one (they
    describe the removed geometry), from the tree under ``root``. Returns the number of elements removed."""
    removed = 0
    for parent in list(root.iter()):
        children = list(parent)
        drop = set()
        for k, child in enumerate(children):
            if child.tag in STRIPPED_TAGS:
                drop.add(k)
                j = k - 1
                while j >= 0 and children[j].tag is ET.Comment:
                    drop.add(j)
                    j -= 1
        for k in sorted(drop, reverse=True):
            removed += children[k].tag in STRIPPED_TAGS
            parent.remove(children[k])
    return removed


def leading_comments(text):
    """The comments before the root element of an XML document, as strings without ``<!--``/``-->``."""
    head = text[:text.index("<robot")]
    return [c.strip("\n") for c in re.findall(r"<!--(.*?)-->", head, re.DOTALL)]


def serialize(root, header_comments):
    """XML text: declaration, ``header_comments`` (list of str), then ``root`` indented by two spaces."""
    ET.indent(root, space="  ")
    lines = ['<?xml version="1.0"?>']  # no encoding declaration: lxml (urdf_parser_py) rejects one in a str
    lines += [f"<!--{c}-->" for c in header_comments]
    lines.append(ET.tostring(root, encoding="unicode"))
    return "\n".join(lines) + "\n"


def bundled_from_erd(name):
    """Text of the bundled URDF ``name`` ('panda' or 'ur5') made from example-robot-data."""
    spec = ERD_SOURCES[name]
    root_dir = erd_robots_root()
    src = os.path.join(root_dir, spec["relative"])
    with open(src, encoding="utf-8") as f:
        text = f.read()
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.fromstring(text, parser=parser)
    strip_visual_and_collision(root)
    out_body = ET.tostring(root, encoding="unicode")
    for token in ("<mesh", "package://", ".stl", ".dae", "<visual", "<collision"):
        if token in out_body:
            raise RuntimeError(f"{name}: '{token}' left in the stripped description")
    fields = readme_fields(os.path.join(root_dir, spec["readme"]))
    header = [
        f" robodyn_ros bundled robot description: {name}.\n"
        f"     {spec['title']}.\n"
        f"     Origin: example-robot-data {erd_version()} (https://github.com/Gepetto/example-robot-data),\n"
        f"     file robots/{spec['relative']};\n"
        f"     upstream: {fields.get('upstream', 'see example-robot-data')}.\n"
        f"     Licence of the source description: {fields.get('license', 'see upstream')} (as stated in\n"
        f"     example-robot-data's robots/{spec['readme']}; example-robot-data itself is BSD-3-Clause).\n"
        f"     Modified by tools/make_bundled_urdfs.py (robodyn_ros): all <visual> and <collision> elements,\n"
        f"     and with them every mesh reference, removed; everything else copied verbatim (kinematics,\n"
        f"     inertials, limits, dynamics tags). Regenerate with: python tools/make_bundled_urdfs.py ",
    ]
    header += [" Header of the source file:"] + leading_comments(text)
    return serialize(root, header)


# --------------------------------------------------------------------------------------------- iiwa
# Müller & Kumar 2021, Table 1 (identified by Stürz et al. 2017): per link i = 1..7 the mass m_i [kg],
# the COM ^i c_i [m] in the link-i frame and the inertia tensor Θ_i^c [kg m²] about the COM in link-i
# axes. Columns as printed: m, cx, cy, cz, Θxx, Θxy, Θxz, Θyy, Θyz, Θzz (the extracted header reads
# "Θ_yx" for the seventh column; the symmetric tensor's remaining product is Θxz).
MUELLER_KUMAR_TABLE_1 = """
1 3.94781 -0.00351  0.00160 -0.03139 0.00455  0.00000 -0.00000 0.00454  0.00001 0.00029
2 4.50275 -0.00767  0.16669 -0.00355 0.00032  0.00000  0.00000 0.00010 -0.00000 0.00042
3 2.45520 -0.00225 -0.03492 -0.02652 0.00223 -0.00005  0.00007 0.00219  0.00007 0.00073
4 2.61155  0.00020 -0.05268  0.03818 0.03844  0.00088 -0.00112 0.01144 -0.00111 0.04988
5 3.41000  0.00005 -0.00237 -0.21134 0.00277 -0.00001  0.00001 0.00284 -0.00000 0.00012
6 3.38795  0.00049  0.02019 -0.02750 0.00050 -0.00005 -0.00003 0.00281 -0.00004 0.00232
7 0.35432 -0.03466 -0.02324  0.07138 0.00795  0.00022 -0.00029 0.01089 -0.00029 0.00294
"""

# Sect. 6.2: ^{i-1}r_{i-1,i} = 0 for i = 1, 2, 4, 6, 7; ^2 r_{2,3} = (0, r3, 0); ^4 r_{4,5} = (0, -r5, 0);
# R_{0,1} = I, R_{i-1,i} = Rx(+pi/2) for i = 2, 5, 6 and Rx(-pi/2) for i = 3, 4, 7. The paper leaves r3,
# r5 symbolic: the iiwa 14 R820 values (KUKA data sheet) are r3 = 0.42 m, r5 = 0.40 m; shoulder height
# above the mounting flange 0.36 m, wrist centre to tool flange 0.126 m.
IIWA_SHOULDER_HEIGHT = 0.36
IIWA_R3 = 0.42
IIWA_R5 = 0.40
IIWA_FLANGE = 0.126
IIWA_ROLL = (0.0, math.pi / 2, -math.pi / 2, -math.pi / 2, math.pi / 2, math.pi / 2, -math.pi / 2)
IIWA_OFFSET = ((0.0, 0.0, IIWA_SHOULDER_HEIGHT), (0.0, 0.0, 0.0), (0.0, IIWA_R3, 0.0), (0.0, 0.0, 0.0),
               (0.0, -IIWA_R5, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
# KUKA LBR iiwa 14 R820 data sheet: axis ranges [deg], maximum speeds [deg/s], maximum torques [N m].
IIWA_RANGE_DEG = (170, 120, 170, 120, 170, 120, 175)
IIWA_SPEED_DEG_S = (85, 85, 100, 75, 130, 135, 135)
IIWA_TORQUE_NM = (320, 320, 176, 176, 110, 40, 40)
# Nominal joint friction (not from the paper nor identified): viscous [N m s/rad], Coulomb [N m].
IIWA_DAMPING = (0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1)
IIWA_FRICTION = (0.3, 0.3, 0.3, 0.3, 0.1, 0.1, 0.1)
# Smallest principal second moment of mass about the COM we accept, [kg m²] (see physical_inertia).
SECOND_MOMENT_FLOOR = 1e-6


def parse_table_1():
    """Table 1 as ``(masses (7,), coms (7, 3), inertias (7, 3, 3))`` in kg, m, kg m²."""
    rows = np.array([[float(x) for x in line.split()] for line in MUELLER_KUMAR_TABLE_1.split("\n") if line.strip()])
    m, c = rows[:, 1], rows[:, 2:5]
    xx, xy, xz, yy, yz, zz = rows[:, 5:].T
    inertia = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1), np.stack([xz, yz, zz], -1)], -2)
    return m, c, inertia


def second_moment(inertia):
    """Second moment of mass ``Σ = ∫ r rᵀ dm = ½ tr(I) 1 - I`` (3, 3) of a rotational inertia I (3, 3) about
    the same point. A mass distribution exists iff Σ ⪰ 0, i.e. the principal moments of I satisfy the
    triangle inequalities I_a + I_b >= I_c."""
    return 0.5 * np.trace(inertia) * np.eye(3) - inertia


def physical_inertia(inertia, floor=SECOND_MOMENT_FLOOR):
    """``(I', changed)``: I (3, 3) about the COM unchanged if the eigenvalues of Σ = ½ tr(I) 1 - I are all >=
    ``floor``, else the inertia whose Σ' has Σ's eigenvectors and eigenvalues max(σ_k, floor):
    I' = tr(Σ') 1 - Σ'. Raising σ_k by δ adds δ to the two principal moments about the axes normal to
    eigenvector k, the smallest change that gives a strictly physical (Σ ≻ 0) body."""
    sigma, vectors = np.linalg.eigh(second_moment(inertia))
    if sigma.min() >= floor:
        return inertia.copy(), False
    s = (vectors * np.maximum(sigma, floor)) @ vectors.T
    out = np.trace(s) * np.eye(3) - s
    return 0.5 * (out + out.T), True


def _fmt(x):
    """Shortest float text that reads back to ``x`` (-0.0 written as 0)."""
    x = float(x)
    return "0" if x == 0.0 else repr(x)


def _xyz(v):
    return " ".join(_fmt(x) for x in v)


def bundled_iiwa():
    """Text of the bundled iiwa.urdf (see the module docstring)."""
    masses, coms, inertias = parse_table_1()
    robot = ET.Element("robot", name="iiwa14")
    robot.append(ET.Comment(
        " iiwa_link_0: the fixed base (mounting flange on the floor). Table 1 gives no base inertia; a fixed\n"
        "       base's inertia does not enter the joint-space dynamics, so none is written. "))
    ET.SubElement(robot, "link", name="iiwa_link_0")
    corrections = []
    parent = "iiwa_link_0"
    for i in range(7):
        link, joint = f"iiwa_link_{i + 1}", f"iiwa_joint_{i + 1}"
        j = ET.SubElement(robot, "joint", name=joint, type="revolute")
        ET.SubElement(j, "parent", link=parent)
        ET.SubElement(j, "child", link=link)
        ET.SubElement(j, "origin", xyz=_xyz(IIWA_OFFSET[i]), rpy=_xyz((IIWA_ROLL[i], 0.0, 0.0)))
        ET.SubElement(j, "axis", xyz="0 0 1")
        rng = math.radians(IIWA_RANGE_DEG[i])
        ET.SubElement(j, "limit", lower=_fmt(-rng), upper=_fmt(rng), velocity=_fmt(math.radians(IIWA_SPEED_DEG_S[i])),
                      effort=_fmt(IIWA_TORQUE_NM[i]))
        j.append(ET.Comment(" nominal friction: plausible small values, not identified "))
        ET.SubElement(j, "dynamics", damping=_fmt(IIWA_DAMPING[i]), friction=_fmt(IIWA_FRICTION[i]))

        inertia, changed = physical_inertia(inertias[i])
        lk = ET.SubElement(robot, "link", name=link)
        if changed:
            delta = np.abs(inertia - inertias[i]).max()
            corrections.append((i + 1, delta))
            sigma = ", ".join(f"{s:.3e}" for s in np.linalg.eigvalsh(second_moment(inertias[i])))
            lk.append(ET.Comment(
                f" Table 1's inertia of link {i + 1}: second moments of mass about the COM (eigenvalues of\n"
                f"         1/2 tr(I) 1 - I) {sigma} kg m2; those below {SECOND_MOMENT_FLOOR:g} raised to it\n"
                f"         (physical_inertia in tools/make_bundled_urdfs.py): entries change by <= {delta:.2e} kg m2. "))
        inertial = ET.SubElement(lk, "inertial")
        ET.SubElement(inertial, "origin", xyz=_xyz(coms[i]), rpy="0 0 0")
        ET.SubElement(inertial, "mass", value=_fmt(masses[i]))
        I = np.round(inertia, 12)
        ET.SubElement(inertial, "inertia", ixx=_fmt(I[0, 0]), ixy=_fmt(I[0, 1]), ixz=_fmt(I[0, 2]),
                      iyy=_fmt(I[1, 1]), iyz=_fmt(I[1, 2]), izz=_fmt(I[2, 2]))
        parent = link
    j = ET.SubElement(robot, "joint", name="iiwa_joint_ee", type="fixed")
    ET.SubElement(j, "parent", link="iiwa_link_7")
    ET.SubElement(j, "child", link="iiwa_link_ee")
    ET.SubElement(j, "origin", xyz=_xyz((0.0, 0.0, IIWA_FLANGE)), rpy="0 0 0")
    robot.append(ET.Comment(" iiwa_link_ee: the tool flange (massless frame) "))
    ET.SubElement(robot, "link", name="iiwa_link_ee")

    corrected = ",\n       ".join(f"link {k} (entries change by <= {d:.2e} kg m2)" for k, d in corrections) or "none"
    header = [
        " robodyn_ros bundled robot description: iiwa (KUKA LBR iiwa 14 R820), no meshes.\n"
        "     Written by tools/make_bundled_urdfs.py (robodyn_ros, BSD-3-Clause) from:\n"
        "     * link frames, masses, centres of mass and inertias: A. Mueller, S. Kumar, \"Closed-form time\n"
        "       derivatives of the equations of motion of rigid body systems\", Multibody System Dynamics\n"
        "       (2021), Sect. 6.2 and Table 1, which lists the parameters identified by Y. R. Stuerz,\n"
        "       L. M. Affolter, R. S. Smith, \"Parameter identification of the KUKA LBR iiwa robot including\n"
        "       constraints on physical feasibility\", IFAC-PapersOnLine 50(1), 2017.\n"
        "       Frames (modified DH, joint axis = z): frame i-1 to frame i is a rotation Rx(+pi/2) for i = 2, 5, 6,\n"
        "       Rx(-pi/2) for i = 3, 4, 7, with offsets r3 = 0.42 m (frame 2, +y) and r5 = 0.40 m (frame 4, -y).\n"
        "       The paper's frame 0 coincides with frame 1 at the shoulder; here iiwa_link_0 is the mounting\n"
        "       flange 0.36 m below it (a constant base offset: the dynamics are unchanged).\n"
        "       COMs in link frames, inertias about the COM in link axes (as in the paper and in URDF).\n"
        "       Inertias adjusted to be physically realisable (Table 1 values on or past the triangle-\n"
        f"       inequality boundary): {corrected}.\n"
        "     * lengths r3, r5, shoulder height 0.36 m, flange 0.126 m, joint ranges (+-170, 120, 170, 120, 170,\n"
        "       120, 175 deg), maximum speeds (85, 85, 100, 75, 130, 135, 135 deg/s) and torques (320, 320, 176,\n"
        "       176, 110, 40, 40 N m): KUKA LBR iiwa 14 R820 data sheet values.\n"
        "     * <dynamics> damping/friction: NOMINAL small values, not identified. ",
    ]
    return serialize(robot, header)


# --------------------------------------------------------------------------------------------- main
def build_all():
    """``{file name: text}`` of every bundled description."""
    return {"panda.urdf": bundled_from_erd("panda"), "ur5.urdf": bundled_from_erd("ur5"), "iiwa.urdf": bundled_iiwa()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: robodyn_ros/robots)")
    p.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = p.parse_args(argv)
    stale = []
    for name, text in build_all().items():
        path = os.path.join(args.out, name)
        if args.check:
            old = open(path, encoding="utf-8").read() if os.path.isfile(path) else None
            if old != text:
                stale.append(path)
            continue
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {os.path.normpath(path)}")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
