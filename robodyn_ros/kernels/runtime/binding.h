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
