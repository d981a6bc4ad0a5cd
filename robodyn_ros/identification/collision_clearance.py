"""Clearances of a robot's capsules (:mod:`robodyn_ros.model.collision_capsules`) to planes (a floor or
table, the faces of a workspace box) and to each other, for many configurations at once, with their
gradients: the constraints that keep an exciting trajectory off the floor and out of self-collision.

Per configuration q (batched forward kinematics, every capsule end point P(q) in the base frame):

* plane (unit normal n, surface ``n . x = h``, clearance c): ``g = n . P - r - h - c >= 0`` for both
  end points of every capsule (the capsule is the convex hull of its two end spheres, so it keeps the
  clearance iff they do). An end point whose distance to the plane no joint changes is left out (its
  velocity along n is zero at every configuration, checked at random ones): the base's, those turned
  only about axes parallel to n (a first link turning about the vertical), and those on the axis of a
  horizontal joint at fixed height (a shoulder housing, see
  :data:`robodyn_ros.model.collision_capsules.AXIS_SNAP`);
* pair of capsules on bodies that are not parent and child: ``g = |C1 - C2| - r1 - r2 - c_self >= 0``
  with C1, C2 the closest points of the two segments (Ericson, "Real-Time Collision Detection" 2005,
  sec. 5.1.9). Pairs that overlap in most of the joint ranges (capsules about a short link between them,
  vendor meshes that interpenetrate) are not checked; :attr:`ClearanceModel.unchecked_pairs` names them.

Gradients: the velocity of a point P fixed to body b is ``sum_j (v_j + w_j x P) qdot_j`` over the joints j
that move b, ``[v_j; w_j]`` the joint's axis in the base frame about the base origin; the distance of two
segments varies with the velocity of its closest points along their separation (their parameters are
stationary). The design constraints use a smooth lower bound of the minimum over a family of rows
(Kreisselmeier-Steinhauser: ``min g - log(sum exp(-rho (g - min g))) / rho``); the checks use the exact
minimum.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError
from .batch_regressor import batch_parent_placements, batch_world_joint_axes, batch_world_placements

SMOOTHING = 200.0
"""rho (1/m) of the Kreisselmeier-Steinhauser lower bound: it is below the minimum by at most
log(rows within a few millimetres of the minimum) / rho."""


@dataclass(frozen=True)
class Plane:
    """A surface ``normal . x = surface`` (base frame, unit normal, m) that every capsule must keep
    ``clearance`` (m) away from, on the side the normal points to; ``name`` for messages ("floor",
    "workspace x max", ...)."""

    name: str
    normal: np.ndarray
    surface: float
    clearance: float = 0.0

    @property
    def description(self):
        """``floor at z = 0.000 m``: the name and where the surface is."""
        axis = int(np.argmax(np.abs(self.normal)))
        if abs(self.normal[axis]) < 1.0 - 1e-12:
            return f"{self.name} (normal {self.normal.round(3).tolist()}, offset {self.surface:.3f} m)"
        return f"{self.name} at {'xyz'[axis]} = {np.sign(self.normal[axis]) * self.surface:.3f} m"

    @property
    def offset(self):
        """h of the constraint ``normal . x >= h`` on the capsules' points."""
        return self.surface + self.clearance


@dataclass(frozen=True)
class ClearanceReport:
    """Smallest distances over a set of samples: ``planes`` maps a plane's name to (distance of the
    nearest capsule to the surface (m), its link, the sample index); ``self_distance`` (m, surface to
    surface) between the nearest checked pair ``self_pair`` (link names) at sample ``self_index``."""

    planes: dict
    self_distance: float
    self_pair: tuple
    self_index: int


