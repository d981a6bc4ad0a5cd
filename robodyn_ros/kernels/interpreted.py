"""The fallback when no C compiler exists: the same kernels evaluated by CasADi's virtual machine, with
the compiled binding's call signatures, shapes and error messages (and none of its speed)."""
from __future__ import annotations

import numpy as np

from ..dynamics.crba import crba
from ..dynamics.dynamic_matrices import coriolis_matrix
from ..dynamics.regressor import regressor
from ..dynamics.rnea_derivatives import rnea_derivatives


def _as_input(fname, name, x, n, rows=None):
    arr = np.ascontiguousarray(x, dtype=float)
    expected = (n,) if rows is False else ((arr.shape[0] if rows is None and arr.ndim == 2 else rows), n)
    if arr.shape != expected:
        want = f"({n},)" if rows is False else (f"(N, {n})" if rows is None else f"({rows}, {n})")
        raise ValueError(f"{fname}(): {name} has shape {arr.shape}, expected {want}")
    return arr


class InterpretedKernels:
    """Attributes named like the compiled module's functions (``rnea``, ``rnea_batch``, ...)."""

    def __init__(self, kernel_set, model):
        self.model = model
        for spec in kernel_set.specs:
            if spec.function is None:
                spec = self._composite(spec)
            setattr(self, spec.name, self._per_call(spec))
            if spec.batch:
                setattr(self, spec.name + "_batch", self._batch(spec))

    def _composite(self, spec):
        """The C composites in NumPy: ``aba_derivatives`` from the interpreted ABA and RNEA derivatives, the
        loop forms of :mod:`robodyn_ros.kernels.loops` as the NumPy functions of the same algorithms."""
        def evaluate(q, v, tau):
            acc = self.aba(q, v, tau)
            dtau_dq, dtau_dv, M = self.rnea_derivatives(q, v, acc)
            Minv = np.linalg.inv(M)
            return [-Minv @ dtau_dq, -Minv @ dtau_dv, Minv]

        numpy_forms = {"rnea_derivatives": lambda q, v, a: list(rnea_derivatives(self.model, q, v, a)),
                       "crba": lambda q: [crba(self.model, q)],
                       "coriolis_matrix": lambda q, v: [coriolis_matrix(self.model, q, v)],
                       "regressor": lambda q, v, a: [regressor(self.model, q, v, a)]}
        self._composites = getattr(self, "_composites", {})
        self._composites[spec.name] = numpy_forms[spec.name] if spec.composite == "loops" else evaluate
        return spec

    def _evaluate(self, spec, args):
        if spec.function is None:
            return self._composites[spec.name](*args)
        outs = spec.function.call([a.reshape(-1, 1) for a in args])
        # Each output is X^T (see symbolic.py): transpose back to X.
        return [np.array(o.full()).T.reshape(shape) for o, shape in zip(outs, spec.outputs)]

    def _per_call(self, spec):
        def kernel(*args):
            if len(args) != len(spec.inputs):
                raise TypeError(f"{spec.name}() takes {len(spec.inputs)} arguments, got {len(args)}")
            ins = [_as_input(spec.name, n, x, k, rows=False) for (n, k), x in zip(spec.inputs, args)]
            outs = self._evaluate(spec, ins)
            return outs[0] if len(outs) == 1 else tuple(outs)
        kernel.__name__ = spec.name
        return kernel

    def _batch(self, spec):
        fname = spec.name + "_batch"

        def kernel(*args, out=None, threads=None):
            """``threads`` is accepted for the compiled signature's sake; CasADi evaluates row by row."""
            if len(args) != len(spec.inputs):
                raise TypeError(f"{fname}() takes {len(spec.inputs)} arguments, got {len(args)}")
            if threads is not None and threads < 1:
                raise ValueError(f"{fname}(): threads must be >= 1, got {threads}")
            ins, rows = [], None
            for (n, k), x in zip(spec.inputs, args):
                ins.append(_as_input(fname, n, x, k, rows=rows))
                rows = ins[-1].shape[0]
            outs = [np.empty((rows,) + shape) for shape in spec.outputs]
            if out is not None:
                given = (out,) if len(spec.outputs) == 1 and not isinstance(out, (tuple, list)) else tuple(out)
                if len(given) != len(outs) or any(not isinstance(g, np.ndarray) or g.shape != o.shape
                                                  or g.dtype != np.float64 for g, o in zip(given, outs)):
                    raise ValueError(f"{fname}(): out= must hold {len(outs)} float64 array(s) of the results' shapes")
                outs = list(given)
            for r in range(rows):
                for o, value in zip(outs, self._evaluate(spec, [x[r] for x in ins])):
                    o[r] = value
            return outs[0] if len(outs) == 1 else tuple(outs)
        kernel.__name__ = fname
        return kernel
