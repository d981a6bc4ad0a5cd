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

from . import loops
from .symbolic import flop_count

# Bump when the generated code or the binding changes: it is part of the disk-cache key.
GENERATOR_VERSION = "8"

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
#ifdef __AVX__
#include <immintrin.h>
#endif

typedef long long casadi_int;

#define RDK_MAX_THREADS 64
#define RDK_MAX_ARGS 8
#define RDK_THREAD_STACK_BYTES ((size_t)64 << 20)

typedef void (*rdk_eval_fn)(const double **in, double **out);

/* Four samples side by side: lane l of every element is sample l (GCC vector extension). */
typedef double rdk_v4 __attribute__((vector_size(32)));

/* Rows [begin, end) of a batch: row r of input k starts at in[k] + r * in_size[k], likewise outputs.
   `rows` (may be NULL) runs the whole block in groups of `group` rows (the 4-lane path); `stream`: write
   the outputs with non-temporal stores. */
typedef struct rdk_block rdk_block;
struct rdk_block {
    rdk_eval_fn eval;
    int nin, nout;
    const double *in[RDK_MAX_ARGS];
    double *out[RDK_MAX_ARGS];
    npy_intp in_size[RDK_MAX_ARGS], out_size[RDK_MAX_ARGS];
    npy_intp begin, end;
    void (*rows)(const rdk_block *b);
    int group, stream;
};

/* The block row by row through the one-sample evaluator. */
static void rdk_scalar_rows(const rdk_block *b)
{
    const double *row_in[RDK_MAX_ARGS];
    double *row_out[RDK_MAX_ARGS];
    for (npy_intp r = b->begin; r < b->end; r++) {
        for (int k = 0; k < b->nin; k++) row_in[k] = b->in[k] + r * b->in_size[k];
        for (int k = 0; k < b->nout; k++) row_out[k] = b->out[k] + r * b->out_size[k];
        b->eval(row_in, row_out);
    }
}

static void *rdk_run_block(void *arg)
{
    const rdk_block *b = (const rdk_block *)arg;
    if (b->rows != NULL) b->rows(b);
    else rdk_scalar_rows(b);
    return NULL;
}

/* 32-byte aligned scratch of `bytes` bytes, zero-filled (NULL when out of memory). */
static void *rdk_alloc(size_t bytes)
{
    bytes = (bytes + 31) / 32 * 32;
    void *p = aligned_alloc(32, bytes > 0 ? bytes : 32);
    if (p != NULL) memset(p, 0, bytes);
    return p;
}

/* dst[0..n) = src[0..n); with `stream`, by non-temporal stores that bypass the caches (no read of the
   destination lines, no eviction of the working set); rdk_stream_fence() orders them. */
static void rdk_copy_row(double *dst, const double *src, npy_intp n, int stream)
{
#ifdef __AVX__
    if (stream) {
        npy_intp j = 0;
        for (; j < n && ((size_t)(dst + j) & 31) != 0; j++) dst[j] = src[j];
        for (; j + 4 <= n; j += 4) _mm256_stream_pd(dst + j, _mm256_loadu_pd(src + j));
        for (; j < n; j++) dst[j] = src[j];
        return;
    }
#endif
    memcpy(dst, src, (size_t)n * sizeof(double));
}

static void rdk_stream_fence(void)
{
#ifdef __AVX__
    _mm_sfence();
#endif
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
   included), at least `min_rows` rows per block, block bounds on multiples of proto->group. A thread that cannot be created has its block run by
   the caller. Called without the GIL. */
