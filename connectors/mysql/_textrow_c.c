/* A MySQL text-protocol result row, compiled.
 *
 * A snapshot reads every row of a table through PyMySQL's streaming cursor, whose
 * ``MySQLResult._read_row_from_packet`` walks the row packet in Python: per column a
 * length-coded string read, a decode and the column's converter. That walk was over 40 % of a
 * MariaDB snapshot's CPU. ``read_row`` does the walk in C and still calls the same
 * converters, so the values are PyMySQL's own; PyMySQL's method stays the reference and is
 * what runs for anything this function does not take (it returns None then, see below).
 * tests/integration/test_mysql_text_rows.py compares the two on a real MariaDB.
 *
 *   read_row(data: bytes, pos: int, converters: tuple[(encoding | None, converter | None)])
 *     -> tuple | None
 *
 * ``data[pos:]`` is the row packet's payload after PyMySQL's header handling (the packet's
 * ``_data`` and ``_position``). Per converter: a length-coded string (0xfb: NULL, 0xfc/0xfd/
 * 0xfe: a 2-, 3- or 8-byte little-endian length), decoded with ``encoding`` when given, then
 * passed to ``converter`` when given. A row that ends before the last column ends the row
 * there, as PyMySQL does. A length that runs past the packet returns None: the reference then
 * reads the packet and raises its own error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
read_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "read_row(data: bytes, pos: int, converters: tuple)");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    if (pos < 0 || pos > size) {
        PyErr_SetString(PyExc_ValueError, "read_row: position outside the packet");
        return NULL;
    }
    PyObject *converters = args[2];
    Py_ssize_t ncols = PyTuple_GET_SIZE(converters);
    PyObject *row = PyTuple_New(ncols);
    if (row == NULL)
        return NULL;
    Py_ssize_t col = 0;
    for (; col < ncols; col++) {
        PyObject *spec = PyTuple_GET_ITEM(converters, col);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2) {
            PyErr_SetString(PyExc_TypeError, "read_row: a converter is (encoding, converter)");
            goto fail;
        }
        if (pos >= size)
            break; /* no more columns in this row (PyMySQL's IndexError) */
        unsigned int lead = data[pos++];
        unsigned long long len;
        if (lead == 0xfb) {
            PyTuple_SET_ITEM(row, col, Py_NewRef(Py_None));
            continue;
        }
        if (lead < 0xfb)
            len = lead;
        else {
            int width = lead == 0xfc ? 2 : lead == 0xfd ? 3 : lead == 0xfe ? 8 : 0;
            if (width == 0 || size - pos < width)
                goto reference; /* 0xff, or a length cut short */
            len = 0;
            for (int i = width - 1; i >= 0; i--)
                len = (len << 8) | data[pos + i];
            pos += width;
        }
        if (len > (unsigned long long)(size - pos))
            goto reference;
        PyObject *encoding = PyTuple_GET_ITEM(spec, 0);
        PyObject *converter = PyTuple_GET_ITEM(spec, 1);
        const char *text = (const char *)data + pos;
        pos += (Py_ssize_t)len;
        PyObject *value;
        if (encoding == Py_None)
            value = PyBytes_FromStringAndSize(text, (Py_ssize_t)len);
        else {
            const char *name = PyUnicode_AsUTF8(encoding);
            if (name == NULL)
                goto fail;
            value = PyUnicode_Decode(text, (Py_ssize_t)len, name, "strict");
        }
        if (value == NULL)
            goto fail;
        if (converter != Py_None) {
            PyObject *converted = PyObject_CallOneArg(converter, value);
            Py_DECREF(value);
            if (converted == NULL)
                goto fail;
            value = converted;
        }
        PyTuple_SET_ITEM(row, col, value);
    }
    if (col < ncols) {
        /* a short row: the columns read so far, as PyMySQL's ``tuple(row)`` */
        PyObject *shorter = PyTuple_GetSlice(row, 0, col);
        Py_DECREF(row);
        return shorter;
    }
    return row;
reference:
    Py_DECREF(row);
    Py_RETURN_NONE;
fail:
    Py_DECREF(row);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_row", (PyCFunction)(void (*)(void))read_row, METH_FASTCALL,
     "read_row(data, pos, converters) -> tuple | None: one text-protocol result row (see the "
     "module's C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "connectors.mysql._textrow_c",
    "MySQL text-protocol result rows, compiled (reference: PyMySQL's "
    "MySQLResult._read_row_from_packet).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__textrow_c(void)
{
    return PyModule_Create(&module);
}
