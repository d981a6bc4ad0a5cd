"""An independent clearance check of a joint trajectory: Pinocchio's forward kinematics and coal's
collision test on a URDF's own collision geometry (meshes as loaded by assimp, primitives as they are),
with none of robodyn_ros's capsules, kinematics or constraint code.

Floor: the lowest point of every collision geometry (mesh vertices, box corners, sphere and cylinder
extremes) and the origin of every link frame, above the plane z = 0 of the base frame. Exempt, because
no motion can change their height or lift them: the geometry fixed to the base or turned only about
vertical axes, and the joint housing of the first joint with a horizontal axis (the points of its link
within ``HOUSING`` of that axis, whose height is fixed), reported separately.

Self-collision: coal's exact collision test between the geometries of links that are not parent and
child (after Pinocchio's own fixed-joint merging), except the pairs already in contact at the reference
configuration (zero clipped into the joint limits; ``permanent``): vendor meshes that interpenetrate by
design, the pairs MoveIt's setup assistant disables with reason "Default"; and, given the robot's SRDF, the
pairs it disables (``disabled``; Baxter's upper shoulder and upper elbow, whose meshes meet when the elbow
turns, disabled by its vendor's configuration).
"""
import xml.etree.ElementTree as ET
import os

import numpy as np

HOUSING = 0.10
"""m: radius about the first horizontal joint axis within which a link's points belong to its housing."""


def _package_dirs(urdf):
    """The folder holding the URDF's ``package://`` packages (example-robot-data's share folder)."""
    folder = os.path.dirname(os.path.abspath(urdf))
    while os.path.basename(folder) not in ("example-robot-data", "") and folder != os.path.dirname(folder):
        folder = os.path.dirname(folder)
    return [os.path.dirname(folder)]


