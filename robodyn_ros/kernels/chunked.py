"""Straight-line C of a CasADi SX function cut into bounded chunks, for kernels too long for one C function.

gcc's time on one straight-line function grows faster than linearly with its length, while chunks of a
bounded number of instructions compile in time linear in the kernel's size (the sizes are chosen in
:mod:`.codegen`). The code is the SX algorithm instruction by instruction (``a<slot> = <expression>``),
either on one sample (``double``, CasADi's calling convention) or on four samples at once (``rdk_v4``, a
GCC vector of four doubles, lane l = sample l) for the batch forms.
"""
from __future__ import annotations

import os
import re

import casadi as ca

from . import c_runtime

_C_UNARY = {ca.OP_NEG: "(-{0})", ca.OP_SQ: "({0}*{0})", ca.OP_TWICE: "({0}+{0})", ca.OP_INV: "(1./{0})",
            ca.OP_SQRT: "sqrt({0})", ca.OP_SIN: "sin({0})", ca.OP_COS: "cos({0})", ca.OP_TAN: "tan({0})",
            ca.OP_EXP: "exp({0})", ca.OP_LOG: "log({0})", ca.OP_FABS: "fabs({0})", ca.OP_ATAN: "atan({0})",
            ca.OP_ASIN: "asin({0})", ca.OP_ACOS: "acos({0})", ca.OP_TANH: "tanh({0})", ca.OP_ASSIGN: "{0}"}
_C_BINARY = {ca.OP_ADD: "({0}+{1})", ca.OP_SUB: "({0}-{1})", ca.OP_MUL: "({0}*{1})", ca.OP_DIV: "({0}/{1})",
             ca.OP_POW: "pow({0},{1})", ca.OP_CONSTPOW: "pow({0},{1})", ca.OP_ATAN2: "atan2({0},{1})",
             ca.OP_FMIN: "fmin({0},{1})", ca.OP_FMAX: "fmax({0},{1})"}


def chunkable(function):
    """Whether :func:`chunked_sources` can emit every operation of ``function``."""
    known = set(_C_UNARY) | set(_C_BINARY) | {ca.OP_CONST, ca.OP_INPUT, ca.OP_OUTPUT}
    return all(function.instruction_id(k) in known for k in range(function.n_instructions()))


# The 4-lane code's element-wise functions (runtime/v4.h): the scalar libm function on each lane (every
# lane gets the per-call code's value), except sin and cos, which with ``RDK_LIBMVEC`` (build.LIBMVEC:
# glibc's vector math library is there) and AVX2 are glibc's 4-lane ``_ZGVdN4v_sin`` / ``_ZGVdN4v_cos``
# (at most 4 ulp from the correctly rounded value, glibc manual). Measured: sin + cos of one argument
# 14.7 ns by libm (gcc merges them into one sincos), 3.1 ns per lane by libmvec; Talos's rnea takes 44
# such pairs per sample.
V4_HEADER = "v4.h"


def _lanes(template):
    """A C expression template of :data:`_C_UNARY` / :data:`_C_BINARY` for ``rdk_v4`` operands: operators
    stay (GCC applies them lane by lane), ``f(...)`` becomes ``rdk_f4(...)``."""
    return re.sub(r"^(\w+)\(", r"rdk_\g<1>4(", template)


