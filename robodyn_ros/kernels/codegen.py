"""C sources of a kernel module: one CasADi-generated translation unit per kernel, or for kernels above
``CHUNK_THRESHOLD`` instructions (Talos's) several units of chunked straight-line code
(:func:`chunked_sources`), all compiled in parallel, and a CPython extension module that binds them.
The C that is the same for every model (the binding's argument checks and row threads, the ``L^T D L``
solves, the composites' bodies) is package data read through :mod:`.c_runtime`; this module writes what
depends on the model: the evaluators, the 4-lane row loops, the Python-facing functions and the method table.

The binding is a table of ``METH_FASTCALL | METH_KEYWORDS`` functions. A call checks each argument once: a C-contiguous,
aligned float64 NumPy array of the right shape is used in place (the fast path); anything else is
converted with ``PyArray_FROMANY`` and its shape checked, raising ``ValueError`` naming the argument.
The outputs are fresh uninitialised NumPy arrays that the kernel fills completely (or caller-provided
ones, passed as extra positional arguments or as ``out=`` (one array, or a tuple of them)), and the
kernel's scratch space lives on the C stack, so a call allocates nothing but the returned arrays.
Batch forms take (N, n) arrays, loop over the rows in C and release the GIL while they do. The rows are
split into contiguous blocks, one per POSIX thread (``threads=`` keyword, else ``$ROBODYN_THREADS``, else
the CPUs this process may run on, at most ``RDK_MAX_THREADS``; fewer when a block would hold less than
about ``RDK_MIN_BLOCK_FLOPS`` operations, so small batches do not pay for thread creation). Each row is
computed by the same code whatever the thread count, so results are bit-identical.
The batch forms of ``VECTOR_BATCH`` (rnea, regressor, rnea_derivatives) run four rows at a time through
a 4-lane form of the kernel (:func:`chunked_sources` with ``lanes=4``, :func:`_vector_rows`); block
bounds fall on multiples of four rows and a short last group repeats its last row, so a row's result
does not depend on the thread count or N either. Its rows equal the per-call results to rounding, not
bit for bit: the 4-lane code takes sin and cos from glibc's libmvec where it exists (within 4 ulp), and
gcc may contract a different set of ``a * b + c`` into fused multiply-adds in it (measured on Panda and
UR5: relative differences up to 2.4e-15; with libm's sin and cos, bit-identical on Panda and 1e-19 on
UR5's derivatives).
"""
from __future__ import annotations

import os
import re

import casadi as ca

from . import c_runtime, loops
from .chunked import chunkable, chunked_sources
from .symbolic import flop_count

# Bump when the code the generators write changes (here, in chunked.py or loops.py): it is part of the
# disk-cache key. The runtime files enter the key by their digest (c_runtime.digest).
GENERATOR_VERSION = "8"

# The runtime files that open every module, in order: includes and types, row loops, argument checks.
BINDING_RUNTIME = ("binding.h", "rows.c", "arguments.c")

# The C bodies of the composite kernels (KernelSpec.composite): runtime templates of n = nv.
# ``aba_derivatives`` from the other kernels (Carpentier and Mansard 2018, Sec. III-B):
# a = ABA(q, v, tau); (dtau_dq, dtau_dv, M) = RNEA derivatives at a; da/dq = -M^-1 dtau_dq,
# da/dv = -M^-1 dtau_dv, da/dtau = M^-1, the solves by the sparse L^T D L factors of M (runtime/ltdl.c).
COMPOSITE_BODIES = {"aba_derivatives": "aba_derivatives.c.in"}


# Kernels with more instructions than this are emitted by :func:`chunked_sources` (straight-line code cut
# into functions of at most CHUNK_INSTRUCTIONS instructions, at most TU_INSTRUCTIONS per translation unit)
# instead of CasADi's code generator, which writes one function per kernel. gcc's time on one straight-line
# function grows faster than linearly with its length (Talos's 63 000-instruction Coriolis matrix: about
# 1 000 s at -O1 in one function), while bounded chunks compile in time linear in the kernel's size and
# at -O2. Measured on that matrix at -O2 (gcc CPU seconds, one translation unit): chunks of 1 000
# instructions 26 s, 3 000 41 s, 8 000 53 s. Panda's kernels (at most 9 734 instructions) stay single
# CasADi functions.
CHUNK_THRESHOLD = 12000
CHUNK_INSTRUCTIONS = 1000
TU_INSTRUCTIONS = 12000

