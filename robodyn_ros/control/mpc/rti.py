"""The real-time iteration (Diehl, Bock and Schlöder 2005): one Gauss-Newton SQP step of the OCP per
control period, in two phases (sec. 4 of the paper). *Preparation*, before the measurement arrives:
linearise all stages at the shifted previous solution ``w̄`` (``rti_prepare``) and factorise the QP without
its bounds by the Riccati recursion (``riccati_factor``, :mod:`.riccati`). *Feedback*, with the measured state
``x̂``: the forward rollout from ``Δx_0 = x̂ - x̄_0``, a few matrix-vector products, the delay of the command. When that
rollout leaves a bound, the bounded QP is solved on the same linearisation (exact: without an active bound
the unbounded minimiser is the bounded one). ``qp_solver`` 'hpipm' | 'qrqp' | 'osqp' solves the bounded QP
every period; ``sqp_iterations > 1`` relinearises and iterates to convergence.
"""
from __future__ import annotations

from typing import NamedTuple

import casadi as ca
import numpy as np

from ...kernels.compiled_functions import DirectCall


class _VirtualMachineCall:
    """The interface of :class:`~robodyn_ros.kernels.compiled_functions.DirectCall` (``inputs``,
    ``outputs``: nonzeros, ``bind``, ``call``) for a function evaluated by CasADi's virtual machine."""

    def __init__(self, function):
        self.function = function
        self.inputs = [np.zeros(function.nnz_in(i)) for i in range(function.n_in())]
        self.outputs = [np.zeros(function.nnz_out(i)) for i in range(function.n_out())]

    def bind(self, i, array):
        self.inputs[i] = array

    def call(self):
        f = self.function
        results = f.call([ca.DM(f.sparsity_in(i), x) for i, x in enumerate(self.inputs)])
        for out, result in zip(self.outputs, results):
            out[:] = np.asarray(result.nonzeros())


class BoundedQP(NamedTuple):
    """The QP of the step Δw as conic solvers take it: ``H``, ``grad``, constraint rows ``J``, ``rhs`` (DM)."""

    H: ca.DM
    grad: ca.DM
    J: ca.DM
    rhs: ca.DM


class RTIPhases:
    """The two RTI phases of an :class:`~.ocp.OCPFunctions` for one controller: ``prepare(w̄, p)`` evaluates
    ``rti_prepare`` and ``riccati_factor`` on its results and keeps both; ``feedback(x̂, w_lo, w_hi) -> (w,
    violation)`` the Riccati rollout from them; ``qp()`` the bounded QP's data (:class:`BoundedQP`); ``gains()`` the Riccati gains
    (nu, nx N). On a compiled library through its C entry points (buffers allocated once, the feedback
    reading the preparation's outputs in place), else through CasADi's virtual machine."""

    def __init__(self, ocp):
        def caller(f):
            return DirectCall(ocp.library, f) if ocp.library is not None else _VirtualMachineCall(f)
        self.ocp = ocp
        self._prep, self._fb = caller(ocp.rti_prepare), caller(ocp.riccati_feedback)
        self._factor = caller(ocp.riccati_factor)
        for name in ("A", "B", "b", "grad"):                    # the linearisation, factorised in place
            self._factor.bind(self._factor.function.index_in(name), self._output(self._prep, name))
        for name in ("A", "B", "b"):                            # the preparation's outputs, read in place
            self._fb.bind(self._fb.function.index_in(name), self._output(self._prep, name))
        for name in ("K", "k"):
            self._fb.bind(self._fb.function.index_in(name), self._output(self._factor, name))
        # the buffers each period writes and reads, looked up by name once (a lookup is a CasADi call)
        self._w, self._p = self._input(self._prep, "w"), self._input(self._prep, "p")
        self._fb_w_bar, self._x0 = self._input(self._fb, "w_bar"), self._input(self._fb, "x0")
        self._w_lo, self._w_hi = self._input(self._fb, "w_lo"), self._input(self._fb, "w_hi")
        self._w_new, self._violation = self._output(self._fb, "w"), self._output(self._fb, "violation")
        K = ocp.riccati_factor.sparsity_out("K")
        self._K, self._K_columns = self._output(self._factor, "K"), K.size2() if K.is_dense() else None
        self._bounds = None

    @staticmethod
    def _input(call, name):
        return call.inputs[call.function.index_in(name)]

    @staticmethod
    def _output(call, name):
        return call.outputs[call.function.index_out(name)]

    def _dm(self, name):
        return ca.DM(self.ocp.rti_prepare.sparsity_out(name), self._output(self._prep, name))

    def prepare(self, w_bar, p):
        self._w[:] = w_bar
        self._p[:] = p
        self._fb_w_bar[:] = w_bar
        self._prep.call()
        self._factor.call()

    def feedback(self, x0, lo, hi):
        if self._bounds is None or self._bounds[0] is not lo or self._bounds[1] is not hi:
            self._w_lo[:], self._w_hi[:] = lo, hi                          # once per bounds object
            self._bounds = (lo, hi)
        self._x0[:] = x0
        self._fb.call()
        return self._w_new.copy(), float(self._violation[0])

    def qp(self):
        return BoundedQP(*(self._dm(name) for name in BoundedQP._fields))

    def gains(self):
        if self._K_columns is not None:                     # dense, its nonzeros column-major: (nu, nx N)
            return self._K.reshape(self._K_columns, -1).T.copy()
        return np.array(ca.DM(self.ocp.riccati_factor.sparsity_out("K"), self._K))


