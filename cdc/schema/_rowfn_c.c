/* Row → struct functions, compiled.
 *
 * Every captured row goes through its table's value function (and the key function) once:
 * a dict of field name → converted column value. The reference is the generated Python of
 * ``table_schema._compile_row_fn`` (one dict display, NULL handled inline); a RowBuilder
 * must return an equal dict, with the same key order, for every row, and raise what the
 * generated code raises (tests/unit/test_rowfn_compiled.py runs both on the same rows).
 *
 * Per column the plan gives (field name, row index, value for NULL, converter or None, kind,
 * argument). ``kind`` names a converter whose common case is done here without a Python call;
 * anything outside that common case calls the converter itself, so results cannot differ:
 *   0 PASS        no converter: the value as is
 *   1 CALL        converter(value)
 *   2 INT         int(str): PyLong_FromUnicodeObject, which int() itself uses
 *   3 BOOL_T      PostgreSQL boolean text: value == "t"
 *   4 TSTZ_UTC    '2018-06-20 15:13:16.945104+00' → '2018-06-20T15:13:16.945104Z'
 *   5 DEC_FIXED   numeric(p,s) text with exactly s digits after the point → Decimal(text);
 *                 argument = (scale, Decimal type)
 *   6 TSTZ_UTC_PAD TSTZ_UTC with the fraction padded or cut to ``argument`` digits (1-9), as
 *                 Debezium 2.2+ writes a timestamptz(p) (logical.fixed_fraction)
 *   7 FLOAT       float(str): PyFloat_FromString, which float() itself uses
 *   8 DATE_DAYS   'YYYY-MM-DD' of a valid date in 1..9999 → days since 1970-01-01;
 *                 ``argument``: None, or the lowest year done here (MySQL's two-digit year
 *                 adjustment leaves years below 100 to the converter)
 *   9 DEC_VARIABLE unconstrained numeric text '-?digits[.digits]' of at most 38 digits →
 *                 Debezium's VariableScaleDecimal struct {"scale": digits after the point,
 *                 "value": the unscaled value's shortest big-endian two's complement}
 *  10 TS_MICROS   timestamp text 'YYYY-MM-DD HH:MM:SS[.f{1,6}]' of a valid date and time
 *                 (years 1..9999) → microseconds since the epoch, floor-divided by
 *                 ``argument`` (1, or 1000 for milliseconds), or by its first item when it
 *                 is (divisor, lowest year done here)
 *  11 TIME_MICROS time text 'HH:MM:SS[.f{1,6}]' → microseconds since midnight,
 *                 floor-divided by ``argument``
 *  12 NAIVE_ZONED a naive datetime of exactly the type ``argument`` (MySQL's
 *                 SnapshotTimestamp), not the epoch →
 *                 'YYYY-MM-DDTHH:MM:SS[.f]Z', the fraction without trailing zeros
 *                 (logical.zoned_timestamp_str)
 *  13 STR_PASS    an exact str as is (a converter that returns any str unchanged and
 *                 only turns other values into text: MySQL's text, enum and JSON)
 *  14 BOOL_INT    an exact int → its truth (a converter that is ``bool(value)`` for an
 *                 int: MySQL's BOOLEAN, whose snapshot and binlog values are ints)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stddef.h>

enum {
    K_PASS = 0,
    K_CALL = 1,
    K_INT = 2,
    K_BOOL_T = 3,
    K_TSTZ_UTC = 4,
    K_DEC_FIXED = 5,
    K_TSTZ_UTC_PAD = 6,
    K_FLOAT = 7,
    K_DATE_DAYS = 8,
    K_DEC_VARIABLE = 9,
    K_TS_MICROS = 10,
    K_TIME_MICROS = 11,
    K_NAIVE_ZONED = 12,
    K_STR_PASS = 13,
    K_BOOL_INT = 14,
};

/* the struct's field names, made once */
static PyObject *str_scale, *str_value;