# Batch kernels that also get a 4-lane evaluator (:func:`chunked_sources` with ``lanes=4``) for their
# ``_batch`` form: the three the benchmark's batch target names. aba, crba and the aba_derivatives
# composite keep the one-sample loop (their 4-lane code would add gcc time for no stated target).
# The gain per sample, measured: docs/PERFORMANCE.md (batch kernels).
VECTOR_BATCH = ("rnea", "regressor", "rnea_derivatives")
LANES = 4


def is_vector_unit(path):
    """Whether the C file at ``path`` holds 4-lane code (written by :func:`spec_sources`)."""
    return f"_v{LANES}_u" in os.path.basename(path)


def vectorised(spec):
    """Whether ``spec``'s batch form runs through the 4-lane evaluator."""
    return (spec.batch and spec.function is not None and spec.name in VECTOR_BATCH
            and chunkable(spec.function))


def spec_sources(spec, directory):
    """Write the C files of one kernel into ``directory``: one CasADi-generated file, or the translation
    units of :func:`chunked_sources` above ``CHUNK_THRESHOLD`` instructions; and for the kernels of
    :func:`vectorised` their 4-lane form (one function below ``CHUNK_THRESHOLD`` instructions, chunked
    above); nothing for a composite (written in the module itself).
    Returns ``[(path, instructions compiled in it), ...]``."""
    paths = []
    if spec.function is None:
        return paths
    size = spec.function.n_instructions()
    if vectorised(spec):
        chunk = CHUNK_INSTRUCTIONS if size > CHUNK_THRESHOLD else max(size, 1)
        units = chunked_sources(f"rdk_{spec.name}_v{LANES}", spec.function, directory, chunk=chunk,
                                per_unit=max(TU_INSTRUCTIONS, chunk), lanes=LANES)
        paths += [(path, size / len(units)) for path in units]
    if size > CHUNK_THRESHOLD and chunkable(spec.function):
        units = chunked_sources(f"rdk_{spec.name}", spec.function, directory, chunk=CHUNK_INSTRUCTIONS,
                                per_unit=TU_INSTRUCTIONS)
        return paths + [(path, size / len(units)) for path in units]
    name = f"rdk_{spec.name}.c"
    cg = ca.CodeGenerator(name, {"with_header": False, "with_mem": False, "casadi_real": "double",
                                 "casadi_int": "long long"})
    cg.add(spec.function)
    cg.generate(directory + os.sep)
    path = os.path.join(directory, name)
    with open(path) as fh:
        text = fh.read()
    # The binding always passes every argument and result pointer: drop CasADi's NULL checks.
    text = re.sub(r"arg\[(\d+)\]\? arg\[\1\]\[(\d+)\] : 0", r"arg[\1][\2]", text)
    text = re.sub(r"if \(res\[(\d+)\]!=0\) ", "", text)
    with open(path, "w") as fh:
        fh.write(text)
    paths.append((path, size))
    return paths


def _evaluator(spec):
    """``static void rdk_<name>_eval(const double **in, double **out)``: the kernel on one sample, every
    output written densely in C order (structural zeros included). Scratch space on the C stack, so it
    is reentrant (the batch loops run without the GIL)."""
    if spec.composite is not None:
        body = (f"    {loops.LOOP_FUNCTIONS[spec.name]}(in, out);\n" if spec.composite == "loops"
                else c_runtime.template(COMPOSITE_BODIES[spec.composite], n=spec.outputs[0][0]))
        return f"static void rdk_{spec.name}_eval(const double **in, double **out)\n{{\n{body}}}\n"
    F, nin, nout = spec.function, len(spec.inputs), len(spec.outputs)
    lines = [f"static void rdk_{spec.name}_eval(const double **in, double **out)", "{",
             f"    double w[{max(F.sz_w(), 1)}]; casadi_int iw[{max(F.sz_iw(), 1)}];",
             f"    const double *arg[{max(F.sz_arg(), nin)}]; double *res[{max(F.sz_res(), nout)}];"]
    lines += [f"    arg[{k}] = in[{k}];" for k in range(nin)]
    for k, idx in enumerate(spec.scatter):
        if idx is None:
            lines.append(f"    res[{k}] = out[{k}];")
        else:
            lines.append(f"    double nz{k}[{len(idx)}]; res[{k}] = nz{k};")
    lines.append(f"    rdk_{spec.name}(arg, res, iw, w, 0);")
    for k, idx in enumerate(spec.scatter):
        if idx is not None:
            lines.append(f"    memset(out[{k}], 0, {_size(spec.outputs[k])} * sizeof(double));")
            lines.append(f"    for (int j = 0; j < {len(idx)}; j++) out[{k}][rdk_{spec.name}_s{k}[j]] = nz{k}[j];")
    lines.append("}\n")
    return "\n".join(lines)