def segment_closest_parameters(A1, B1, A2, B2):
    """Parameters s, t in [0, 1] of the closest points ``A1 + s (B1 - A1)``, ``A2 + t (B2 - A2)`` of two
    segments (arrays (..., 3); Ericson 2005, sec. 5.1.9, with degenerate segments as points)."""
    d1, d2, r = B1 - A1, B2 - A2, A1 - A2
    a, e = np.sum(d1 * d1, -1), np.sum(d2 * d2, -1)
    b, c, f = np.sum(d1 * d2, -1), np.sum(d1 * r, -1), np.sum(d2 * r, -1)
    tiny = 1e-12
    a_safe, e_safe = np.where(a > tiny, a, 1.0), np.where(e > tiny, e, 1.0)
    denom = a * e - b * b
    s = np.where(denom > tiny * np.maximum(a * e, tiny), np.clip((b * f - c * e) / np.where(denom > 0, denom, 1.0), 0, 1), 0.0)
    t = (b * s + f) / e_safe
    s = np.where(t < 0, np.clip(-c / a_safe, 0, 1), np.where(t > 1, np.clip((b - c) / a_safe, 0, 1), s))
    t = np.clip(t, 0, 1)
    # degenerate segments: a point against a segment, or two points
    s = np.where(a <= tiny, 0.0, np.where(e <= tiny, np.clip(-c / a_safe, 0, 1), s))
    t = np.where(e <= tiny, 0.0, np.where(a <= tiny, np.clip(f / e_safe, 0, 1), t))
    return s, t