typedef struct {
    PyObject *name;
    Py_ssize_t index;
    PyObject *null_value;
    PyObject *fn; /* NULL for PASS */
    int kind;
    Py_ssize_t scale;   /* DEC_FIXED: the scale; TSTZ_UTC_PAD: the fraction's digits;
                           TS_MICROS, TIME_MICROS: the divisor */
    int min_year;       /* DATE_DAYS, TS_MICROS: a lower year goes to the converter */
    PyObject *type_arg; /* DEC_FIXED: the Decimal type; NAIVE_ZONED: the datetime type */
} Column;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t ncols;
    Column *cols;
} RowBuilder;

static void
builder_dealloc(RowBuilder *self)
{
    for (Py_ssize_t i = 0; i < self->ncols; i++) {
        Column *c = &self->cols[i];
        Py_XDECREF(c->name);
        Py_XDECREF(c->null_value);
        Py_XDECREF(c->fn);
        Py_XDECREF(c->type_arg);
    }
    PyMem_Free(self->cols);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The text of ``v`` when it is PostgreSQL's timestamptz in UTC with a date in front
 * ('2018-06-20 15:13:16.945104+00'), else NULL: the common case both TSTZ kinds rewrite. */
static const char *
tstz_utc_text(PyObject *v, Py_ssize_t *len)
{
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    const char *s = (const char *)PyUnicode_1BYTE_DATA(v);
    if (n < 22 || s[4] != '-' || s[10] != ' ' || s[n - 3] != '+' || s[n - 2] != '0' ||
        s[n - 1] != '0')
        return NULL;
    *len = n;
    return s;
}

/* the text Debezium prints: '2018-06-20T15:13:16.945104Z', or NULL for "not this case" */
static PyObject *
tstz_utc(PyObject *v)
{
    Py_ssize_t n;
    const char *s = tstz_utc_text(v, &n);
    if (s == NULL)
        return NULL;
    PyObject *out = PyUnicode_New(n - 2, 127);
    if (out == NULL)
        return NULL;
    char *d = (char *)PyUnicode_1BYTE_DATA(out);
    memcpy(d, s, 10);
    d[10] = 'T';
    memcpy(d + 11, s + 11, n - 14);
    d[n - 3] = 'Z';
    return out;
}

/* TSTZ_UTC's text with its fraction as ``digits`` digits: '…:16.9451Z' → '…:16.945100Z' */
static PyObject *
tstz_utc_padded(PyObject *v, Py_ssize_t digits)
{
    Py_ssize_t n;
    const char *s = tstz_utc_text(v, &n);
    if (s == NULL)
        return NULL;
    /* the time and its fraction: s[11 .. n-4]; the fraction starts after the first '.' */
    Py_ssize_t end = n - 3, dot = end;
    for (Py_ssize_t i = 0; i < end; i++) {
        if (s[i] == '.') {
            dot = i;
            break;
        }
    }
    if (dot < 11)
        return NULL; /* a point in the date: not PostgreSQL's text, the converter decides */
    Py_ssize_t have = dot < end ? end - dot - 1 : 0;
    PyObject *out = PyUnicode_New(dot + 1 + digits + 1, 127);
    if (out == NULL)
        return NULL;
    char *d = (char *)PyUnicode_1BYTE_DATA(out);
    memcpy(d, s, dot);
    d[10] = 'T';
    d[dot] = '.';
    for (Py_ssize_t i = 0; i < digits; i++)
        d[dot + 1 + i] = i < have ? s[dot + 1 + i] : '0';
    d[dot + 1 + digits] = 'Z';
    return out;
}

/* days since 1970-01-01 of a proleptic Gregorian date (any year) */
static long long
civil_days(long long y, int m, int d)
{
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* 'YYYY-MM-DD' at s (10 characters) of a date datetime.date accepts (years 1..9999): its
 * days since 1970-01-01 in *days, and 1; else 0 */
static int
ymd_days(const char *s, long long *days, int min_year)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    for (int i = 0; i < 10; i++) {
        if (i == 4 || i == 7) {
            if (s[i] != '-')
                return 0;
        }
        else if (s[i] < '0' || s[i] > '9')
            return 0;
    }
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int m = (s[5] - '0') * 10 + (s[6] - '0');
    int d = (s[8] - '0') * 10 + (s[9] - '0');
    if (y < 1 || y < min_year || m < 1 || m > 12 || d < 1)
        return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[m - 1] + (m == 2 && leap))
        return 0;
    *days = civil_days(y, m, d);
    return 1;
}