def _vector_rows(spec):
    """``static void rdk_<name>_rows(const rdk_block *b)``: the block's rows in groups of four through
    ``rdk_<name>_v4``: the inputs of four rows transposed into lanes (a last group of fewer rows repeats
    its last row in the spare lanes, so every row of every batch goes through the same code whatever N
    and the thread count), then each lane's outputs written to its row. Sparse outputs are scattered into
    a dense staging row zeroed once per block (the structural zeros sit at the same places in every row)
    and copied out; dense ones are written out directly. With ``b->stream`` the copies of rows of at
    least ``STREAM_MIN_ROW`` doubles (dense ones then through their staging row too) are non-temporal
    stores (rdk_copy_row). Scratch space comes from the
    heap once per block; if it cannot be had the block runs through the one-sample evaluator."""
    F, name = spec.function, spec.name
    nin, nout = len(spec.inputs), len(spec.outputs)
    counts = [len(idx) if idx is not None else _size(shape) for idx, shape in zip(spec.scatter, spec.outputs)]
    lines = [f"static void rdk_{name}_rows(const rdk_block *b)", "{"]
    lines.append(f"    rdk_v4 *w = rdk_alloc({max(F.sz_w(), 1)} * sizeof(rdk_v4));")
    lines += [f"    rdk_v4 *x{k} = rdk_alloc({n} * sizeof(rdk_v4));" for k, (_, n) in enumerate(spec.inputs)]
    lines += [f"    rdk_v4 *y{k} = rdk_alloc({c} * sizeof(rdk_v4));" for k, c in enumerate(counts)]
    lines += [f"    double *z{k} = rdk_alloc({_size(shape)} * sizeof(double));" for k, shape in enumerate(spec.outputs)]
    scratch = ["w"] + [f"x{k}" for k in range(nin)] + [f"y{k}" for k in range(nout)] + [f"z{k}" for k in range(nout)]
    lines.append(f"    if ({' || '.join(f'{v} == NULL' for v in scratch)}) {{")
    lines.append("        rdk_scalar_rows(b);")
    lines.append("        goto done;\n    }")
    lines.append(f"    const rdk_v4 *arg[{nin}] = {{{', '.join(f'x{k}' for k in range(nin))}}};")
    lines.append(f"    rdk_v4 *res[{nout}] = {{{', '.join(f'y{k}' for k in range(nout))}}};")
    lines.append(f"    for (npy_intp r = b->begin; r < b->end; r += {LANES}) {{")
    lines.append(f"        int n = b->end - r < {LANES} ? (int)(b->end - r) : {LANES};")
    for k, (_, size) in enumerate(spec.inputs):
        lines.append("        {")
        lines.append(f"            const double *s[{LANES}];")
        lines.append(f"            for (int l = 0; l < {LANES}; l++) s[l] = b->in[{k}] + (r + (l < n ? l : n - 1)) * {size};")
        lanes = ", ".join(f"s[{l}][j]" for l in range(LANES))
        lines.append(f"            for (int j = 0; j < {size}; j++) x{k}[j] = (rdk_v4){{{lanes}}};")
        lines.append("        }")
    lines.append(f"        rdk_{name}_v{LANES}(arg, res, w);")
    lines.append("        for (int l = 0; l < n; l++) {")
    for k, (idx, shape) in enumerate(zip(spec.scatter, spec.outputs)):
        size = _size(shape)
        lines.append(f"            double *d{k} = b->out[{k}] + (r + l) * {size};")
        stream = "b->stream" if size >= STREAM_MIN_ROW else "0"
        if idx is not None:
            lines.append(f"            for (int j = 0; j < {counts[k]}; j++) z{k}[rdk_{name}_s{k}[j]] = y{k}[j][l];")
            lines.append(f"            rdk_copy_row(d{k}, z{k}, {size}, {stream});")
        elif size < STREAM_MIN_ROW:
            lines.append(f"            for (int j = 0; j < {size}; j++) d{k}[j] = y{k}[j][l];")
        else:
            lines.append("            if (b->stream) {")
            lines.append(f"                for (int j = 0; j < {size}; j++) z{k}[j] = y{k}[j][l];")
            lines.append(f"                rdk_copy_row(d{k}, z{k}, {size}, 1);")
            lines.append("            } else {")
            lines.append(f"                for (int j = 0; j < {size}; j++) d{k}[j] = y{k}[j][l];")
            lines.append("            }")
    lines.append("        }\n    }")
    lines.append("    rdk_stream_fence();")
    lines.append("done:")
    lines += [f"    free({v});" for v in scratch]
    lines.append("}\n")
    return "\n".join(lines)