class MeshClearance:
    """Pinocchio model and collision geometry of ``urdf``; ``check(names, Q)`` evaluates configurations
    given as (N, n) arrays in the order of joint ``names`` (other joints at 0)."""

    def __init__(self, urdf, srdf=None):
        import pinocchio as pin
        self.pin = pin
        self.model = pin.buildModelFromUrdf(urdf)
        self.geometry = pin.buildGeomFromUrdf(self.model, urdf, pin.GeometryType.COLLISION,
                                              package_dirs=_package_dirs(urdf))
        self.data, self.geometry_data = self.model.createData(), self.geometry.createData()
        self.points = [self._local_points(g.geometry) for g in self.geometry.geometryObjects]
        self.housing_joint = self._first_horizontal_joint()
        self.exempt = [self._fixed_height(g.parentJoint) for g in self.geometry.geometryObjects]
        self.frames = [f for f in self.model.frames if f.parentJoint > 0 and not self._fixed_height(f.parentJoint)]
        parent = self.model.parents
        disabled = set()
        if srdf is not None:
            for item in ET.parse(srdf).getroot().iter("disable_collisions"):
                disabled.add(frozenset((item.get("link1"), item.get("link2"))))
        link = lambda g: g.name.rsplit("_", 1)[0]  # noqa: E731  (pinocchio names geometry LINK_k)
        self.disabled = []
        pairs = []
        for i, a in enumerate(self.geometry.geometryObjects):
            for j, b in enumerate(self.geometry.geometryObjects[:i]):
                ja, jb = a.parentJoint, b.parentJoint
                if ja != jb and parent[ja] != jb and parent[jb] != ja:
                    if frozenset((link(a), link(b))) in disabled:
                        self.disabled.append((b.name, a.name))
                    else:
                        pairs.append((j, i))
        for j, i in pairs:
            self.geometry.addCollisionPair(pin.CollisionPair(j, i))
        self.geometry_data = self.geometry.createData()
        # pairs in contact at the reference configuration: vendor meshes that interpenetrate by design
        # (MoveIt's "Default" reason for disabling a pair in an SRDF)
        names = [g.name for g in self.geometry.geometryObjects]
        reference = np.clip(pin.neutral(self.model), self.model.lowerPositionLimit, self.model.upperPositionLimit)
        pin.computeCollisions(self.model, self.data, self.geometry, self.geometry_data, reference, False)
        contact = [r.isCollision() for r in self.geometry_data.collisionResults]
        self.permanent = [(names[j], names[i]) for (j, i), c in zip(pairs, contact) if c]
        self.pairs = [p for p, c in zip(pairs, contact) if not c]
        self.geometry.removeAllCollisionPairs()
        for j, i in self.pairs:
            self.geometry.addCollisionPair(pin.CollisionPair(j, i))
        self.geometry_data = self.geometry.createData()

    @staticmethod
    def _local_points(shape):
        """Points (k, 3) whose lowest one is the shape's lowest in any orientation (spheres and cylinders
        are handled exactly in :meth:`_lowest`)."""
        kind = type(shape).__name__
        if hasattr(shape, "vertices"):
            return np.array(shape.vertices())
        if kind == "Box":
            h = np.array(shape.halfSide)
            return h * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        return np.zeros((1, 3))

    def _axis_world(self, joint):
        return self.data.oMi[joint].rotation @ self._axis(joint)

    def _axis(self, joint):
        """Rotation axis of a revolute ``joint`` in its own frame (zero for a prismatic joint)."""
        return np.asarray(self.data.joints[joint].S).reshape(6, -1)[3:, 0]

    def _vertical_chain(self, joint):
        """Whether every joint from the base to ``joint`` (included) is revolute about the vertical."""
        self.pin.forwardKinematics(self.model, self.data, self.pin.neutral(self.model))
        while joint > 0:
            if abs(abs(self._axis_world(joint) @ np.array([0.0, 0.0, 1.0])) - 1.0) > 1e-9:
                return False
            joint = self.model.parents[joint]
        return True

    def _fixed_height(self, joint):
        return joint == 0 or self._vertical_chain(joint)

    def _first_horizontal_joint(self):
        for joint in range(1, self.model.njoints):
            if not self._vertical_chain(joint) and self._vertical_chain(self.model.parents[joint]):
                return joint
        return None

    def configuration(self, names, q):
        """Pinocchio's q for joint values ``q`` (n,) named ``names`` (continuous joints as cos, sin)."""
        full = self.pin.neutral(self.model)
        for name, value in zip(names, q):
            joint = self.model.joints[self.model.getJointId(name)]
            if joint.nq == 2:
                full[joint.idx_q:joint.idx_q + 2] = np.cos(value), np.sin(value)
            else:
                full[joint.idx_q] = value
        return full

    def _lowest(self, k, placement):
        g = self.geometry.geometryObjects[k].geometry
        kind = type(g).__name__
        R, p = placement.rotation, placement.translation
        if kind == "Sphere":
            return p[2] - g.radius
        if kind == "Cylinder":
            c = abs(R[2, 2])
            return p[2] - g.halfLength * c - g.radius * np.sqrt(max(0.0, 1 - c * c))
        if kind == "Capsule":
            return p[2] - g.halfLength * abs(R[2, 2]) - g.radius
        return float(np.min(self.points[k] @ R[2] + p[2]))

    def check(self, names, Q):
        """Dict: ``floor`` (smallest height of the checked geometry and origins, m), ``floor_what`` (the
        geometry or frame at the minimum), ``origin`` and ``origin_what`` (the same for the link frame
        origins alone), ``extent`` (lowest and highest x, y, z of the mesh vertices and box corners of the
        moving links), ``housing`` (smallest height of the exempt housing points),
        ``below`` (fraction of samples with something checked below 5 cm), ``collisions`` (number of
        samples with a self-collision) and ``collision_pairs`` (the geometry names in contact)."""
        pin = self.pin
        floor, what, housing, below, collided, pairs = np.inf, "", np.inf, 0, 0, set()
        origin, origin_what = np.inf, ""
        low, high = np.full(3, np.inf), np.full(3, -np.inf)
        names_of = [g.name for g in self.geometry.geometryObjects]
        for q in Q:
            full = self.configuration(names, q)
            pin.framesForwardKinematics(self.model, self.data, full)
            pin.updateGeometryPlacements(self.model, self.data, self.geometry, self.geometry_data)
            lowest_here = np.inf
            for k, g in enumerate(self.geometry.geometryObjects):
                M = self.geometry_data.oMg[k]
                if g.parentJoint > 0 and len(self.points[k]) > 1:
                    world = self.points[k] @ M.rotation.T + M.translation
                    low, high = np.minimum(low, world.min(axis=0)), np.maximum(high, world.max(axis=0))
                if self.exempt[k]:
                    continue
                if k in self._housing_geometry():
                    world = self.points[k] @ M.rotation.T + M.translation
                    near = self._near_housing_axis(world)
                    if np.any(near):
                        housing = min(housing, float(world[near, 2].min()))
                    if np.all(near):
                        continue
                    z = float(world[~near, 2].min())
                else:
                    z = self._lowest(k, M)
                if z < lowest_here:
                    lowest_here, here = z, names_of[k]
            for f in self.frames:
                z = float(self.data.oMf[self.model.getFrameId(f.name)].translation[2])
                if z < origin:
                    origin, origin_what = z, f.name
                if z < lowest_here:
                    lowest_here, here = z, f"origin of {f.name}"
            if lowest_here < floor:
                floor, what = lowest_here, here
            below += lowest_here < 0.05
            if self.pairs:
                pin.computeCollisions(self.model, self.data, self.geometry, self.geometry_data, full, False)
                hits = [self.pairs[r] for r, res in enumerate(self.geometry_data.collisionResults) if res.isCollision()]
                collided += bool(hits)
                pairs |= {(names_of[a], names_of[b]) for a, b in hits}
        return {"floor": floor, "floor_what": what, "housing": housing, "below": below / len(Q),
                "collisions": collided, "collision_pairs": sorted(pairs), "origin": origin, "origin_what": origin_what,
                "extent": (low, high)}

    def _housing_geometry(self):
        if self.housing_joint is None:
            return set()
        return {k for k, g in enumerate(self.geometry.geometryObjects) if g.parentJoint == self.housing_joint}

    def _near_housing_axis(self, world):
        M = self.data.oMi[self.housing_joint]
        axis = self._axis_world(self.housing_joint)
        offset = world - M.translation
        return np.linalg.norm(offset - np.outer(offset @ axis, axis), axis=1) <= HOUSING