/* DATE_DAYS's common case, or NULL (no error set) */
static PyObject *
date_days(PyObject *v, int min_year)
{
    long long days;
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v) || PyUnicode_GET_LENGTH(v) != 10 ||
        !ymd_days((const char *)PyUnicode_1BYTE_DATA(v), &days, min_year))
        return NULL;
    return PyLong_FromLongLong(days);
}

/* 'HH:MM:SS[.f{1,6}]' at s[0..n): microseconds, or -1 when not exactly that shape;
 * ``strict``: hours 0..23, minutes and seconds 0..59 (what datetime accepts) */
static long long
time_of_day_micros(const char *s, Py_ssize_t n, int strict)
{
    if (n < 8 || s[2] != ':' || s[5] != ':')
        return -1;
    static const int at[] = {0, 1, 3, 4, 6, 7};
    for (int i = 0; i < 6; i++)
        if (s[at[i]] < '0' || s[at[i]] > '9')
            return -1;
    int hh = (s[0] - '0') * 10 + (s[1] - '0');
    int mm = (s[3] - '0') * 10 + (s[4] - '0');
    int ss = (s[6] - '0') * 10 + (s[7] - '0');
    if (strict && (hh > 23 || mm > 59 || ss > 59))
        return -1;
    long long frac = 0;
    if (n > 8) {
        Py_ssize_t digits = n - 9;
        if (s[8] != '.' || digits < 1 || digits > 6)
            return -1;
        for (Py_ssize_t i = 9; i < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                return -1;
            frac = frac * 10 + (s[i] - '0');
        }
        for (Py_ssize_t i = digits; i < 6; i++)
            frac *= 10;
    }
    return ((long long)hh * 3600 + mm * 60 + ss) * 1000000LL + frac;
}

/* floor division, as Python's // */
static long long
floor_div(long long a, long long b)
{
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* TIME_MICROS's common case, or NULL (no error set) */
static PyObject *
time_micros(PyObject *v, Py_ssize_t divisor)
{
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
        return NULL;
    long long us = time_of_day_micros((const char *)PyUnicode_1BYTE_DATA(v),
                                      PyUnicode_GET_LENGTH(v), 0);
    if (us < 0)
        return NULL;
    return PyLong_FromLongLong(floor_div(us, divisor));
}

/* TS_MICROS's common case, or NULL (no error set) */
static PyObject *
timestamp_micros(PyObject *v, Py_ssize_t divisor, int min_year)
{
    long long days;
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    const char *s = (const char *)PyUnicode_1BYTE_DATA(v);
    if (n < 19 || s[10] != ' ' || !ymd_days(s, &days, min_year))
        return NULL;
    long long us = time_of_day_micros(s + 11, n - 11, 1);
    if (us < 0)
        return NULL;
    return PyLong_FromLongLong(floor_div(days * 86400000000LL + us, divisor));
}

/* NAIVE_ZONED: a naive datetime's ISO text with a 'Z' (logical.zoned_timestamp_str); the
 * epoch, which the converter maps to its zero value, and aware values go to the converter
 * (NULL, no error set) */
static PyObject *
naive_zoned(PyObject *v)
{
    if (((_PyDateTime_BaseTZInfo *)v)->hastzinfo)
        return NULL;
    int y = PyDateTime_GET_YEAR(v), mo = PyDateTime_GET_MONTH(v), d = PyDateTime_GET_DAY(v);
    int h = PyDateTime_DATE_GET_HOUR(v), mi = PyDateTime_DATE_GET_MINUTE(v);
    int sec = PyDateTime_DATE_GET_SECOND(v), us = PyDateTime_DATE_GET_MICROSECOND(v);
    if (y == 1970 && mo == 1 && d == 1 && h == 0 && mi == 0 && sec == 0 && us == 0)
        return NULL;
    char buf[48];
    int n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", y, mo, d, h, mi, sec);
    if (n < 0 || n > 19)
        return NULL;
    if (us) {
        n += snprintf(buf + n, sizeof buf - (size_t)n, ".%06d", us);
        while (buf[n - 1] == '0')
            n--;
    }
    buf[n++] = 'Z';
    return PyUnicode_FromStringAndSize(buf, n);
}

/* numeric(p,s) text already at its scale, made of digits, one sign and one point only */
static int
fixed_decimal_text(PyObject *v, Py_ssize_t scale)
{
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    const char *s = (const char *)PyUnicode_1BYTE_DATA(v);
    Py_ssize_t point = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9')
            continue;
        if (ch == '-' && i == 0)
            continue;
        if (ch == '.' && point < 0) {
            point = i;
            continue;
        }
        return 0;
    }
    if (scale > 0)
        return n > scale && point == n - scale - 1;
    return point < 0;
}