# A batch writes its outputs with non-temporal stores when they exceed this many bytes (about the size
# of the last-level cache here, 32 MB): such outputs are gone from the caches by the time anybody reads
# them, and ordinary stores would first read every destination line from memory. Only outputs whose
# rows hold at least STREAM_MIN_ROW doubles are streamed: a short row ends in a partly written cache
# line, which non-temporal stores handle badly (measured: docs/PERFORMANCE.md, streamed stores).
RDK_STREAM_BYTES = 32 << 20
STREAM_MIN_ROW = 512


def _wrapper(spec, batch, min_rows=1):
    """C source of the Python-facing function for ``spec`` (per call, or its ``_batch`` form, whose rows
    are split over threads in blocks of at least ``min_rows``)."""
    fname = spec.name + ("_batch" if batch else "")
    nin, nout = len(spec.inputs), len(spec.outputs)
    lines = [f"static PyObject *py_{fname}(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)", "{"]
    lines.append("    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);")
    lines.append(f"    const double *in[{nin}]; double *res[{nout}]; PyObject *given[{nout}]; int threads = 0;")
    lines.append(f"    PyObject *owner[{nin}] = {{0}}; PyObject *out[{nout}] = {{0}}; PyObject *result = NULL;")
    lines.append("    npy_intp rows = -1;")
    lines.append(f"    if (nargs != {nin} && nargs != {nin + nout}) {{")
    names = ", ".join(n for n, _ in spec.inputs)
    lines.append(f'        PyErr_Format(PyExc_TypeError, "{fname}() takes {nin} arguments ({names}) and optionally '
                 f'{nout} output array(s), got %zd", nargs);')
    lines.append("        return NULL;\n    }")
    lines.append(f'    if (rdk_keywords(args, nargs, kwnames, {nin}, {nout}, {int(batch)}, "{fname}", given, &threads) < 0) '
                 "return NULL;")
    for k, (name, n) in enumerate(spec.inputs):
        lines.append(f'    if (rdk_input(args[{k}], {int(batch)}, &rows, {n}, "{fname}", "{name}", &in[{k}], &owner[{k}]) < 0) '
                     "goto done;")
    for k, shape in enumerate(spec.outputs):
        dims = (["rows"] if batch else []) + [str(d) for d in shape]
        lines.append(f"    {{ npy_intp dims[] = {{{', '.join(dims)}}};")
        lines.append(f'      if (rdk_output(given[{k}], {len(dims)}, dims, "{fname}", {k}, &out[{k}]) < 0) goto done;')
        lines.append(f"      res[{k}] = (double *)PyArray_DATA((PyArrayObject *)out[{k}]); }}")
    if not batch:
        lines.append(f"    rdk_{spec.name}_eval(in, res);")
    else:
        lines.append(f"    {{ rdk_block block = {{rdk_{spec.name}_eval, {nin}, {nout}}};")
        if vectorised(spec):
            per_row = sum(_size(shape) for shape in spec.outputs) * 8
            lines.append(f"      block.rows = rdk_{spec.name}_rows; block.group = {LANES};")
            lines.append(f"      block.stream = (double)rows * {per_row} > {RDK_STREAM_BYTES}.0;")
        for k, (_, n) in enumerate(spec.inputs):
            lines.append(f"      block.in[{k}] = in[{k}]; block.in_size[{k}] = {n};")
        for k, shape in enumerate(spec.outputs):
            lines.append(f"      block.out[{k}] = res[{k}]; block.out_size[{k}] = {_size(shape)};")
        lines.append("      block.begin = 0; block.end = rows;")
        lines.append("      if (threads < 1) threads = rdk_default_threads();")
        lines.append("      Py_BEGIN_ALLOW_THREADS")
        lines.append(f"      rdk_parallel_rows(&block, rows, threads, {min_rows});")
        lines.append("      Py_END_ALLOW_THREADS }")
    if nout == 1:
        lines.append("    result = out[0]; out[0] = NULL;")
    else:
        lines.append(f"    result = PyTuple_Pack({nout}, {', '.join(f'out[{k}]' for k in range(nout))});")
    lines.append("done:")
    lines += [f"    Py_XDECREF(owner[{k}]);" for k in range(nin)]
    lines += [f"    Py_XDECREF(out[{k}]);" for k in range(nout)]
    lines.append("    return result;\n}\n")
    return "\n".join(lines)


