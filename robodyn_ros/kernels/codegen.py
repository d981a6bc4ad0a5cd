"""C sources of a kernel module: one CasADi-generated translation unit per kernel, or for kernels above
``CHUNK_THRESHOLD`` instructions (Talos's) several units of chunked straight-line code
(:func:`chunked_sources`), all compiled in parallel, and a CPython extension module that binds them.

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
computed by the same code on its own stack whatever the thread count, so results are bit-identical.
"""
from __future__ import annotations

import os
import re

import casadi as ca

# Bump when the generated code or the binding changes: it is part of the disk-cache key.
GENERATOR_VERSION = "6"

_PRELUDE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

typedef long long casadi_int;

#define RDK_MAX_THREADS 64
#define RDK_MAX_ARGS 8
#define RDK_THREAD_STACK_BYTES ((size_t)64 << 20)

typedef void (*rdk_eval_fn)(const double **in, double **out);

/* Rows [begin, end) of a batch: row r of input k starts at in[k] + r * in_size[k], likewise outputs. */
typedef struct {
    rdk_eval_fn eval;
    int nin, nout;
    const double *in[RDK_MAX_ARGS];
    double *out[RDK_MAX_ARGS];
    npy_intp in_size[RDK_MAX_ARGS], out_size[RDK_MAX_ARGS];
    npy_intp begin, end;
} rdk_block;

static void *rdk_run_block(void *arg)
{
    const rdk_block *b = (const rdk_block *)arg;
    const double *row_in[RDK_MAX_ARGS];
    double *row_out[RDK_MAX_ARGS];
    for (npy_intp r = b->begin; r < b->end; r++) {
        for (int k = 0; k < b->nin; k++) row_in[k] = b->in[k] + r * b->in_size[k];
        for (int k = 0; k < b->nout; k++) row_out[k] = b->out[k] + r * b->out_size[k];
        b->eval(row_in, row_out);
    }
    return NULL;
}

/* Threads when the caller does not say: $ROBODYN_THREADS, else the CPUs of this process's affinity mask. */
static int rdk_default_threads(void)
{
    const char *env = getenv("ROBODYN_THREADS");
    int n = 0;
    if (env != NULL && *env) n = atoi(env);
    if (n < 1) {
#ifdef CPU_COUNT
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
        if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    }
    if (n < 1) n = 1;
    return n > RDK_MAX_THREADS ? RDK_MAX_THREADS : n;
}

/* All rows of *proto, split into contiguous blocks over up to `threads` threads (the calling one
   included), at least `min_rows` rows per block. A thread that cannot be created has its block run by
   the caller. Called without the GIL. */