def _chunk_bodies(function, chunk, lanes):
    """The straight-line code of ``function`` cut into chunks of ``chunk`` instructions: per chunk its C
    statements, the work slots it loads from ``w`` (written by an earlier chunk) and those it stores (read
    by a later one). ``lanes`` 4: every value is an ``rdk_v4``."""
    n = function.n_instructions()
    starts = list(range(0, n, chunk))
    last_writer, live_in, live_out, body = {}, [set() for _ in starts], [set() for _ in starts], [[] for _ in starts]
    for k in range(n):
        c, op = k // chunk, function.instruction_id(k)
        ins = [] if op in (ca.OP_INPUT, ca.OP_CONST) else list(function.instruction_input(k))
        for slot in ins:
            writer = last_writer.get(slot, -1)
            if writer != c:
                live_in[c].add(slot)
                if writer >= 0:
                    live_out[writer].add(slot)
        if op == ca.OP_OUTPUT:
            o, nz = function.instruction_output(k)
            body[c].append(f"  res[{o}][{nz}]=a{ins[0]};")
            continue
        out = function.instruction_output(k)[0]
        last_writer[out] = c
        if op == ca.OP_CONST:
            expr = repr(float(function.instruction_constant(k)))
            expr = f"RDK_SPLAT({expr})" if lanes > 1 else expr
        elif op == ca.OP_INPUT:
            i, nz = function.instruction_input(k)
            expr = f"arg[{i}][{nz}]"
        elif op in _C_UNARY:
            template = _C_UNARY[op]
            expr = (_lanes(template) if lanes > 1 else template).format(f"a{ins[0]}")
        else:
            template = _C_BINARY[op]
            expr = (_lanes(template) if lanes > 1 else template).format(f"a{ins[0]}", f"a{ins[1]}")
        body[c].append(f"  a{out}={expr};")
    return body, live_in, live_out


def chunked_sources(name, function, directory, chunk, per_unit, lanes=1):
    """C files computing the SX ``function`` as ``int <name>(const double **arg, double **res,
    casadi_int *iw, double *w, int mem)`` (CasADi's calling convention; ``w`` holds ``sz_w()`` doubles),
    the algorithm cut into ``noinline`` functions of at most ``chunk`` instructions. Inside a chunk every
    work slot of the algorithm is a local variable; a slot whose value crosses a chunk boundary is stored
    to ``w`` at the end of the chunk that last wrote it and loaded at the start of each chunk that reads
    it. The chunks are spread over translation units of at most ``per_unit`` instructions (compiled in
    parallel); returns their paths.

    ``lanes`` 4: the same algorithm on four samples at once, ``void <name>(const rdk_v4 **arg, rdk_v4
    **res, rdk_v4 *w)`` where ``rdk_v4`` is a GCC vector of 4 doubles (lane l = sample l): every
    ``arg[i][j]``, ``res[i][j]`` and ``w[j]`` holds element j of the four samples, the arithmetic is
    the vector operators (AVX2 instructions with ``-march=native``) and the libm functions run lane by
    lane."""
    body, live_in, live_out = _chunk_bodies(function, chunk, lanes)
    real = "rdk_v4" if lanes > 1 else "double"
    signature = f"(const {real} **arg, {real} **res, {real} *w)"
    chunks = []
    for c in range(len(body)):
        used = set(live_in[c])
        for line in body[c]:
            used.update(int(t) for t in re.findall(r"\ba(\d+)", line))
        lines = [f"void {name}_c{c}{signature}", "{"]
        decl = sorted(used)
        for i in range(0, len(decl), 12):
            lines.append(f"  {real} " + ", ".join(f"a{j}" for j in decl[i:i + 12]) + ";")
        lines += [f"  a{j}=w[{j}];" for j in sorted(live_in[c])]
        lines += body[c]
        lines += [f"  w[{j}]=a{j};" for j in sorted(live_out[c])]
        lines.append("}\n")
        chunks.append("\n".join(lines))
    header = (c_runtime.read(V4_HEADER) if lanes > 1 else "#include <math.h>\n") + "#define RDK_CHUNK __attribute__((noinline))\n"
    decls = "".join(f"RDK_CHUNK void {name}_c{c}{signature};\n" for c in range(len(chunks)))
    paths, per_file = [], max(1, per_unit // chunk)
    for u in range(0, len(chunks), per_file):
        text = header + decls + "\n".join(chunks[u:u + per_file])
        if u == 0:
            calls = "".join(f"  {name}_c{c}(arg, res, w);\n" for c in range(len(chunks)))
            if lanes > 1:
                text += f"\nvoid {name}{signature}\n{{\n{calls}}}\n"
            else:
                text += (f"\nint {name}(const double **arg, double **res, long long *iw, double *w, int mem)\n"
                         f"{{\n{calls}  return 0;\n}}\n")
        path = os.path.join(directory, f"{name}_u{u // per_file}.c")
        with open(path, "w") as fh:
            fh.write(text)
        paths.append(path)
    return paths