/* DEC_VARIABLE's common case, or NULL (no error set) for any other text */
static PyObject *
variable_decimal(PyObject *v)
{
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    const char *s = (const char *)PyUnicode_1BYTE_DATA(v);
    Py_ssize_t i = 0, point = -1, digits = 0;
    int negative = 0;
    if (n > 0 && s[0] == '-') {
        negative = 1;
        i = 1;
    }
    __int128 u = 0;
    for (; i < n; i++) {
        char ch = s[i];
        if (ch >= '0' && ch <= '9') {
            if (++digits > 38)
                return NULL; /* past 10^38 - 1: the converter's int() takes it */
            u = u * 10 + (ch - '0');
        }
        else if (ch == '.' && point < 0 && digits > 0)
            point = i;
        else
            return NULL;
    }
    if (digits == 0 || point == n - 1)
        return NULL;
    Py_ssize_t scale = point < 0 ? 0 : n - point - 1;
    /* Debezium strips trailing zeros: 1.50 has scale 1, 0.00 scale 0 */
    while (scale > 0 && u % 10 == 0) {
        u /= 10;
        scale--;
    }
    if (negative)
        u = -u;
    /* the shortest two's complement: Python's (u + (u < 0)).bit_length() // 8 + 1 bytes */
    unsigned __int128 m = u < 0 ? (unsigned __int128)(-(u + 1)) : (unsigned __int128)u;
    int bits = 0;
    while (m) {
        bits++;
        m >>= 1;
    }
    int size = bits / 8 + 1;
    unsigned char buf[17];
    unsigned __int128 w = (unsigned __int128)u;
    for (int k = 0; k < size; k++)
        buf[size - 1 - k] = k < 16 ? (unsigned char)(w >> (8 * k)) : (u < 0 ? 0xff : 0);
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    PyObject *sc = PyLong_FromSsize_t(scale);
    PyObject *value = PyBytes_FromStringAndSize((const char *)buf, size);
    if (sc == NULL || value == NULL || PyDict_SetItem(out, str_scale, sc) < 0 ||
        PyDict_SetItem(out, str_value, value) < 0) {
        Py_XDECREF(sc);
        Py_XDECREF(value);
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(sc);
    Py_DECREF(value);
    return out;
}

static PyObject *
convert(Column *c, PyObject *v)
{
    PyObject *out;
    switch (c->kind) {
    case K_PASS:
        return Py_NewRef(v);
    case K_INT:
        if (PyUnicode_CheckExact(v))
            return PyLong_FromUnicodeObject(v, 10);
        break;
    case K_BOOL_T:
        if (PyUnicode_CheckExact(v)) {
            int t = PyUnicode_GET_LENGTH(v) == 1 && PyUnicode_READ_CHAR(v, 0) == 't';
            return Py_NewRef(t ? Py_True : Py_False);
        }
        break;
    case K_TSTZ_UTC:
        out = tstz_utc(v);
        if (out != NULL || PyErr_Occurred())
            return out;
        break;
    case K_DEC_FIXED:
        if (fixed_decimal_text(v, c->scale))
            return PyObject_CallOneArg(c->type_arg, v);
        break;
    case K_TSTZ_UTC_PAD:
        out = tstz_utc_padded(v, c->scale);
        if (out != NULL || PyErr_Occurred())
            return out;
        break;
    case K_FLOAT:
        if (PyUnicode_CheckExact(v))
            return PyFloat_FromString(v);
        break;
    case K_DATE_DAYS:
        out = date_days(v, c->min_year);
        if (out != NULL || PyErr_Occurred())
            return out;
        break;
    case K_DEC_VARIABLE:
        out = variable_decimal(v);
        if (out != NULL || PyErr_Occurred())
            return out;
        break;
    case K_TS_MICROS:
        out = timestamp_micros(v, c->scale, c->min_year);
        if (out != NULL || PyErr_Occurred())
            return out;
        break;
    case K_TIME_MICROS:
        out = time_micros(v, c->scale);
        if (out != NULL || PyErr_Occurred())
            return out;
        break;
    case K_NAIVE_ZONED:
        if ((PyObject *)Py_TYPE(v) == c->type_arg) {
            out = naive_zoned(v);
            if (out != NULL || PyErr_Occurred())
                return out;
        }
        break;
    case K_STR_PASS:
        if (PyUnicode_CheckExact(v))
            return Py_NewRef(v);
        break;
    case K_BOOL_INT:
        if (PyLong_CheckExact(v)) {
            int t = PyObject_IsTrue(v);
            if (t < 0)
                return NULL;
            return Py_NewRef(t ? Py_True : Py_False);
        }
        break;
    default:
        break;
    }
    return PyObject_CallOneArg(c->fn, v);
}

static PyObject *
builder_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    RowBuilder *self = (RowBuilder *)op;
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a row function takes one argument, the row");
        return NULL;
    }
    PyObject *row = args[0];
