/* The pgoutput TupleData decoder, compiled.
 *
 * Every captured row passes through this loop once per image, and in pure Python it is
 * about a sixth of a drain's per-event cost (a bytes slice, a decode and a list append per
 * column, each through the interpreter). The reference implementation is ``_tuple_py`` in
 * pgoutput.py: this function must return exactly what it returns for every well-formed
 * tuple (tests/unit/test_pgoutput_compiled.py replays recorded streams through both). It is
 * stricter on malformed input only: a column running past the end of the buffer raises
 * ValueError here (decode_at turns it into PgOutputError), where the Python slice would
 * silently come up short.
 *
 * configure(unchanged_toast, error_class) must be called once before tuple_at (pgoutput.py
 * does it on import), so the module holds no Python-level imports of its own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *unchanged_toast = NULL; /* the UNCHANGED_TOAST marker object */
static PyObject *error_class = NULL;     /* PgOutputError */

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *marker, *error;
    if (!PyArg_ParseTuple(args, "OO:configure", &marker, &error))
        return NULL;
    if (!PyType_Check(error) || !PyType_IsSubtype((PyTypeObject *)error,
                                                  (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "configure: error_class must be an exception type");
        return NULL;
    }
    Py_INCREF(marker);
    Py_XSETREF(unchanged_toast, marker);
    Py_INCREF(error);
    Py_XSETREF(error_class, error);
    Py_RETURN_NONE;
}

static inline uint16_t
read_u16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static inline int32_t
read_i32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

static PyObject *
truncated(Py_ssize_t pos, Py_ssize_t start)
{
    /* a plain ValueError: decode_at words it "truncated or malformed ..." like a short read */
    PyErr_Format(PyExc_ValueError, "tuple data runs past the end of the message at byte %zd",
                 pos - start);
    return NULL;
}

/* tuple_at(buf, pos, start=0) -> (values, next_pos); see _tuple_py. */
static PyObject *
tuple_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "tuple_at(buf, pos, start=0)");
        return NULL;
    }
    if (error_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_pgoutput_c.configure was not called");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t start = 0;
    if (nargs == 3) {
        start = PyLong_AsSsize_t(args[2]);
        if (start == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    const Py_ssize_t size = view.len;
    PyObject *values = NULL;

    if (pos < 0 || pos + 2 > size) {
        truncated(pos, start);
        goto fail;
    }
    /* Python's "!h" reads a signed count; a negative one gives an empty range there */
    int16_t n = (int16_t)read_u16(buf + pos);
    pos += 2;
    values = PyList_New(n > 0 ? n : 0);
    if (values == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pos >= size) {
            truncated(pos, start);
            goto fail;
        }
        unsigned char kind = buf[pos];
        PyObject *item;
        if (kind == 't' || kind == 'b') {
            if (pos + 5 > size) {
                truncated(pos, start);
                goto fail;
            }
            int32_t length = read_i32(buf + pos + 1);
            pos += 5;
            if (length < 0 || length > size - pos) {
                truncated(pos, start);
                goto fail;
            }
            if (kind == 't')
                item = PyUnicode_DecodeUTF8((const char *)buf + pos, length, NULL);
            else
                item = PyBytes_FromStringAndSize((const char *)buf + pos, length);
            if (item == NULL)
                goto fail;
            pos += length;
        }
        else if (kind == 'n') {
            item = Py_NewRef(Py_None);
            pos += 1;
        }
        else if (kind == 'u') {
            item = Py_NewRef(unchanged_toast);
            pos += 1;
        }
        else {
            PyObject *shown = PyUnicode_FromOrdinal(kind);
            if (shown != NULL) {
                PyErr_Format(error_class, "unknown tuple data kind %R at byte %zd", shown,
                             pos - start);
                Py_DECREF(shown);
            }
            goto fail;
        }
        PyList_SET_ITEM(values, i, item);
    }
    PyBuffer_Release(&view);
    PyObject *next = PyLong_FromSsize_t(pos);
    if (next == NULL) {
        Py_DECREF(values);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, values, next);
    Py_DECREF(values);
    Py_DECREF(next);
    return result;

fail:
    PyBuffer_Release(&view);
    Py_XDECREF(values);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(unchanged_toast, error_class): the marker and the exception tuple_at uses."},
    {"tuple_at", (PyCFunction)(void (*)(void))tuple_at, METH_FASTCALL,
     "tuple_at(buf, pos, start=0) -> (values, next_pos): one pgoutput TupleData."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connectors.postgres._pgoutput_c",
    "The pgoutput TupleData decoder, compiled (reference: pgoutput._tuple_py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__pgoutput_c(void)
{
    return PyModule_Create(&module);
}
