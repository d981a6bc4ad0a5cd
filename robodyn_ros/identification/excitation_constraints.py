"""The limit and clearance constraints of the exciting-trajectory design
(:func:`~robodyn_ros.identification.exciting_trajectory.design_exciting_trajectory`), written in the
coefficients x of the Fourier series (Swevers et al. 1997): SLSQP inequality rows (``fun(x) >= 0``) on a time
grid, the same limits as a feasibility test, and the final shrink of the oscillation towards a motionless
anchor until they hold on a denser grid.

``coefficients`` is the design's map from x to the trajectory: ``n`` joints, ``linear_map(t, order)`` the
matrix G with q^(order)(t).ravel() = G x, and ``trajectory(x)`` the FourierTrajectory.
"""

from __future__ import annotations

import numpy as np

from robodyn_ros.model.errors import ModelError


def motionless_anchor(coefficients, x, anchor_q):
    """The motionless trajectory the oscillation is shrunk towards: q = anchor_q if given (q_start when
    imposed, or a configuration that satisfies the configuration constraint), else q = q0 (q0 is the
    period mean of q, so it lies inside any box that contains the trajectory). It satisfies every
    equality constraint (rest at t = 0 is homogeneous in the coefficients), so x_s = anchor + s (x -
    anchor) does too, and for 0 <= s <= 1 each q(t) of x_s is a convex combination of q(t) and the
    anchor, both inside the position box; as s -> 0 the motion stays near the anchor."""
    anchor = np.zeros_like(x)
    anchor[:coefficients.n] = x[:coefficients.n] if anchor_q is None else anchor_q
    return anchor


class ClearanceConstraints:
    """The configuration constraint of the design: smooth rows ``slack - buffer >= 0`` on a grid for
    SLSQP (gradient through the linear map x -> q), and the exact check on a dense grid."""

    def __init__(self, coefficients, clearance, buffer):
        self.coefficients, self.clearance, self.buffer = coefficients, clearance, float(buffer)
        self._maps = {}

    def _map(self, grid):
        key = grid.tobytes()
        if key not in self._maps:
            self._maps = {key: self.coefficients.linear_map(grid, 0).reshape(len(grid), self.coefficients.n, -1)}
        return self._maps[key]

    def slsqp_constraint(self, grid):
        G = self._map(grid)
        last = {}

        def evaluate(x):
            if last.get("x") is None or not np.array_equal(last["x"], x):
                value, gradient = self.clearance.smooth_slack(G @ x)
                last.update(x=x.copy(), value=value, gradient=gradient)
            return last["value"], last["gradient"]

        return {"type": "ineq",
                "fun": lambda x: (evaluate(x)[0] - self.buffer).ravel(),
                "jac": lambda x: np.einsum("nkj,njp->nkp", evaluate(x)[1], G).reshape(-1, G.shape[2])}

    def satisfied(self, x, grid):
        return bool(np.all(self.clearance.slack(self._map(grid) @ x) >= self.buffer))

    def shortfalls(self, x, grid):
        """Instants of ``grid`` where the exact slack has a local minimum below half the buffer."""
        slack = self.clearance.slack(self.coefficients.trajectory(x).derivatives(grid, 0))
        low = (slack <= np.roll(slack, 1)) & (slack <= np.roll(slack, -1)) & (slack < self.buffer / 2)
        return grid[low]

    def holds(self, x, grid):
        return bool(np.all(self.clearance.slack(self.coefficients.trajectory(x).derivatives(grid, 0)) >= 0))


