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
 *
 * ``read_packets`` goes one step further for a streaming result: PyMySQL reads each row packet
 * in Python (header, body, a packet object, the end-of-result check: as much again as the
 * walk itself), so it takes every complete row packet already in the connection's buffered
 * reader at once and leaves the rest to PyMySQL (see its comment and text_rows.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>

/* A converter spec of three items, (encoding, converter, type), marks a TIMESTAMP column of a
 * snapshot session (``snapshot_timestamp_decoder``): the server's text
 * 'YYYY-MM-DD HH:MM:SS' with an optional fraction of 1 to 6 digits becomes ``type`` (a
 * datetime subclass) here, as the converter's ``fromisoformat`` would make it. Any other text,
 * or a date the datetime refuses (zero dates, a 30th of February), goes to the converter. */
static int
digits(const unsigned char *p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

/* The datetime of ``text``, NULL without an exception when the converter must decide, NULL
 * with one on a real error. */
static PyObject *
timestamp_text(const unsigned char *t, Py_ssize_t len, PyObject *type)
{
    int y, mo, d, h, mi, sec, us = 0;
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, PyDateTimeAPI->DateTimeType))
        return NULL;
    if (len != 19 && !(len > 20 && len < 27 && t[19] == '.'))
        return NULL;
    if (t[4] != '-' || t[7] != '-' || t[10] != ' ' || t[13] != ':' || t[16] != ':')
        return NULL;
    if (!digits(t, 4, &y) || !digits(t + 5, 2, &mo) || !digits(t + 8, 2, &d) ||
        !digits(t + 11, 2, &h) || !digits(t + 14, 2, &mi) || !digits(t + 17, 2, &sec))
        return NULL;
    if (len > 19) {
        int n = (int)len - 20;
        if (!digits(t + 20, n, &us))
            return NULL;
        for (int i = n; i < 6; i++)
            us *= 10;
    }
    PyObject *v = PyDateTimeAPI->DateTime_FromDateAndTime(y, mo, d, h, mi, sec, us, Py_None,
                                                          (PyTypeObject *)type);
    if (v == NULL && PyErr_ExceptionMatches(PyExc_ValueError))
        PyErr_Clear(); /* out of range: the converter's own path */
    return v;
}

/* One row from data[pos:size]: 1 and *out set, 0 when the reference must read it (a length
 * that runs past the packet, a 0xff lead), -1 with an exception set. */
static int
walk_row(const unsigned char *data, Py_ssize_t pos, Py_ssize_t size, PyObject *converters,
         PyObject **out)
{
    Py_ssize_t ncols = PyTuple_GET_SIZE(converters);
    PyObject *row = PyTuple_New(ncols);
    if (row == NULL)
        return -1;
    Py_ssize_t col = 0;
    for (; col < ncols; col++) {
        PyObject *spec = PyTuple_GET_ITEM(converters, col);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 2 || PyTuple_GET_SIZE(spec) > 3) {
            PyErr_SetString(PyExc_TypeError,
                            "read_row: a converter is (encoding, converter[, timestamp type])");
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
        if (PyTuple_GET_SIZE(spec) == 3) {
            value = timestamp_text((const unsigned char *)text, (Py_ssize_t)len,
                                   PyTuple_GET_ITEM(spec, 2));
            if (value != NULL) {
                PyTuple_SET_ITEM(row, col, value);
                continue;
            }
            if (PyErr_Occurred())
                goto fail;
        }
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
        if (shorter == NULL)
            return -1;
        *out = shorter;
        return 1;
    }
    *out = row;
    return 1;
reference:
    Py_DECREF(row);
    return 0;
fail:
    Py_DECREF(row);
    return -1;
}

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
    PyObject *row = NULL;
    int got = walk_row(data, pos, size, args[2], &row);
    if (got < 0)
        return NULL;
    if (got == 0)
        Py_RETURN_NONE;
    return row;
}

/* read_packets(buffer: bytes, seq: int, limit: int, converters: tuple, out: list)
 *     -> (consumed: int, seq: int)
 *
 * Walks the complete row packets at the start of ``buffer`` (what the connection's buffered
 * reader holds, from its ``peek``): per packet a 3-byte little-endian length and the sequence
 * number, which must be ``seq`` (then ``seq + 1`` modulo 256). Appends up to ``limit`` rows to
 * ``out`` and returns the bytes those packets took and the next sequence number. It stops,
 * without taking it, at the first packet that is not a plain complete row: cut off by the end
 * of the buffer, out of sequence, 16 MB or more (split over packets), an EOF (0xfe, shorter
 * than 9 bytes) or error (0xff) packet, a row ``read_row`` leaves to the reference, or one
 * whose converter raises. PyMySQL then reads that packet itself, so its errors, its end of
 * result and its exceptions are its own. */
static PyObject *
read_packets(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[3]) ||
        !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "read_packets(buffer: bytes, seq: int, limit: int, converters: tuple, "
                        "out: list)");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    long seq = PyLong_AsLong(args[1]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    PyObject *converters = args[3], *out = args[4];
    Py_ssize_t pos = 0, taken = 0;
    while (taken < limit && size - pos >= 4) {
        const unsigned char *h = data + pos;
        Py_ssize_t len = (Py_ssize_t)h[0] | ((Py_ssize_t)h[1] << 8) | ((Py_ssize_t)h[2] << 16);
        if (h[3] != (seq & 0xff) || len == 0xffffff || len == 0 || size - pos - 4 < len)
            break;
        const unsigned char *payload = h + 4;
        if (payload[0] == 0xff || (payload[0] == 0xfe && len < 9))
            break;
        PyObject *row = NULL;
        int got = walk_row(payload, 0, len, converters, &row);
        if (got < 0) {
            if (!PyErr_ExceptionMatches(PyExc_Exception))
                return NULL; /* KeyboardInterrupt, SystemExit: not swallowed */
            PyErr_Clear(); /* PyMySQL reads the packet again and raises it itself */
            break;
        }
        if (got == 0)
            break;
        int appended = PyList_Append(out, row);
        Py_DECREF(row);
        if (appended < 0)
            return NULL;
        pos += 4 + len;
        seq = (seq + 1) & 0xff;
        taken++;
    }
    return Py_BuildValue("(nl)", pos, seq);
}

static PyMethodDef methods[] = {
    {"read_row", (PyCFunction)(void (*)(void))read_row, METH_FASTCALL,
     "read_row(data, pos, converters) -> tuple | None: one text-protocol result row (see the "
     "module's C source)."},
    {"read_packets", (PyCFunction)(void (*)(void))read_packets, METH_FASTCALL,
     "read_packets(buffer, seq, limit, converters, out) -> (consumed, seq): the complete row "
     "packets at the start of a buffered reader's bytes (see the module's C source)."},
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
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    return PyModule_Create(&module);
}