#if PY_VERSION_HEX < 0x030D0000
    PyObject *out = _PyDict_NewPresized(self->ncols);
#else
    PyObject *out = PyDict_New();
#endif
    if (out == NULL)
        return NULL;
    int fast = PyList_CheckExact(row) || PyTuple_CheckExact(row);
    for (Py_ssize_t i = 0; i < self->ncols; i++) {
        Column *c = &self->cols[i];
        PyObject *v, *value;
        /* the size read per column: a converter is Python code and could change a list */
        if (fast && c->index < Py_SIZE(row)) {
            v = PyList_CheckExact(row) ? PyList_GET_ITEM(row, c->index)
                                       : PyTuple_GET_ITEM(row, c->index);
            Py_INCREF(v);
        }
        else {
            v = PySequence_GetItem(row, c->index);
            if (v == NULL)
                goto fail;
        }
        if (v == Py_None)
            value = Py_NewRef(c->null_value);
        else
            value = convert(c, v);
        Py_DECREF(v);
        if (value == NULL)
            goto fail;
        int rc = PyDict_SetItem(out, c->name, value);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *
builder_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *plan;
    if (!PyArg_ParseTuple(args, "O!:RowBuilder", &PyTuple_Type, &plan))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    RowBuilder *self = (RowBuilder *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = builder_call;
    self->cols = PyMem_Calloc(n > 0 ? n : 1, sizeof(Column));
    if (self->cols == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *null_value, *fn, *arg;
        Py_ssize_t index;
        int kind;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(plan, i), "UnOOiO:column", &name, &index,
                              &null_value, &fn, &kind, &arg))
            goto fail;
        Column *c = &self->cols[i];
        self->ncols = i + 1;
        c->name = Py_NewRef(name);
        c->index = index;
        c->null_value = Py_NewRef(null_value);
        c->kind = kind;
        if (index < 0) {
            PyErr_SetString(PyExc_ValueError, "RowBuilder: a negative column index");
            goto fail;
        }
        if (kind < K_PASS || kind > K_BOOL_INT) {
            PyErr_Format(PyExc_ValueError, "RowBuilder: unknown kind %d", kind);
            goto fail;
        }
        if (kind == K_PASS) {
            if (fn != Py_None) {
                PyErr_SetString(PyExc_ValueError, "RowBuilder: PASS takes no converter");
                goto fail;
            }
            continue;
        }
        if (!PyCallable_Check(fn)) {
            PyErr_SetString(PyExc_TypeError, "RowBuilder: the converter is not callable");
            goto fail;
        }
        c->fn = Py_NewRef(fn);
        if (kind == K_DEC_FIXED) {
            PyObject *decimal;
            if (!PyArg_ParseTuple(arg, "nO:decimal", &c->scale, &decimal))
                goto fail;
            c->type_arg = Py_NewRef(decimal);
        }
        else if (kind == K_NAIVE_ZONED) {
            if (!PyType_Check(arg) ||
                !PyType_IsSubtype((PyTypeObject *)arg, PyDateTimeAPI->DateTimeType)) {
                PyErr_SetString(PyExc_TypeError, "RowBuilder: NAIVE_ZONED takes a datetime type");
                goto fail;
            }
            c->type_arg = Py_NewRef(arg);
        }
        else if (kind == K_DATE_DAYS) {
            c->min_year = arg == Py_None ? 1 : (int)PyLong_AsLong(arg);
            if (c->min_year == -1 && PyErr_Occurred())
                goto fail;
        }
        else if (kind == K_TS_MICROS || kind == K_TIME_MICROS) {
            if (kind == K_TS_MICROS && PyTuple_Check(arg)) {
                if (!PyArg_ParseTuple(arg, "Oi:timestamp", &arg, &c->min_year))
                    goto fail;
            }
            c->scale = PyLong_AsSsize_t(arg);
            if (c->scale == -1 && PyErr_Occurred())
                goto fail;
            if (c->scale != 1 && c->scale != 1000) {
                PyErr_SetString(PyExc_ValueError, "RowBuilder: a divisor of 1 or 1000");
                goto fail;
            }
        }
        else if (kind == K_TSTZ_UTC_PAD) {
            c->scale = PyLong_AsSsize_t(arg);
            if (c->scale == -1 && PyErr_Occurred())
                goto fail;
            if (c->scale < 1 || c->scale > 9) {
                PyErr_SetString(PyExc_ValueError, "RowBuilder: a fraction of 1 to 9 digits");
                goto fail;
            }
        }
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static PyTypeObject RowBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc.schema._rowfn_c.RowBuilder",
    .tp_doc = "RowBuilder(plan)(row) -> dict: a table's row function (see the module's C "
              "source for the plan).",
    .tp_basicsize = sizeof(RowBuilder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(RowBuilder, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = builder_new,
    .tp_dealloc = (destructor)builder_dealloc,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cdc.schema._rowfn_c",
    "Row → struct functions, compiled (reference: table_schema._compile_row_fn).", -1, NULL,
};

PyMODINIT_FUNC
PyInit__rowfn_c(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL || PyType_Ready(&RowBuilderType) < 0)
        return NULL;
    str_scale = PyUnicode_InternFromString("scale");
    str_value = PyUnicode_InternFromString("value");
    if (str_scale == NULL || str_value == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "RowBuilder", (PyObject *)&RowBuilderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