class SQPResult(NamedTuple):
    """``w`` (nw,) the new iterate (None when a QP failed), ``K`` (nu, nx N) the Riccati gains of the last
    linearisation, the solver's ``status`` string, ``iterations``."""

    w: object
    K: object
    status: str
    iterations: int


def bounded_qp_solver(ocp, name):
    """The conic solver ``name`` ('hpipm', 'qrqp', 'osqp') of the bounded QP of :class:`BoundedQP`."""
    prepare = ocp.rti_prepare
    opts = {"error_on_fail": False, "print_time": False}
    if name == "hpipm":
        opts.update({"N": ocp.N, "nx": [ocp.nx] * (ocp.N + 1), "nu": [ocp.nu] * ocp.N + [0],
                     "ng": [0] * (ocp.N + 1), "hpipm": {"iter_max": 200}})
    elif name == "osqp":
        opts.update({"osqp": {"verbose": False, "eps_abs": 1e-6, "eps_rel": 1e-6, "max_iter": 4000}})
    elif name == "qrqp":
        opts.update({"print_iter": False, "print_header": False})
    return ca.conic("mpc_qp", name, {"h": prepare.sparsity_out("H"), "a": prepare.sparsity_out("J")}, opts)


def bounded_qp_name(config):
    """The conic solver of the bounded QP: hpipm behind the Riccati rollout, else ``qp_solver``."""
    return "hpipm" if config.qp_solver == "riccati" else config.qp_solver


def sqp_steps(rti, qp_solver, x0, w_bar, p, lbw, ubw, config):
    """Gauss-Newton SQP steps (``sqp_iterations``, 1 for the RTI) from the prepared linearisation at ``w̄``:
    each a QP in Δw with the linearised shooting constraints and ``Δx_0 = x̂ - x̄_0``; full steps. With
    ``qp_solver='riccati'`` the rollout of the prepared Riccati factorisation, and the bounded QP by
    ``qp_solver`` (a conic solver) only when that leaves ``[lbw, ubw]``. Further iterations relinearise at
    the new iterate. Returns an :class:`SQPResult`."""
    nx, status, w = rti.ocp.nx, "", w_bar
    for it in range(max(1, config.sqp_iterations)):
        if it > 0:
            w_bar = w
            rti.prepare(w_bar, p)
        if config.qp_solver == "riccati":
            w, violation = rti.feedback(x0, lbw, ubw)
            if violation <= 1e-9:
                status = "riccati"
                continue
        qp = rti.qp()
        lbx, ubx = lbw - w_bar, ubw - w_bar
        lbx[:nx] = ubx[:nx] = x0 - w_bar[:nx]                          # Δx_0 = x̂ - x̄_0
        res = qp_solver(h=qp.H, g=qp.grad, a=qp.J, lba=qp.rhs, uba=qp.rhs, lbx=lbx, ubx=ubx)
        stats = qp_solver.stats()
        status = str(stats.get("return_status", ""))
        if not stats.get("success", False):
            return SQPResult(None, None, status or "qp failed", it + 1)
        w = w_bar + np.asarray(res["x"]).reshape(-1)
        w[:nx] = x0
    return SQPResult(w, rti.gains(), status, it + 1)