static void rdk_parallel_rows(const rdk_block *proto, npy_intp rows, int threads, npy_intp min_rows)
{
    rdk_block blocks[RDK_MAX_THREADS];
    pthread_t tid[RDK_MAX_THREADS];
    int started[RDK_MAX_THREADS] = {0};
    npy_intp most = rows / (min_rows > 0 ? min_rows : 1);
    npy_intp group = proto->group > 1 ? proto->group : 1, units = (rows + group - 1) / group;
    if (threads > most) threads = (int)most;
    if (threads > units) threads = (int)units;
    if (threads > RDK_MAX_THREADS) threads = RDK_MAX_THREADS;
    if (threads < 1) threads = 1;
    for (int t = 0; t < threads; t++) {
        blocks[t] = *proto;
        /* Block bounds on multiples of `group`, so that a row falls in the same group and lane whatever
           the thread count. */
        npy_intp begin = group * (units * t / threads), end = group * (units * (t + 1) / threads);
        blocks[t].begin = begin < rows ? begin : rows;
        blocks[t].end = end < rows ? end : rows;
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

# the C bodies of the composite kernels (KernelSpec.composite), formatted with n = nv
COMPOSITE_BODIES = {"aba_derivatives": ABA_DERIVATIVES_BODY}


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


# The 4-lane forms of the element-wise functions: the scalar libm function on each lane (every lane gets
# the per-call code's value), except sin and cos, which with ``RDK_LIBMVEC`` (build.LIBMVEC: glibc's
# vector math library is there) and AVX2 are glibc's 4-lane ``_ZGVdN4v_sin`` / ``_ZGVdN4v_cos``
# (at most 4 ulp from the correctly rounded value, glibc manual). Measured on this machine: sin + cos of
# one argument 14.7 ns by libm (gcc merges them into one sincos), 3.1 ns per lane by libmvec; Talos's rnea
# takes 44 such pairs per sample.
_V4_HEADER = r"""#include <math.h>
typedef double rdk_v4 __attribute__((vector_size(32)));
#define RDK_SPLAT(c) ((rdk_v4){c, c, c, c})
#define RDK_LANES1(f) static inline rdk_v4 rdk_##f##4(rdk_v4 x) \
    { return (rdk_v4){f(x[0]), f(x[1]), f(x[2]), f(x[3])}; }
#define RDK_LANES2(f) static inline rdk_v4 rdk_##f##4(rdk_v4 x, rdk_v4 y) \
    { return (rdk_v4){f(x[0], y[0]), f(x[1], y[1]), f(x[2], y[2]), f(x[3], y[3])}; }
#if defined(RDK_LIBMVEC) && defined(__AVX2__)
rdk_v4 _ZGVdN4v_sin(rdk_v4 x);
rdk_v4 _ZGVdN4v_cos(rdk_v4 x);
#define rdk_sin4 _ZGVdN4v_sin
#define rdk_cos4 _ZGVdN4v_cos
#else
RDK_LANES1(sin) RDK_LANES1(cos)
#endif
RDK_LANES1(sqrt) RDK_LANES1(tan) RDK_LANES1(exp) RDK_LANES1(log)
RDK_LANES1(fabs) RDK_LANES1(atan) RDK_LANES1(asin) RDK_LANES1(acos) RDK_LANES1(tanh)
RDK_LANES2(pow) RDK_LANES2(atan2) RDK_LANES2(fmin) RDK_LANES2(fmax)
"""


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


def chunked_sources(name, function, directory, chunk=None, per_unit=None, lanes=1):
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
    chunk, per_unit = chunk or CHUNK_INSTRUCTIONS, per_unit or TU_INSTRUCTIONS
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
    header = (_V4_HEADER if lanes > 1 else "#include <math.h>\n") + "#define RDK_CHUNK __attribute__((noinline))\n"
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


# Batch kernels that also get a 4-lane evaluator (:func:`chunked_sources` with ``lanes=4``) for their
# ``_batch`` form: the three the benchmark's batch target names. aba, crba and the aba_derivatives
# composite keep the one-sample loop (their 4-lane code would add gcc time for no stated target).
# The gain per sample, measured: docs/PERFORMANCE.md (batch kernels).
VECTOR_BATCH = ("rnea", "regressor", "rnea_derivatives")
LANES = 4


def is_vector_unit(path):
    """Whether the C file at ``path`` holds 4-lane code (written by :func:`kernel_sources`)."""
    return f"_v{LANES}_u" in os.path.basename(path)


def vectorised(spec):
    """Whether ``spec``'s batch form runs through the 4-lane evaluator."""
    return (spec.batch and spec.function is not None and spec.name in VECTOR_BATCH
            and chunkable(spec.function))


def kernel_sources(kernel_set, directory):
    """Write the C files of every kernel into ``directory``: one CasADi-generated file per kernel, or the
    translation units of :func:`chunked_sources` for kernels above ``CHUNK_THRESHOLD`` instructions; and
    for the kernels of :func:`vectorised` their 4-lane form (one function below ``CHUNK_THRESHOLD``
    instructions, chunked above).
    Returns ``[(path, instructions compiled in it), ...]``."""
    paths = []
    for spec in kernel_set.specs:
        if spec.function is None:  # a composite, written in the module itself
            continue
        size = spec.function.n_instructions()
        if vectorised(spec):
            chunk = CHUNK_INSTRUCTIONS if size > CHUNK_THRESHOLD else max(size, 1)
            units = chunked_sources(f"rdk_{spec.name}_v{LANES}", spec.function, directory, chunk=chunk,
                                    per_unit=max(TU_INSTRUCTIONS, chunk), lanes=LANES)
            paths += [(path, size / len(units)) for path in units]
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
    if spec.composite is not None:
        body = (f"    {loops.LOOP_FUNCTIONS[spec.name]}(in, out);" if spec.composite == "loops"
                else COMPOSITE_BODIES[spec.composite].format(n=spec.outputs[0][0]))
        return f"static void rdk_{spec.name}_eval(const double **in, double **out)\n{{\n{body}\n}}\n"
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
    """C source of the extension module ``module_name`` binding every kernel of ``kernel_set``;
    ``attributes`` (str -> int or str) become module constants."""
    parts = [_PRELUDE]
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
    parts.append(_LTDL)
    parts.append(kernel_set.c_source)    # the model tables and loops of kernels.loops ("" without them)
    parts += [_evaluator(spec) for spec in kernel_set.specs]  # composites come after what they call
    parts += [_vector_rows(spec) for spec in kernel_set.specs if vectorised(spec)]
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
