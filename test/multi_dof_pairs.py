"""Model pairs (ours, Pinocchio's) with floating bases and multi-DoF joints, for the tests that compare them:
free-flyer robots of example-robot-data and seeded random trees built with the model builder, mirrored into
Pinocchio joint by joint."""
import os

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import PinBridge, erd_path, load_pair
from robodyn_ros.model.model_builder import random_tree_model

pin = pytest.importorskip("pinocchio")

# free-flyer test robots: a humanoid and two quadrupeds
FLOATING = {"talos": "talos_data/robots/talos_reduced.urdf", "solo12": "solo_description/robots/solo12.urdf",
            "a1": "a1_description/urdf/a1.urdf"}


def floating_pair(name):
    """``(ours, Pinocchio)`` free-flyer models; Pinocchio's root joint is ``root_joint`` (id 1)."""
    if name == "talos":
        return load_pair("talos", floating_base=True)
    path = erd_path(FLOATING[name])
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    return rd.Model.from_urdf(path, floating_base=True), pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())


def pinocchio_mirror(model):
    """A Pinocchio model with the same joints, placements and inertias as our (builder-made) model."""
    pm = pin.Model()
    pm.gravity = pin.Motion(np.asarray(model.gravity), np.zeros(3))
    ids = []
    for i, joint in enumerate(model.joints):
        jm = {"revolute": lambda: pin.JointModelRevoluteUnaligned(joint.axis),
              "prismatic": lambda: pin.JointModelPrismaticUnaligned(joint.axis),
              "spherical": pin.JointModelSpherical, "free_flyer": pin.JointModelFreeFlyer}[joint.kind]()
        lam = model.parents[i]
        jid = pm.addJoint(0 if lam < 0 else ids[lam], jm, pin.SE3(*model.placements[i]), model.joint_names[i])
        pm.appendBodyToJoint(jid, pin.Inertia.FromDynamicParameters(model.inertias[i]), pin.SE3.Identity())
        ids.append(jid)
    pm.armature = PinBridge(model, pm).v(model.armature)
    return pm


# joint kinds and parents (depth-first order, as Pinocchio requires) of the random trees
TREES = {
    "spherical_chain": (["spherical", "revolute", "spherical", "prismatic"], None),
    "spherical_tree": (["spherical", "revolute", "spherical", "prismatic", "revolute", "spherical"], [None, 0, 1, 2, 0, 4]),
    "free_flyer_tree": (["free_flyer", "spherical", "revolute", "revolute", "spherical", "prismatic"], [None, 0, 1, 0, 3, 0]),
}


def tree_pair(name, seed=7):
    kinds, parents = TREES[name]
    ours = random_tree_model(np.random.default_rng(seed), kinds, parents).with_armature(0.0)
    return ours, pinocchio_mirror(ours)


def symmetric(upper):
    return np.triu(upper) + np.triu(upper, 1).T