# A thread's block of rows holds at least this many arithmetic operations (about 100 µs of work here),
# so that creating the thread (tens of µs) stays small against it.
RDK_MIN_BLOCK_FLOPS = 200_000


def _min_block_rows(spec):
    """Rows per thread below which a batch is not split further (composites: every row is large)."""
    if spec.function is None:
        return 1
    return max(1, -(-RDK_MIN_BLOCK_FLOPS // max(flop_count(spec.function), 1)))


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def module_source(kernel_set, module_name, attributes):
    """C source of the extension module ``module_name`` binding every kernel of ``kernel_set`` (those not
    ``bound`` are only evaluators, for the composites);
    ``attributes`` (str -> int or str) become module constants."""
    parts = [c_runtime.blocks(*BINDING_RUNTIME)]
    for spec in kernel_set.specs:
        if spec.function is not None:
            parts.append(f"int rdk_{spec.name}(const double **arg, double **res, casadi_int *iw, double *w, int mem);")
        if vectorised(spec):
            parts.append(f"void rdk_{spec.name}_v{LANES}(const rdk_v4 **arg, rdk_v4 **res, rdk_v4 *w);")
        for k, idx in enumerate(spec.scatter):
            if idx is not None:
                parts.append(f"static const int rdk_{spec.name}_s{k}[{len(idx)}] = {{{', '.join(map(str, idx))}}};")
    parts.append(f"static const int rdk_lambda[{max(len(kernel_set.dof_parents), 1)}] = "
                 f"{{{', '.join(map(str, kernel_set.dof_parents)) or '0'}}};")
    parts.append(c_runtime.blocks("ltdl.c"))
    parts.append(kernel_set.c_source)    # the model tables and loops of kernels.loops ("" without them)
    parts += [_evaluator(spec) for spec in kernel_set.specs]  # composites come after what they call
    parts += [_vector_rows(spec) for spec in kernel_set.specs if vectorised(spec)]
    methods = []
    for spec in (spec for spec in kernel_set.specs if spec.bound):
        for batch in (False, True) if spec.batch else (False,):
            fname = spec.name + ("_batch" if batch else "")
            parts.append(_wrapper(spec, batch, _min_block_rows(spec)))
            doc = f"{fname}({', '.join(n.upper() if batch else n for n, _ in spec.inputs)}, *, out=None"
            doc += ", threads=None)" if batch else ")"
            methods.append(f'    {{"{fname}", (PyCFunction)(void (*)(void))py_{fname}, METH_FASTCALL | METH_KEYWORDS, '
                           f'"{doc}"}},')
    parts.append("static PyMethodDef rdk_methods[] = {\n" + "\n".join(methods) + "\n    {NULL, NULL, 0, NULL}\n};")
    parts.append(f'static struct PyModuleDef rdk_module = {{PyModuleDef_HEAD_INIT, "{module_name}", '
                 '"Compiled robodyn_ros kernels for one model.", -1, rdk_methods};')
    init = [f"PyMODINIT_FUNC PyInit_{module_name}(void)", "{", "    PyObject *m;", "    import_array();",
            "    m = PyModule_Create(&rdk_module);", "    if (m == NULL) return NULL;"]
    for key, value in attributes.items():
        if isinstance(value, int):
            init.append(f'    PyModule_AddIntConstant(m, "{key}", {value});')
        else:
            text = str(value).replace("\\", "\\\\").replace('"', '\\"')
            init.append(f'    PyModule_AddStringConstant(m, "{key}", "{text}");')
    init += ["    return m;", "}"]
    parts.append("\n".join(init))
    return "\n".join(parts) + "\n"