static void rdk_parallel_rows(const rdk_block *proto, npy_intp rows, int threads, npy_intp min_rows)
{
    rdk_block blocks[RDK_MAX_THREADS];
    pthread_t tid[RDK_MAX_THREADS];
    int started[RDK_MAX_THREADS] = {0};
    npy_intp most = rows / (min_rows > 0 ? min_rows : 1);
    if (threads > most) threads = (int)most;
    if (threads > RDK_MAX_THREADS) threads = RDK_MAX_THREADS;
    if (threads < 1) threads = 1;
    for (int t = 0; t < threads; t++) {
        blocks[t] = *proto;
        blocks[t].begin = rows * t / threads;
        blocks[t].end = rows * (t + 1) / threads;
    }
    if (threads > 1) {
        pthread_attr_t attr;
        int attr_ok = pthread_attr_init(&attr) == 0;
        if (attr_ok) pthread_attr_setstacksize(&attr, RDK_THREAD_STACK_BYTES);
        for (int t = 1; t < threads; t++)
            started[t] = pthread_create(&tid[t], attr_ok ? &attr : NULL, rdk_run_block, &blocks[t]) == 0;
        if (attr_ok) pthread_attr_destroy(&attr);
    }
    rdk_run_block(&blocks[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else rdk_run_block(&blocks[t]);
    }
}

/* Keyword arguments: out= (one array, or a tuple/list of nout arrays) and, for batch forms, threads=
   (int >= 1, or None for the default). Fills given[0..nout) (borrowed) and *threads. */
static int rdk_keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int nin, int nout, int batch,
                        const char *fname, PyObject **given, int *threads)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (int k = 0; k < nout; k++) given[k] = nargs > nin ? args[nin + k] : NULL;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        if (PyUnicode_CompareWithASCIIString(key, "out") == 0) {
            if (nargs > nin) {
                PyErr_Format(PyExc_TypeError, "%s(): outputs given both positionally and as out=", fname);
                return -1;
            }
            if (value == Py_None) continue;
            if (PyTuple_Check(value) || PyList_Check(value)) {
                PyObject *seq = PySequence_Fast(value, "out");
                if (seq == NULL) return -1;
                if (PySequence_Fast_GET_SIZE(seq) != nout) {
                    PyErr_Format(PyExc_ValueError, "%s(): out= holds %zd arrays, expected %d", fname,
                                 PySequence_Fast_GET_SIZE(seq), nout);
                    Py_DECREF(seq);
                    return -1;
                }
                for (int k = 0; k < nout; k++) given[k] = PySequence_Fast_GET_ITEM(seq, k);  /* kept alive by value */
                Py_DECREF(seq);
            } else if (nout == 1) {
                given[0] = value;
            } else {
                PyErr_Format(PyExc_ValueError, "%s(): out= must be a tuple of %d arrays", fname, nout);
                return -1;
            }
        } else if (batch && PyUnicode_CompareWithASCIIString(key, "threads") == 0) {
            if (value == Py_None) continue;
            long t = PyLong_AsLong(value);
            if (t == -1 && PyErr_Occurred()) return -1;
            if (t < 1) {
                PyErr_Format(PyExc_ValueError, "%s(): threads must be >= 1, got %ld", fname, t);
                return -1;
            }
            *threads = t > RDK_MAX_THREADS ? RDK_MAX_THREADS : (int)t;
        } else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname, key);
            return -1;
        }
    }
    return 0;
}

/* Data pointer of a float64 array of shape (n,) [rows < 0] or (rows, n) [rows >= 0, -1 = any rows].
   Fast path: the argument itself. Otherwise a converted copy owned through *owner. */
static int rdk_input(PyObject *obj, int batch, npy_intp *rows, npy_intp n, const char *fname, const char *name,
                     const double **data, PyObject **owner)
{
    PyArrayObject *arr;
    if (PyArray_CheckExact(obj)) {
        arr = (PyArrayObject *)obj;
        if (PyArray_TYPE(arr) == NPY_DOUBLE && PyArray_NDIM(arr) == 1 + batch && PyArray_ISCARRAY_RO(arr)
            && PyArray_DIMS(arr)[batch] == n && (!batch || *rows < 0 || PyArray_DIMS(arr)[0] == *rows)) {
            if (batch) *rows = PyArray_DIMS(arr)[0];
            *data = (const double *)PyArray_DATA(arr);
            return 0;
        }
    }
    arr = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 0, 0, NPY_ARRAY_IN_ARRAY);
    if (arr == NULL) return -1;
    if (PyArray_NDIM(arr) != 1 + batch || PyArray_DIMS(arr)[batch] != n
        || (batch && *rows >= 0 && PyArray_DIMS(arr)[0] != *rows)) {
        PyObject *shape = PyObject_GetAttrString((PyObject *)arr, "shape");
        if (!batch)
            PyErr_Format(PyExc_ValueError, "%s(): %s has shape %R, expected (%zd,)", fname, name, shape, (Py_ssize_t)n);
        else if (*rows < 0)
            PyErr_Format(PyExc_ValueError, "%s(): %s has shape %R, expected (N, %zd)", fname, name, shape, (Py_ssize_t)n);
        else
            PyErr_Format(PyExc_ValueError, "%s(): %s has shape %R, expected (%zd, %zd)", fname, name, shape,
                         (Py_ssize_t)*rows, (Py_ssize_t)n);
        Py_XDECREF(shape);
        Py_DECREF(arr);
        return -1;
    }
    if (batch) *rows = PyArray_DIMS(arr)[0];
    *owner = (PyObject *)arr;
    *data = (const double *)PyArray_DATA(arr);
    return 0;
}

