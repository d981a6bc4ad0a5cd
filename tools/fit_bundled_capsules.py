#!/usr/bin/env python3
"""Prints the capsules of the bundled robots' links (``robodyn_ros/robots/__init__.py``, ``capsules``): the
bounding capsule of each collision element of example-robot-data's description (the file the bundled URDF
was made from, which keeps its meshes), in the link's frame, rounded outwards to the millimetre (ends to
the nearest millimetre, radius up by the rounding's largest shift and to the next millimetre), so that the
bundled robots keep clear of the floor and of themselves with nothing else installed.

Usage: ``python tools/fit_bundled_capsules.py [--check]``; ``--check`` exits 1 when the table in
``robodyn_ros/robots/__init__.py`` differs from what this script computes.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))
sys.path.insert(0, HERE)

from make_bundled_urdfs import ERD_SOURCES, erd_robots_root  # noqa: E402
from robodyn_ros.model.collision_capsules import collision_element_capsules  # noqa: E402
from robodyn_ros.model.urdf_loader import parse_urdf, read_urdf_source  # noqa: E402


def fitted_capsules(name):
    """``{link: ((a), (b), radius), ...}`` (tuples of floats, m) of bundled robot ``name``."""
    path = os.path.join(erd_robots_root(), ERD_SOURCES[name]["relative"])
    robot, _ = parse_urdf(*read_urdf_source(path), keep_collisions=True)
    table = {}
    for link in robot.links:
        capsules, problems = collision_element_capsules(link, path)
        if problems:
            raise SystemExit(f"{name}: link {link.name}: {'; '.join(problems)}")
        rounded = []
        for a, b, r in capsules:
            a_r, b_r = np.round(a, 3), np.round(b, 3)
            shift = max(np.linalg.norm(a_r - a), np.linalg.norm(b_r - b))
            rounded.append((tuple(float(x) + 0.0 for x in a_r), tuple(float(x) + 0.0 for x in b_r),
                            math.ceil((r + shift) * 1000 - 1e-9) / 1000))
        if rounded:
            table[link.name] = tuple(rounded)
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the bundled table instead of printing")
    args = parser.parse_args(argv)
    from robodyn_ros.robots import bundled_robot_info
    status = 0
    for name in ERD_SOURCES:
        table = fitted_capsules(name)
        if args.check:
            if bundled_robot_info(name)["capsules"] != table:
                print(f"{name}: the bundled capsules differ from the fit; rerun tools/fit_bundled_capsules.py")
                status = 1
            continue
        print(f'    "{name}": {{')
        for link, capsules in table.items():
            if len(capsules) == 1:
                print(f'        "{link}": ({capsules[0]!r},),')
                continue
            print(f'        "{link}": (')
            for capsule in capsules:
                print(f"            {capsule!r},")
            print("        ),")
        print("    },")
    return status


if __name__ == "__main__":
    sys.exit(main())
