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