/* A writeable output: the caller's array (checked) or a fresh one. New reference in *out. */
static int rdk_output(PyObject *given, int nd, npy_intp *dims, const char *fname, int index, PyObject **out)
{
    if (given == NULL) {
        *out = PyArray_SimpleNew(nd, dims, NPY_DOUBLE);
        return *out == NULL ? -1 : 0;
    }
    if (PyArray_Check(given)) {
        PyArrayObject *arr = (PyArrayObject *)given;
        int ok = PyArray_TYPE(arr) == NPY_DOUBLE && PyArray_ISCARRAY(arr) && PyArray_NDIM(arr) == nd;
        for (int k = 0; ok && k < nd; k++) ok = PyArray_DIMS(arr)[k] == dims[k];
        if (ok) {
            Py_INCREF(given);
            *out = given;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "%s(): output %d must be a writeable C-contiguous float64 array of the "
                 "result's shape", fname, index);
    return -1;
}
"""


_LTDL = r"""
/* M = L^T D L in place, keeping the branch-induced sparsity (Featherstone RBDA Table 6.3): H (n, n) row
   major holds M's lower triangle on entry, L's strictly lower entries and D's diagonal on exit. */
static void rdk_ltdl(double *H, int n)
{
    for (int k = n - 1; k >= 0; k--) {
        for (int i = rdk_lambda[k]; i >= 0; i = rdk_lambda[i]) {
            double alpha = H[k * n + i] / H[k * n + k];
            for (int j = i; j >= 0; j = rdk_lambda[j]) H[i * n + j] -= alpha * H[k * n + j];
            H[k * n + i] = alpha;
        }
    }
}

/* X <- M^-1 X for X (n, m) row major, from the factors of rdk_ltdl (RBDA Table 6.4 applied to all
   columns at once, so that the inner loops run over contiguous rows). */
static void rdk_ltdl_solve(const double *H, int n, double *X, int m)
{
    for (int k = n - 1; k >= 0; k--)
        for (int i = rdk_lambda[k]; i >= 0; i = rdk_lambda[i]) {
            double l = H[k * n + i];
            for (int c = 0; c < m; c++) X[i * m + c] -= l * X[k * m + c];
        }
    for (int k = 0; k < n; k++) {
        double d = H[k * n + k];
        for (int c = 0; c < m; c++) X[k * m + c] /= d;
    }
    for (int k = 0; k < n; k++)
        for (int i = rdk_lambda[k]; i >= 0; i = rdk_lambda[i]) {
            double l = H[k * n + i];
            for (int c = 0; c < m; c++) X[k * m + c] -= l * X[i * m + c];
        }
}
"""

# ``aba_derivatives`` from the other kernels (Carpentier and Mansard 2018, Sec. III-B):
# a = ABA(q, v, tau); (dtau_dq, dtau_dv, M) = RNEA derivatives at a; da/dq = -M^-1 dtau_dq,
# da/dv = -M^-1 dtau_dv, da/dtau = M^-1, the solves by the sparse L^T D L factors of M.
ABA_DERIVATIVES_BODY = """\
    double acc[{n}], H[{n} * {n}];
    double *aba_out[1] = {{acc}};
    rdk_aba_eval(in, aba_out);
    const double *rnea_in[3] = {{in[0], in[1], acc}};
    double *rnea_out[3] = {{out[0], out[1], H}};
    rdk_rnea_derivatives_eval(rnea_in, rnea_out);
    rdk_ltdl(H, {n});
    rdk_ltdl_solve(H, {n}, out[0], {n});
    rdk_ltdl_solve(H, {n}, out[1], {n});
    for (int j = 0; j < {n} * {n}; j++) {{ out[0][j] = -out[0][j]; out[1][j] = -out[1][j]; }}
    memset(out[2], 0, {n} * {n} * sizeof(double));
    for (int c = 0; c < {n}; c++) out[2][c * {n} + c] = 1.0;
    rdk_ltdl_solve(H, {n}, out[2], {n});"""


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


def chunked_sources(name, function, directory, chunk=None, per_unit=None):
    """C files computing the SX ``function`` as ``int <name>(const double **arg, double **res,
    casadi_int *iw, double *w, int mem)`` (CasADi's calling convention; ``w`` holds ``sz_w()`` doubles),
    the algorithm cut into ``noinline`` functions of at most ``chunk`` instructions. Inside a chunk every
    work slot of the algorithm is a local variable; a slot whose value crosses a chunk boundary is stored
    to ``w`` at the end of the chunk that last wrote it and loaded at the start of each chunk that reads
    it. The chunks are spread over translation units of at most ``per_unit`` instructions (compiled in
    parallel); returns their paths."""
    chunk, per_unit = chunk or CHUNK_INSTRUCTIONS, per_unit or TU_INSTRUCTIONS
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
        elif op == ca.OP_INPUT:
            i, nz = function.instruction_input(k)
            expr = f"arg[{i}][{nz}]"
        elif op in _C_UNARY:
            expr = _C_UNARY[op].format(f"a{ins[0]}")
        else:
            expr = _C_BINARY[op].format(f"a{ins[0]}", f"a{ins[1]}")
        body[c].append(f"  a{out}={expr};")
    chunks = []
    for c in range(len(starts)):
        used = set(live_in[c])
        for line in body[c]:
            used.update(int(t) for t in re.findall(r"\ba(\d+)", line))
        lines = [f"void {name}_c{c}(const double **arg, double **res, double *w)", "{"]
        decl = sorted(used)
        for i in range(0, len(decl), 12):
            lines.append("  double " + ", ".join(f"a{j}" for j in decl[i:i + 12]) + ";")
        lines += [f"  a{j}=w[{j}];" for j in sorted(live_in[c])]
        lines += body[c]
        lines += [f"  w[{j}]=a{j};" for j in sorted(live_out[c])]
        lines.append("}\n")
        chunks.append("\n".join(lines))
    header = ("#include <math.h>\n"
              f"#define RDK_CHUNK __attribute__((noinline))\n")
    decls = "".join(f"RDK_CHUNK void {name}_c{c}(const double **arg, double **res, double *w);\n" for c in range(len(chunks)))
    paths, per_file = [], max(1, per_unit // chunk)
    for u in range(0, len(chunks), per_file):
        text = header + decls + "\n".join(chunks[u:u + per_file])
        if u == 0:
            calls = "".join(f"  {name}_c{c}(arg, res, w);\n" for c in range(len(chunks)))
            text += (f"\nint {name}(const double **arg, double **res, long long *iw, double *w, int mem)\n"
                     f"{{\n{calls}  return 0;\n}}\n")
        path = os.path.join(directory, f"{name}_u{u // per_file}.c")
        with open(path, "w") as fh:
            fh.write(text)
        paths.append(path)
    return paths


def kernel_sources(kernel_set, directory):
    """Write the C files of every kernel into ``directory``: one CasADi-generated file per kernel, or the
    translation units of :func:`chunked_sources` for kernels above ``CHUNK_THRESHOLD`` instructions.
    Returns ``[(path, instructions compiled in it), ...]``."""
    paths = []
    for spec in kernel_set.specs:
        if spec.function is None:  # a composite, written in the module itself
            continue
        size = spec.function.n_instructions()
        if size > CHUNK_THRESHOLD and chunkable(spec.function):
            units = chunked_sources(f"rdk_{spec.name}", spec.function, directory)
            paths += [(path, size / len(units)) for path in units]
            continue
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
    if spec.c_body is not None:
        return f"static void rdk_{spec.name}_eval(const double **in, double **out)\n{{\n{spec.c_body}\n}}\n"
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
    from .symbolic import flop_count
    return max(1, -(-RDK_MIN_BLOCK_FLOPS // max(flop_count(spec.function), 1)))


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def module_source(kernel_set, module_name, attributes):
    """C source of the extension module ``module_name`` binding every kernel of ``kernel_set``;
    ``attributes`` (str -> int or str) become module constants."""
    parts = [_PRELUDE]
    for spec in kernel_set.specs:
        if spec.function is not None:
            parts.append(f"int rdk_{spec.name}(const double **arg, double **res, casadi_int *iw, double *w, int mem);")
        for k, idx in enumerate(spec.scatter):
            if idx is not None:
                parts.append(f"static const int rdk_{spec.name}_s{k}[{len(idx)}] = {{{', '.join(map(str, idx))}}};")
    parts.append(f"static const int rdk_lambda[{max(len(kernel_set.dof_parents), 1)}] = "
                 f"{{{', '.join(map(str, kernel_set.dof_parents)) or '0'}}};")
    parts.append(_LTDL)
    parts += [_evaluator(spec) for spec in kernel_set.specs]  # composites come after what they call
    methods = []
    for spec in kernel_set.specs:
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