class ClearanceModel:
    """Capsules, planes and checked pairs of one robot (module docstring); build it with
    :func:`clearance_model`. Configurations Q are (N, nq) arrays in ``model.joint_names`` order."""

    def __init__(self, model, capsules, planes, pairs, self_clearance, unchecked_pairs=()):
        self.model, self.capsules, self.planes = model, tuple(capsules), tuple(planes)
        self.pairs, self.self_clearance = tuple(pairs), float(self_clearance)
        self.unchecked_pairs = tuple(unchecked_pairs)
        n_caps = len(self.capsules)
        self._local = np.array([[c.a, c.b] for c in self.capsules]).reshape(2 * n_caps, 3)
        self._bodies = np.repeat([c.body for c in self.capsules], 2)
        self._radius = np.array([c.radius for c in self.capsules])
        moved = np.zeros((model.nbodies + 1, model.nv), dtype=bool)    # row b + 1: joints that move body b
        for i in range(model.nbodies):
            lam = model.parents[i]
            moved[i + 1] = moved[lam + 1]
            moved[i + 1, model.idx_v[i]] = True
        self._moved = moved[self._bodies + 1]                            # (2 n_caps, nv)
        # plane rows (plane, capsule, end): the end points whose distance to the plane some joint changes
        probe = np.random.default_rng(0).uniform(-np.pi, np.pi, size=(16, model.nq))
        motion = self.end_points(probe, jacobian=True)[1] if n_caps else np.zeros((16, 0, 3, model.nv))
        rows = []
        for k, plane in enumerate(self.planes):
            moving = np.abs(np.einsum("nedj,d->ej", motion, plane.normal)).max(axis=1) > 1e-9
            for c in range(n_caps):
                ends = (0,) if np.allclose(self.capsules[c].a, self.capsules[c].b) else (0, 1)
                rows += [(k, c, e) for e in ends if moving[2 * c + e]]
        self._plane_index = np.array(rows, dtype=int).reshape(-1, 3)
        self._pair_index = np.array(self.pairs, dtype=int).reshape(-1, 2)

    # -------------------------------------------------------------------------------------- kinematics
    def end_points(self, Q, jacobian=False):
        """End points P (N, 2 n_caps, 3) of every capsule (a, b interleaved) in the base frame and, with
        ``jacobian``, dP/dq (N, 2 n_caps, 3, nv)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=float))
        N = Q.shape[0]
        Ro, po = batch_world_placements(self.model, *batch_parent_placements(self.model, Q))
        P = np.empty((N, len(self._local), 3))
        for e, (body, local) in enumerate(zip(self._bodies, self._local)):
            P[:, e] = local if body < 0 else Ro[body] @ local + po[body]
        if not jacobian:
            return P
        axes = batch_world_joint_axes(self.model, Ro, po)
        J = np.zeros((N, len(self._local), 3, self.model.nv))
        for j in range(self.model.nv):
            moved = self._moved[:, j]
            v, w = axes[j][:, None, :3], axes[j][:, None, 3:]
            column = np.zeros_like(P)
            column[:, moved] = v + np.cross(w, P[:, moved])
            J[..., j] = column
        return P, J

    # ---------------------------------------------------------------------------------------- margins
    def _plane_rows(self, P, J=None):
        k, c, e = self._plane_index.T
        normals = np.array([p.normal for p in self.planes]).reshape(-1, 3)[k]
        offsets = np.array([p.offset for p in self.planes])[k]
        g = np.einsum("nrd,rd->nr", P[:, 2 * c + e], normals) - self._radius[c] - offsets
        return g if J is None else (g, np.einsum("nrdj,rd->nrj", J[:, 2 * c + e], normals))

    def _pair_rows(self, P, J=None):
        i, j = self._pair_index.T
        A1, B1, A2, B2 = P[:, 2 * i], P[:, 2 * i + 1], P[:, 2 * j], P[:, 2 * j + 1]
        s, t = segment_closest_parameters(A1, B1, A2, B2)
        C1, C2 = A1 + s[..., None] * (B1 - A1), A2 + t[..., None] * (B2 - A2)
        gap = C1 - C2
        distance = np.linalg.norm(gap, axis=-1)
        g = distance - self._radius[i] - self._radius[j] - self.self_clearance
        if J is None:
            return g
        direction = gap / np.maximum(distance, 1e-12)[..., None]
        JC1 = (1 - s)[..., None, None] * J[:, 2 * i] + s[..., None, None] * J[:, 2 * i + 1]
        JC2 = (1 - t)[..., None, None] * J[:, 2 * j] + t[..., None, None] * J[:, 2 * j + 1]
        return g, np.einsum("nrd,nrdj->nrj", direction, JC1 - JC2)

    def _pair_bounds(self, P):
        """Lower bounds (N, pairs) of the pair rows: the distance of the segments' midpoints less their
        half lengths (no closest points needed)."""
        i, j = self._pair_index.T
        half = 0.5 * (np.linalg.norm(self._local[2 * i] - self._local[2 * i + 1], axis=-1)
                      + np.linalg.norm(self._local[2 * j] - self._local[2 * j + 1], axis=-1))
        mid = 0.5 * (P[:, 2 * i] + P[:, 2 * i + 1] - P[:, 2 * j] - P[:, 2 * j + 1])
        return np.linalg.norm(mid, axis=-1) - half - self._radius[i] - self._radius[j] - self.self_clearance

    def slack(self, Q, exact_below=0.1):
        """Smallest margin (N,) of every row at each configuration (m; >= 0: all constraints hold), exact
        where it is below ``exact_below`` and a lower bound at least that large elsewhere (pairs whose
        bound exceeds it skip the closest-point computation)."""
        P = self.end_points(Q)
        low = np.full(P.shape[0], np.inf)
        if len(self._plane_index):
            low = self._plane_rows(P).min(axis=1)
        if len(self._pair_index):
            g = self._pair_bounds(P)
            near = np.nonzero(g < exact_below)
            if len(near[0]):
                sub = ClearanceModel.__new__(ClearanceModel)
                sub.__dict__.update(self.__dict__)
                for n in np.unique(near[1]):  # exact rows, one pair at a time over its near samples
                    rows = near[0][near[1] == n]
                    sub._pair_index = self._pair_index[n:n + 1]
                    g[rows, n] = sub._pair_rows(P[rows])[:, 0]
            low = np.minimum(low, g.min(axis=1))
        return low

    def smooth_slack(self, Q):
        """Smooth lower bounds (N, 2) of the smallest plane margin and the smallest pair margin at each
        configuration, and their gradients (N, 2, nv) (module docstring)."""
        P, J = self.end_points(Q, jacobian=True)
        values, gradients = [], []
        for g, dg in (self._plane_rows(P, J), self._pair_rows(P, J)):
            if g.shape[1] == 0:
                g, dg = np.full((P.shape[0], 1), 1.0), np.zeros((P.shape[0], 1, self.model.nv))
            low = g.min(axis=1, keepdims=True)
            weight = np.exp(-SMOOTHING * (g - low))
            total = weight.sum(axis=1, keepdims=True)
            values.append(low[:, 0] - np.log(total[:, 0]) / SMOOTHING)
            gradients.append(np.einsum("nr,nrj->nj", weight / total, dg))
        return np.stack(values, axis=1), np.stack(gradients, axis=1)

    def distances(self, Q):
        """Per configuration (N,) arrays: the distance of the nearest capsule to each plane's surface
        (by plane name) and, under ``"self"``, the smallest surface distance of the checked pairs (m)."""
        P = self.end_points(Q)
        out = {}
        g = self._plane_rows(P)
        for k, plane in enumerate(self.planes):
            mine = self._plane_index[:, 0] == k
            if np.any(mine):
                out[plane.name] = g[:, mine].min(axis=1) + plane.clearance
        if len(self._pair_index):
            out["self"] = self._pair_rows(P).min(axis=1) + self.self_clearance
        return out

    def report(self, Q):
        """:class:`ClearanceReport` of the configurations Q (N, nq)."""
        P = self.end_points(Q)
        planes = {}
        if len(self._plane_index):
            g = self._plane_rows(P)
            for k, plane in enumerate(self.planes):
                mine = np.flatnonzero(self._plane_index[:, 0] == k)
                if not len(mine):
                    continue
                n, r = np.unravel_index(np.argmin(g[:, mine]), (g.shape[0], len(mine)))
                capsule = self.capsules[self._plane_index[mine[r], 1]]
                planes[plane.name] = (float(g[n, mine[r]]) + plane.clearance, capsule.link, int(n))
        self_distance, self_pair, self_index = np.inf, (), -1
        if len(self._pair_index):
            g = self._pair_rows(P) + self.self_clearance
            n, r = np.unravel_index(np.argmin(g), g.shape)
            i, j = self._pair_index[r]
            self_distance, self_pair, self_index = float(g[n, r]), (self.capsules[i].link, self.capsules[j].link), int(n)
        return ClearanceReport(planes, self_distance, self_pair, self_index)

    def violation(self, Q, t=None):
        """None when every constraint holds at every configuration, else one line saying which is
        violated worst, by which link(s), and when (``t`` (N,) the sample times, s)."""
        report = self.report(Q)
        when = (lambda n: "" if t is None else f" at t = {t[n]:.3f} s")  # noqa: E731
        worst = None
        for plane in self.planes:
            if plane.name not in report.planes:
                continue
            distance, link, n = report.planes[plane.name]
            short = distance - plane.clearance
            if short < 0 and (worst is None or short < worst[0]):
                where = f"comes within {distance:.3f} m of" if distance >= 0 else f"goes {-distance:.3f} m beyond"
                worst = (short, f"link {link} {where} the {plane.description} (at least {plane.clearance:.3f} m "
                                f"required){when(n)}")
        short = report.self_distance - self.self_clearance
        if short < 0 and (worst is None or short < worst[0]):
            a, b = report.self_pair
            where = (f"come within {report.self_distance:.3f} m of each other" if report.self_distance >= 0 else
                     f"overlap by {-report.self_distance:.3f} m (their bounding capsules)")
            worst = (short, f"links {a} and {b} {where} (at least {self.self_clearance:.3f} m "
                            f"required){when(report.self_index)}")
        return None if worst is None else worst[1]


def _adjacent(model, b1, b2):
    parent = lambda b: -2 if b < 0 else model.parents[b]  # noqa: E731
    return b1 == b2 or parent(b1) == b2 or parent(b2) == b1


def clearance_model(model, capsules, *, floor=0.0, clearance=0.05, box=None, self_clearance=0.02,
                    lower=None, upper=None, samples=256, seed=0):
    """The :class:`ClearanceModel` of ``capsules`` on ``model``.

    Planes: the floor ``z >= floor + clearance`` (base frame, m; ``floor=None`` for none) and, with
    ``box = (low (3,), high (3,))``, the six faces of that workspace box (the capsules stay inside it).
    Pairs: capsules on bodies that are not parent and child, except those within ``self_clearance`` of
    each other in more than half of ``samples`` configurations drawn uniformly (seeded) within
    ``lower``/``upper`` (default: the model's limits) and on the allowed side of the planes (all of
    them when fewer than one in eight are): those are in contact by construction."""
    planes = []
    if floor is not None:
        if not clearance >= 0:
            raise ModelError(f"clearance={clearance}: must be >= 0 m")
        planes.append(Plane("floor", np.array([0.0, 0.0, 1.0]), float(floor), float(clearance)))
    if not self_clearance >= 0:
        raise ModelError(f"self_clearance={self_clearance}: must be >= 0 m")
    if box is not None:
        low, high = (np.asarray(x, dtype=float).reshape(3) for x in box)
        if not np.all(low < high):
            raise ModelError(f"workspace box: low corner {low.tolist()} must be below the high corner {high.tolist()}")
        for axis, name in enumerate("xyz"):
            unit = np.eye(3)[axis]
            planes += [Plane(f"workspace {name} min", unit, float(low[axis])),
                       Plane(f"workspace {name} max", -unit, -float(high[axis]))]
    candidates = [(i, j) for i in range(len(capsules)) for j in range(i + 1, len(capsules))
                  if not _adjacent(model, capsules[i].body, capsules[j].body)]
    probe = ClearanceModel(model, capsules, [], candidates, self_clearance)
    lower = model.lower if lower is None else np.asarray(lower, dtype=float)
    upper = model.upper if upper is None else np.asarray(upper, dtype=float)
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        raise ModelError("self-collision pairs need finite joint ranges (give --range for continuous joints)")
    Q = np.random.default_rng(seed).uniform(lower, upper, size=(samples, model.nq))
    P = probe.end_points(Q)
    on_side = ClearanceModel(model, capsules, planes, [], self_clearance)._plane_rows(P).min(axis=1, initial=np.inf) >= 0
    if on_side.sum() >= samples // 8:   # judge contact among the configurations the planes allow
        P = P[on_side]
    overlap = (probe._pair_rows(P) < 0).mean(axis=0) if candidates else np.zeros(0)
    pairs = [p for p, f in zip(candidates, overlap) if f <= 0.5]
    unchecked = [(capsules[i].link, capsules[j].link) for (i, j), f in zip(candidates, overlap) if f > 0.5]
    return ClearanceModel(model, capsules, planes, pairs, self_clearance, unchecked)


def clear_configuration(clearance, lower, upper, preferred, room=0.05, samples=2048, seed=0):
    """A configuration (nq,) within ``lower``/``upper`` whose smallest margin (:meth:`ClearanceModel.slack`)
    is at least ``room`` (m), as close to ``preferred`` as a seeded search finds: ``preferred`` itself if it
    qualifies, else the point nearest to it (in units of the joint ranges) on the way to the nearest of
    ``samples`` random configurations that qualifies. Returns ``(q, margin)``; ModelError naming the worst
    violation when no sampled configuration has a positive margin."""
    lower, upper, preferred = (np.asarray(x, dtype=float) for x in (lower, upper, preferred))
    if clearance.slack(preferred[None])[0] >= room:
        return preferred, float(clearance.slack(preferred[None])[0])
    rng = np.random.default_rng(seed)
    Q = rng.uniform(lower, upper, size=(samples, len(preferred)))
    margin = clearance.slack(Q)
    good = np.flatnonzero(margin >= room)
    if not len(good):
        best = int(np.argmax(margin))
        if margin[best] <= 0:
            raise ModelError("no configuration within the joint ranges keeps the arm clear: "
                             + (clearance.violation(Q[best:best + 1]) or "margins too small"))
        return Q[best], float(margin[best])
    span = upper - lower
    target = Q[good[np.argmin(np.linalg.norm((Q[good] - preferred) / span, axis=1))]]
    steps = np.linspace(0.0, 1.0, 41)[1:]
    path = preferred + steps[:, None] * (target - preferred)
    first = int(np.flatnonzero(clearance.slack(path) >= room)[0])
    return path[first], float(clearance.slack(path[first:first + 1])[0])