class LimitConstraints:
    """Limit constraints of the design as SLSQP inequality dictionaries (fun(x) >= 0) and as a test.
    ``tau_derivatives(q, v, a)`` (optional): (3, N, n, n), every sample's torque Jacobians with respect to
    its q, v and a, chained to the torque rows' Jacobian (else SLSQP differences them)."""

    def __init__(self, coefficients, lower, upper, v_max, a_max, tau_check, tau_max, tau_derivatives=None):
        self.coefficients = coefficients
        self.lower, self.upper = lower, upper
        self.symmetric = [(1, v_max)] + ([] if a_max is None else [(2, a_max)])
        self.tau_check, self.tau_max, self.tau_derivatives = tau_check, tau_max, tau_derivatives
        self._cache = {}

    def _linear(self, grid, margin):
        """Stacked G, h with G x <= h: positions within shrunk limits, |v|, |a| below shrunk maxima."""
        key = (grid.tobytes(), margin)
        if key not in self._cache:
            self._cache[key] = self._build_linear(grid, margin)
        return self._cache[key]

    def _build_linear(self, grid, margin):
        shrink = margin * (self.upper - self.lower)
        G0 = self.coefficients.linear_map(grid, 0)
        blocks = [G0, -G0]
        bounds = [np.tile(self.upper - shrink, len(grid)), np.tile(-(self.lower + shrink), len(grid))]
        for order, maximum in self.symmetric:
            G = self.coefficients.linear_map(grid, order)
            blocks += [G, -G]
            bounds += [np.tile((1 - margin) * maximum, len(grid))] * 2
        return np.vstack(blocks), np.concatenate(bounds)

    def _torque_slack(self, x, grid, margin):
        q, v, a = self.coefficients.trajectory(x).evaluate(grid)
        tau = np.asarray(self.tau_check(q, v, a), dtype=np.float64)
        limit = (1 - margin) * self.tau_max
        return np.concatenate([(limit - tau).ravel(), (limit + tau).ravel()])

    def _torque_slack_jacobian(self, x, grid):
        """(2 N n, size): d/dx of :meth:`_torque_slack`, dtau/dx = sum_r dtau/dq^(r) dq^(r)/dx."""
        N, n = len(grid), self.coefficients.n
        key = ("maps", grid.tobytes())
        if key not in self._cache:
            self._cache[key] = [self.coefficients.linear_map(grid, r).reshape(N, n, -1) for r in range(3)]
        maps = self._cache[key]
        J = self.tau_derivatives(*(G @ x for G in maps))
        d_tau = sum(np.einsum("ikj,ijp->ikp", J[r], maps[r]) for r in range(3)).reshape(N * n, -1)
        return np.vstack([-d_tau, d_tau])

    def slsqp_constraints(self, grid, margin):
        """The rows as SLSQP inequality dictionaries, each with its ``columns`` (its rows are blocks of (len(grid),
        columns) samples in time) and ``scale`` (per row: the position range, the velocity, acceleration or
        effort limit the row bounds), which :func:`working_set` reads."""
        G, h = self._linear(grid, margin)
        n, N = self.coefficients.n, len(grid)
        scales = [self.upper - self.lower] * 2 + [maximum for _, maximum in self.symmetric for _ in range(2)]
        constraints = [{"type": "ineq", "fun": lambda x: h - G @ x, "jac": lambda x: -G, "columns": n,
                        "scale": np.concatenate([np.tile(s, N) for s in scales])}]
        if self.tau_check is not None:
            torque = {"type": "ineq", "fun": lambda x: self._torque_slack(x, grid, margin), "columns": n,
                      "scale": np.tile(self.tau_max, 2 * N)}
            if self.tau_derivatives is not None:
                torque["jac"] = lambda x: self._torque_slack_jacobian(x, grid)
            constraints.append(torque)
        return constraints

    def satisfied(self, x, grid, margin, tolerance=0.0) -> bool:
        G, h = self._linear(grid, margin)
        if np.any(G @ x > h + tolerance):
            return False
        return self.tau_check is None or bool(np.all(self._torque_slack(x, grid, margin) >= -tolerance))


def shrink_until_feasible(coefficients, limits, x, anchor_q, margin, dense_grid, clear=None, check_grid=None):
    """Shrink the oscillation about the anchor (convexity keeps positions inside) until the limits hold
    on the dense grid with margin/2 and the clearance on its check grid; returns x and the total scale
    applied."""
    anchor = motionless_anchor(coefficients, x, anchor_q)
    scale = 1.0
    for _ in range(60):
        if limits.satisfied(x, dense_grid, margin / 2) and (clear is None or clear.holds(x, check_grid)):
            return x, scale
        x = anchor + 0.9 * (x - anchor)
        scale *= 0.9
    raise ModelError("the designed trajectory cannot be made to respect the limits"
                     + ("" if clear is None else " and the clearances") + " on the dense grid")


WORKING_SLACK = 0.25
"""A row joins the working set when its slack is below this fraction of its ``scale`` (:func:`working_set`)."""


def working_set(constraints, x, grid_size, chosen=None, threshold=WORKING_SLACK):
    """The rows of the inequality ``constraints`` (SLSQP dictionaries; those with ``columns`` and ``scale``,
    :meth:`LimitConstraints.slsqp_constraints`) that can be active near ``x``: per dictionary, a boolean mask
    of its rows, the union of ``chosen`` (the masks so far) and, at ``x``, the rows whose slack is below
    ``threshold`` times their scale or negative, and in every sample series (a joint's row of one block over
    the ``grid_size`` instants, periodic) the local minima of the slack and their neighbours in time, where a
    limit is first reached as the motion grows. Dictionaries without a ``scale`` keep every row.

    A trajectory's limit rows on a time grid are mostly far from their bounds (the Kinova's 7 200 position,
    velocity and effort rows), and SLSQP's subproblem costs grow with the rows it is given."""
    masks = []
    for i, c in enumerate(constraints):
        slack = np.asarray(c["fun"](x), dtype=float)
        if "scale" not in c:
            masks.append(np.ones(slack.size, dtype=bool))
            continue
        near = slack < threshold * c["scale"]
        series = slack.reshape(-1, grid_size, c["columns"])
        minima = (series <= np.roll(series, 1, axis=1)) & (series <= np.roll(series, -1, axis=1))
        minima = minima | np.roll(minima, 1, axis=1) | np.roll(minima, -1, axis=1)
        mask = near | minima.ravel()
        masks.append(mask if chosen is None else mask | chosen[i])
    return masks


def restricted(constraints, masks):
    """The SLSQP dictionaries of ``constraints`` restricted to the rows of ``masks`` (:func:`working_set`),
    without the keys SLSQP does not read; a dictionary without a Jacobian stays without one (SLSQP differences
    the restricted rows)."""
    out = []
    for c, mask in zip(constraints, masks):
        rows = np.flatnonzero(mask)
        sub = {"type": c["type"], "fun": (lambda x, f=c["fun"], r=rows: np.asarray(f(x))[r])}
        if c.get("jac") is not None:
            sub["jac"] = lambda x, j=c["jac"], r=rows: np.asarray(j(x))[r]
        out.append(sub)
    return out
