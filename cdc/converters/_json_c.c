/* JsonConverter.from_connect's payload writer, compiled.
 *
 * The reference (cdc/converters/json.py) rewrites a Connect value into a copy that orjson
 * renders the way Jackson would (decimals as base64 of the unscaled bytes, non-finite floats
 * quoted, nulls replaced by schema defaults, maps with non-string keys as pairs, temporal
 * values as ints) and then serialises that copy once. This module walks the value with a
 * per-schema plan instead and writes the JSON bytes directly, doing the rewrites as it goes.
 *
 * It must give the reference's bytes for every value (tests/unit/test_json_compiled.py
 * compares both). Where it is not sure, it does not guess:
 * - a leaf it does not write natively (floats, ints beyond 64 bits, datetimes, subclasses of
 *   the JSON types, anything odd) is written by ``leaf(obj)``, which is orjson.dumps of that
 *   leaf with the reference's ``default`` hook, so its text is orjson's own;
 * - a rewrite it does not do natively (a decimal that needs rounding, a temporal value that
 *   is not an int yet, NUMERIC decimals) calls the reference's own fix for that leaf;
 * - a container of a type the reference would treat differently (a Mapping that is not a
 *   dict, a generator where an array is expected, a non-str key) raises, and json.py then
 *   runs the reference for the whole event, so errors are the reference's errors too.
 *
 * Plans are built in json.py (``_plan``) from the same rewriter the reference uses and
 * compiled here once per schema into a tree of C structs held by a capsule.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#define MAX_DEPTH 250 /* orjson gives up at 255 nested containers; the reference decides */

enum {
    K_RAW = 0,       /* written as it is */
    K_DEC = 1,       /* Connect decimal, BASE64: native for an exact Decimal, else fix */
    K_FLOAT = 2,     /* float: non-finite quoted the Jackson way, else fix */
    K_INTPASS = 3,   /* temporal: an int is already encoded, anything else goes to fix */
    K_FIX = 4,       /* always fix(value), then written as it is */
    K_STRUCT = 5,    /* dict with fields that need rewriting */
    K_ARRAY = 6,     /* list/tuple whose items need rewriting */
    K_MAP_OBJ = 7,   /* dict with str keys whose values need rewriting */
    K_MAP_PAIRS = 8, /* dict written as [[key, value], ...] */
};

typedef struct Node Node;

typedef struct {
    PyObject *name;      /* str */
    Py_hash_t hash;      /* its hash, to skip comparing with keys that differ */
    PyObject *name_json; /* bytes: "name": */
    int fill_missing;    /* a missing field is appended with null_json */
    Node *node;
    /* The JSON last written for this field's dict value, while that dict is unchanged:
     * records of a batch share one source block, written once instead of per record. */
    PyObject *cache_dict; /* the dict's address only (no reference held) */
    uint64_t cache_version;
    PyObject *cache_json; /* bytes, or NULL */
    PyObject *seen_dict;  /* the previous record's dict at this field (address only) */
    uint64_t seen_version;
} Field;

struct Node {
    int kind;
    int scale;
    PyObject *null_json; /* bytes written for None */
    PyObject *fix;       /* the reference's leaf fix, or NULL */
    Node *item;          /* array items, map values */
    Node *key;           /* map pair keys */
    Py_ssize_t nfields;
    Field *fields;
    int any_fill;
};

static PyObject *leaf_dumps = NULL;   /* orjson.dumps(obj, default=_default) as a 1-arg callable */
static PyObject *float_dumps = NULL;  /* orjson.dumps itself: a float needs no default */
static PyObject *decimal_type = NULL; /* decimal.Decimal */

/* ---------------------------------------------------------------------------------------- */
/* plan tree */

static void
node_free(Node *n)
{
    if (n == NULL)
        return;
    Py_XDECREF(n->null_json);
    Py_XDECREF(n->fix);
    node_free(n->item);
    node_free(n->key);
    if (n->fields != NULL) {
        for (Py_ssize_t i = 0; i < n->nfields; i++) {
            Py_XDECREF(n->fields[i].name);
            Py_XDECREF(n->fields[i].name_json);
            Py_XDECREF(n->fields[i].cache_json);
            node_free(n->fields[i].node);
        }
        PyMem_Free(n->fields);
    }
    PyMem_Free(n);
}

static Node *node_build(PyObject *spec, int depth);

static int
plan_error(const char *what)
{
    PyErr_Format(PyExc_ValueError, "invalid JSON plan: %s", what);
    return -1;
}

/* spec: (kind, null_json, fix, scale, a, b) */
static Node *
node_build(PyObject *spec, int depth)
{
    if (depth > MAX_DEPTH) {
        plan_error("too deep");
        return NULL;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 6) {
        plan_error("a node is a 6-tuple");
        return NULL;
    }
    Node *n = PyMem_Calloc(1, sizeof(Node));
    if (n == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    long scale = PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
    if (PyErr_Occurred())
        goto fail;
    if (kind < K_RAW || kind > K_MAP_PAIRS || scale < INT_MIN || scale > INT_MAX) {
        plan_error("kind or scale out of range");
        goto fail;
    }
    n->kind = (int)kind;
    n->scale = (int)scale;
    PyObject *null_json = PyTuple_GET_ITEM(spec, 1);
    if (!PyBytes_Check(null_json)) {
        plan_error("null_json must be bytes");
        goto fail;
    }
    Py_INCREF(null_json);
    n->null_json = null_json;
    PyObject *fix = PyTuple_GET_ITEM(spec, 2);
    if (fix != Py_None) {
        if (!PyCallable_Check(fix)) {
            plan_error("fix must be callable");
            goto fail;
        }
        Py_INCREF(fix);
        n->fix = fix;
    }
    if ((n->kind == K_DEC || n->kind == K_FLOAT || n->kind == K_INTPASS || n->kind == K_FIX) &&
        n->fix == NULL) {
        plan_error("a leaf rewrite needs its fix");
        goto fail;
    }
    PyObject *a = PyTuple_GET_ITEM(spec, 4), *b = PyTuple_GET_ITEM(spec, 5);
    if (n->kind == K_STRUCT) {
        if (!PyTuple_Check(a)) {
            plan_error("struct fields must be a tuple");
            goto fail;
        }
        Py_ssize_t nf = PyTuple_GET_SIZE(a);
        n->fields = PyMem_Calloc(nf > 0 ? (size_t)nf : 1, sizeof(Field));
        if (n->fields == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        n->nfields = nf;
        for (Py_ssize_t i = 0; i < nf; i++) {
            PyObject *f = PyTuple_GET_ITEM(a, i);
            if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 4 ||
                !PyUnicode_CheckExact(PyTuple_GET_ITEM(f, 0)) ||
                !PyBytes_Check(PyTuple_GET_ITEM(f, 1))) {
                plan_error("a field is (name, name_json, fill_missing, node)");
                goto fail;
            }
            Field *fd = &n->fields[i];
            fd->name = Py_NewRef(PyTuple_GET_ITEM(f, 0));
            if ((fd->hash = PyObject_Hash(fd->name)) == -1)
                goto fail;
            fd->name_json = Py_NewRef(PyTuple_GET_ITEM(f, 1));
            fd->fill_missing = PyObject_IsTrue(PyTuple_GET_ITEM(f, 2));
            if (fd->fill_missing < 0)
                goto fail;
            n->any_fill |= fd->fill_missing;
            fd->node = node_build(PyTuple_GET_ITEM(f, 3), depth + 1);
            if (fd->node == NULL)
                goto fail;
        }
    }
    else if (n->kind == K_ARRAY || n->kind == K_MAP_OBJ) {
        if ((n->item = node_build(a, depth + 1)) == NULL)
            goto fail;
    }
    else if (n->kind == K_MAP_PAIRS) {
        if ((n->key = node_build(a, depth + 1)) == NULL)
            goto fail;
        if ((n->item = node_build(b, depth + 1)) == NULL)
            goto fail;
    }
    return n;
fail:
    node_free(n);
    return NULL;
}

#define CAPSULE_NAME "cdc.converters._json_c.plan"

static void
capsule_free(PyObject *capsule)
{
    node_free((Node *)PyCapsule_GetPointer(capsule, CAPSULE_NAME));
}

static PyObject *
compile_plan(PyObject *self, PyObject *spec)
{
    Node *n = node_build(spec, 0);
    if (n == NULL)
        return NULL;
    PyObject *capsule = PyCapsule_New(n, CAPSULE_NAME, capsule_free);
    if (capsule == NULL)
        node_free(n);
    return capsule;
}

/* ---------------------------------------------------------------------------------------- */
/* output buffer: the payload is written into a scratch buffer kept between calls (a nested
 * call, from a fix or a leaf writer that re-enters the converter, gets its own), then copied
 * once into the bytes object between head and tail */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Out;

static char *scratch = NULL;
static Py_ssize_t scratch_cap = 0;
static int scratch_busy = 0;
#define SCRATCH_START 4096
#define SCRATCH_KEEP (1 << 20) /* a larger buffer is given back after the call */

static int
out_grow(Out *o, Py_ssize_t need)
{
    Py_ssize_t cap = o->cap;
    if (need > PY_SSIZE_T_MAX / 2 - o->len) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap < o->len + need)
        cap *= 2;
    char *buf = PyMem_Realloc(o->buf, (size_t)cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = buf;
    o->cap = cap;
    return 0;
}

static inline int
out_reserve(Out *o, Py_ssize_t need)
{
    return o->len + need <= o->cap ? 0 : out_grow(o, need);
}

static inline int
out_write(Out *o, const char *s, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static inline int
out_bytes(Out *o, PyObject *b)
{
    return out_write(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
}

static inline int
out_char(Out *o, char c)
{
    if (out_reserve(o, 1) < 0)
        return -1;
    o->buf[o->len++] = c;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* leaves */

static int
fallback(const char *why)
{
    /* json.py catches this and runs the reference for the whole event */
    PyErr_Format(PyExc_TypeError, "compiled JSON writer: %s", why);
    return -1;
}

static int
write_dumps(Out *o, PyObject *dumps, PyObject *v)
{
    PyObject *b = PyObject_CallOneArg(dumps, v);
    if (b == NULL)
        return -1;
    if (!PyBytes_Check(b)) {
        Py_DECREF(b);
        return fallback("leaf writer did not return bytes");
    }
    int rc = out_bytes(o, b);
    Py_DECREF(b);
    return rc;
}

/* 0: no escape; 1: \uXXXX; otherwise the short escape letter */
static unsigned char esc[256];

static void
esc_init(void)
{
    for (int c = 0; c < 0x20; c++)
        esc[c] = 1;
    esc['\b'] = 'b';
    esc['\t'] = 't';
    esc['\n'] = 'n';
    esc['\f'] = 'f';
    esc['\r'] = 'r';
    esc['"'] = '"';
    esc['\\'] = '\\';
}

/* whether any of the 8 bytes in w is a control char, '"' or '\\' (exact: the classic
 * "has a byte less than n" and "has a zero byte" tests; bytes >= 0x80 never match) */
static inline int
word_needs_escape(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((w - ones * 0x20) | (q - ones) | (b - ones)) & ~w & high) != 0;
}

static int
write_str(Out *o, PyObject *s)
{
    Py_ssize_t n;
    const char *p;
    if (PyUnicode_IS_COMPACT_ASCII(s)) {
        p = (const char *)PyUnicode_DATA(s);
        n = PyUnicode_GET_LENGTH(s);
    }
    else if ((p = PyUnicode_AsUTF8AndSize(s, &n)) == NULL)
        return -1; /* lone surrogates: orjson refuses them too */
    if (out_reserve(o, n + 2) < 0)
        return -1;
    o->buf[o->len++] = '"';
    Py_ssize_t start = 0, i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!word_needs_escape(w)) {
                i += 8;
                continue;
            }
        }
        Py_ssize_t stop = i + 8 < n ? i + 8 : n;
        for (; i < stop; i++) {
            unsigned char c = (unsigned char)p[i], e = esc[c];
            if (e == 0)
                continue;
            if (out_write(o, p + start, i - start) < 0 || out_reserve(o, 6 + (n - i)) < 0)
                return -1;
            char *w = o->buf + o->len;
            if (e == 1) {
                static const char hex[] = "0123456789abcdef";
                memcpy(w, "\\u00", 4);
                w[4] = hex[c >> 4];
                w[5] = hex[c & 15];
                o->len += 6;
            }
            else {
                w[0] = '\\';
                w[1] = (char)e;
                o->len += 2;
            }
            start = i + 1;
        }
    }
    if (out_write(o, p + start, n - start) < 0)
        return -1;
    return out_char(o, '"');
}

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
write_b64(Out *o, const unsigned char *p, Py_ssize_t n)
{
    if (n > (PY_SSIZE_T_MAX - 8) / 4 * 3)
        return PyErr_NoMemory(), -1;
    Py_ssize_t need = (n + 2) / 3 * 4 + 2;
    if (out_reserve(o, need) < 0)
        return -1;
    char *w = o->buf + o->len;
    *w++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8) | p[i + 2];
        *w++ = b64chars[v >> 18];
        *w++ = b64chars[(v >> 12) & 63];
        *w++ = b64chars[(v >> 6) & 63];
        *w++ = b64chars[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        *w++ = b64chars[v >> 18];
        *w++ = b64chars[(v >> 12) & 63];
        *w++ = '=';
        *w++ = '=';
    }
    else if (n - i == 2) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8);
        *w++ = b64chars[v >> 18];
        *w++ = b64chars[(v >> 12) & 63];
        *w++ = b64chars[(v >> 6) & 63];
        *w++ = '=';
    }
    *w++ = '"';
    o->len = w - o->buf;
    return 0;
}

static int
write_i64(Out *o, long long v)
{
    char tmp[24], *end = tmp + sizeof tmp, *w = end;
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--w = (char)('0' + mag % 10);
        mag /= 10;
    } while (mag);
    if (v < 0)
        *--w = '-';
    return out_write(o, w, end - w);
}

/* ---------------------------------------------------------------------------------------- */
/* a value with no rewriting: what orjson.dumps(value, default=_default) writes */

/* A float as orjson writes it. For 0 and |x| >= 1e-4 that is repr's shortest round-trip
 * text (checked on random bit patterns of every exponent: tests/unit/test_json_compiled.py);
 * below 1e-4 orjson writes '0.00001' and '1e-7' where repr writes '1e-05' and '1e-07', and
 * non-finite values are orjson's too: those go to orjson itself. */
static int
write_float(Out *o, PyObject *v)
{
    double x = PyFloat_AS_DOUBLE(v);
    if (!(x == 0.0 || (isfinite(x) && fabs(x) >= 1e-4)))
        return write_dumps(o, float_dumps, v);
    char *text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL)
        return -1;
    int rc = out_write(o, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return rc;
}

static int write_raw(Out *o, PyObject *v, int depth);

static int
write_raw_dict(Out *o, PyObject *d, int depth)
{
    if (out_char(o, '{') < 0)
        return -1;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int first = 1;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k))
            return fallback("dict key is not a str");
        Py_INCREF(k);
        Py_INCREF(v);
        int rc = (first ? 0 : out_char(o, ',')) < 0 || write_str(o, k) < 0 ||
                         out_char(o, ':') < 0 || write_raw(o, v, depth + 1) < 0
                     ? -1
                     : 0;
        Py_DECREF(k);
        Py_DECREF(v);
        if (rc < 0)
            return -1;
        first = 0;
    }
    return out_char(o, '}');
}

static int
write_raw_seq(Out *o, PyObject *s, int depth)
{
    if (out_char(o, '[') < 0)
        return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(s); i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(s, i);
        Py_INCREF(v);
        int rc = ((i ? out_char(o, ',') : 0) < 0 || write_raw(o, v, depth + 1) < 0) ? -1 : 0;
        Py_DECREF(v);
        if (rc < 0)
            return -1;
    }
    return out_char(o, ']');
}

static int
write_raw(Out *o, PyObject *v, int depth)
{
    if (depth > MAX_DEPTH)
        return fallback("nested too deep");
    if (v == Py_None)
        return out_write(o, "null", 4);
    if (v == Py_True)
        return out_write(o, "true", 4);
    if (v == Py_False)
        return out_write(o, "false", 5);
    if (PyUnicode_CheckExact(v))
        return write_str(o, v);
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow == 0) {
            if (x == -1 && PyErr_Occurred())
                return -1;
            return write_i64(o, x);
        }
        return write_dumps(o, leaf_dumps, v); /* up to u64 or orjson's error */
    }
    if (PyDict_CheckExact(v))
        return write_raw_dict(o, v, depth);
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v))
        return write_raw_seq(o, v, depth);
    if (PyBytes_CheckExact(v))
        return write_b64(o, (const unsigned char *)PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    if (PyFloat_CheckExact(v))
        return write_float(o, v);
    return write_dumps(o, leaf_dumps, v); /* datetimes, subclasses, Fragments, ... */
}

/* ---------------------------------------------------------------------------------------- */
/* a value at a position the plan rewrites */

static int write_node(Out *o, Node *n, PyObject *v, int depth);

static int
write_fixed(Out *o, Node *n, PyObject *v, int depth)
{
    PyObject *r = PyObject_CallOneArg(n->fix, v);
    if (r == NULL)
        return -1;
    int rc = write_raw(o, r, depth);
    Py_DECREF(r);
    return rc;
}

/* an exact Decimal's unscaled value at `scale`, when it fits in 64 bits and needs no
 * rounding; 0 with *ok = 0 otherwise (the reference fix then decides) */
static int
decimal_unscaled(PyObject *v, int scale, long long *out, int *ok)
{
    *ok = 0;
    PyObject *s = PyObject_Str(v);
    if (s == NULL)
        return -1;
    if (!PyUnicode_IS_ASCII(s)) {
        Py_DECREF(s);
        return 0;
    }
    const char *p = (const char *)PyUnicode_DATA(s);
    Py_ssize_t len = PyUnicode_GET_LENGTH(s), i = 0;
    int neg = 0, frac = 0, seen_dot = 0, digits = 0;
    uint64_t d = 0;
    long exp = 0;
    if (i < len && p[i] == '-') {
        neg = 1;
        i++;
    }
    for (; i < len; i++) {
        char c = p[i];
        if (c >= '0' && c <= '9') {
            if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, c - '0', &d))
                goto no;
            digits++;
            frac += seen_dot;
        }
        else if (c == '.' && !seen_dot)
            seen_dot = 1;
        else
            break;
    }
    if (digits == 0)
        goto no; /* NaN, Infinity */
    if (i < len) {
        if (p[i] != 'E' || i + 1 >= len || (p[i + 1] != '+' && p[i + 1] != '-'))
            goto no;
        int eneg = p[i + 1] == '-';
        i += 2;
        if (i >= len)
            goto no;
        for (; i < len; i++) {
            if (p[i] < '0' || p[i] > '9' || exp > 100000)
                goto no;
            exp = exp * 10 + (p[i] - '0');
        }
        if (eneg)
            exp = -exp;
    }
    long k = exp - frac + scale;
    if (k >= 0) {
        for (; k > 0 && d != 0; k--)
            if (__builtin_mul_overflow(d, 10, &d))
                goto no;
    }
    else {
        for (; k < 0 && d != 0; k++) {
            if (d % 10)
                goto no; /* needs rounding */
            d /= 10;
        }
    }
    if (d > (uint64_t)INT64_MAX)
        goto no;
    *out = neg ? -(long long)d : (long long)d;
    *ok = 1;
no:
    Py_DECREF(s);
    return 0;
}

static int
write_decimal(Out *o, Node *n, PyObject *v, int depth)
{
    if (Py_TYPE(v) == (PyTypeObject *)decimal_type && n->scale >= 0) {
        long long u;
        int ok;
        if (decimal_unscaled(v, n->scale, &u, &ok) < 0)
            return -1;
        if (ok) {
            /* u.to_bytes((u + (u < 0)).bit_length() // 8 + 1, "big", signed=True) */
            uint64_t mag = u < 0 ? ~(uint64_t)u : (uint64_t)u;
            int bits = mag ? 64 - __builtin_clzll(mag) : 0;
            int nb = bits / 8 + 1;
            unsigned char raw[8];
            for (int j = 0; j < nb; j++)
                raw[nb - 1 - j] = (unsigned char)((uint64_t)u >> (8 * j));
            return write_b64(o, raw, nb);
        }
    }
    return write_fixed(o, n, v, depth);
}

/* A field whose value is the same unchanged dict as the previous record's is written from
 * the bytes kept the first time it repeated. "Unchanged" is the dict's version tag (PEP 509:
 * a new value on every change of any dict, and on creating one, so a dict freed and another
 * made at its address never matches), which CPython keeps up to 3.11; later versions write
 * every time. Kept only for dicts of immutable scalars, whose JSON (for a given plan) is a
 * function of the dict's own entries. */
#if PY_VERSION_HEX < 0x030C0000
#define FIELD_CACHE 1
static int
flat_scalars(PyObject *d)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k))
            return 0;
        if (!(v == Py_None || v == Py_True || v == Py_False || PyUnicode_CheckExact(v) ||
              PyLong_CheckExact(v) || PyFloat_CheckExact(v)))
            return 0;
    }
    return 1;
}

static int
write_field_cached(Out *o, Field *f, PyObject *v, int depth)
{
    uint64_t version = ((PyDictObject *)v)->ma_version_tag;
    if (f->cache_json != NULL && f->cache_dict == v && f->cache_version == version)
        return out_bytes(o, f->cache_json);
    Py_ssize_t start = o->len;
    if (write_node(o, f->node, v, depth) < 0)
        return -1;
    if (f->seen_dict == v && f->seen_version == version && flat_scalars(v)) {
        PyObject *json = PyBytes_FromStringAndSize(o->buf + start, o->len - start);
        if (json == NULL)
            return -1;
        Py_XSETREF(f->cache_json, json);
        f->cache_dict = v;
        f->cache_version = version;
    }
    f->seen_dict = v;
    f->seen_version = version;
    return 0;
}
#else
#define FIELD_CACHE 0
static int
write_field_cached(Out *o, Field *f, PyObject *v, int depth)
{
    return write_node(o, f->node, v, depth);
}
#endif

static int
write_struct(Out *o, Node *n, PyObject *d, int depth)
{
    if (!PyDict_CheckExact(d))
        return fallback("struct value is not a dict");
    char seen_small[64];
    char *seen = seen_small;
    if (n->any_fill) {
        if (n->nfields > (Py_ssize_t)sizeof seen_small) {
            seen = PyMem_Calloc((size_t)n->nfields, 1);
            if (seen == NULL)
                return PyErr_NoMemory(), -1;
        }
        else
            memset(seen_small, 0, sizeof seen_small);
    }
    int rc = -1;
    if (out_char(o, '{') < 0)
        goto done;
    Py_ssize_t pos = 0, cursor = 0;
    PyObject *k, *v;
    int first = 1;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k)) {
            fallback("dict key is not a str");
            goto done;
        }
        /* which field is this key? usually the one after the last match, same object */
        Py_ssize_t hit = -1;
        for (Py_ssize_t j = 0; j < n->nfields; j++) {
            Py_ssize_t at = cursor + j < n->nfields ? cursor + j : cursor + j - n->nfields;
            if (n->fields[at].name == k) {
                hit = at;
                break;
            }
        }
        if (hit < 0) {
            Py_hash_t h = PyObject_Hash(k); /* cached: it is a dict key */
            if (h == -1)
                goto done;
            for (Py_ssize_t j = 0; j < n->nfields; j++) {
                if (n->fields[j].hash != h)
                    continue;
                int eq = PyUnicode_Compare(n->fields[j].name, k);
                if (eq == -1 && PyErr_Occurred())
                    goto done;
                if (eq == 0) {
                    hit = j;
                    break;
                }
            }
        }
        Py_INCREF(k);
        Py_INCREF(v);
        int r;
        if (hit >= 0) {
            cursor = hit + 1 < n->nfields ? hit + 1 : 0;
            if (n->any_fill)
                seen[hit] = 1;
            Field *f = &n->fields[hit];
            int cached = FIELD_CACHE && PyDict_CheckExact(v) &&
                         (f->node->kind == K_RAW || f->node->kind == K_STRUCT);
            r = ((first ? 0 : out_char(o, ',')) < 0 || out_bytes(o, f->name_json) < 0 ||
                 (cached ? write_field_cached(o, f, v, depth + 1)
                         : write_node(o, f->node, v, depth + 1)) < 0)
                    ? -1
                    : 0;
        }
        else {
            r = ((first ? 0 : out_char(o, ',')) < 0 || write_str(o, k) < 0 ||
                 out_char(o, ':') < 0 || write_raw(o, v, depth + 1) < 0)
                    ? -1
                    : 0;
        }
        Py_DECREF(k);
        Py_DECREF(v);
        if (r < 0)
            goto done;
        first = 0;
    }
    if (n->any_fill) {
        /* the reference fills a missing field whose fix turns None into a value; the copy
         * gets it after the dict's own keys, in schema order */
        for (Py_ssize_t j = 0; j < n->nfields; j++) {
            Field *f = &n->fields[j];
            if (!f->fill_missing || seen[j])
                continue;
            if ((first ? 0 : out_char(o, ',')) < 0 || out_bytes(o, f->name_json) < 0 ||
                out_bytes(o, f->node->null_json) < 0)
                goto done;
            first = 0;
        }
    }
    rc = out_char(o, '}');
done:
    if (seen != seen_small)
        PyMem_Free(seen);
    return rc;
}

static int
write_node(Out *o, Node *n, PyObject *v, int depth)
{
    if (depth > MAX_DEPTH)
        return fallback("nested too deep");
    if (v == Py_None)
        return out_bytes(o, n->null_json);
    switch (n->kind) {
    case K_RAW:
        return write_raw(o, v, depth);
    case K_DEC:
        return write_decimal(o, n, v, depth);
    case K_FLOAT:
        if (PyFloat_CheckExact(v)) {
            double x = PyFloat_AS_DOUBLE(v);
            if (x != x)
                return out_write(o, "\"NaN\"", 5);
            if (x - x != 0)
                return x > 0 ? out_write(o, "\"Infinity\"", 10)
                             : out_write(o, "\"-Infinity\"", 11);
            return write_float(o, v);
        }
        return write_fixed(o, n, v, depth);
    case K_INTPASS:
        if (PyLong_CheckExact(v))
            return write_raw(o, v, depth);
        return write_fixed(o, n, v, depth);
    case K_FIX:
        return write_fixed(o, n, v, depth);
    case K_STRUCT:
        return write_struct(o, n, v, depth);
    case K_ARRAY:
        if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v))
            return fallback("array value is not a list or tuple");
        if (out_char(o, '[') < 0)
            return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(v, i);
            Py_INCREF(item);
            int rc = ((i ? out_char(o, ',') : 0) < 0 || write_node(o, n->item, item, depth + 1) < 0)
                         ? -1
                         : 0;
            Py_DECREF(item);
            if (rc < 0)
                return -1;
        }
        return out_char(o, ']');
    case K_MAP_OBJ:
    case K_MAP_PAIRS: {
        if (!PyDict_CheckExact(v))
            return fallback("map value is not a dict");
        int pairs = n->kind == K_MAP_PAIRS;
        if (out_char(o, pairs ? '[' : '{') < 0)
            return -1;
        Py_ssize_t pos = 0;
        PyObject *k, *val;
        int first = 1;
        while (PyDict_Next(v, &pos, &k, &val)) {
            if (!pairs && !PyUnicode_CheckExact(k))
                return fallback("map key is not a str");
            Py_INCREF(k);
            Py_INCREF(val);
            int rc;
            if (pairs)
                rc = ((first ? 0 : out_char(o, ',')) < 0 || out_char(o, '[') < 0 ||
                      write_node(o, n->key, k, depth + 2) < 0 || out_char(o, ',') < 0 ||
                      write_node(o, n->item, val, depth + 2) < 0 || out_char(o, ']') < 0)
                         ? -1
                         : 0;
            else
                rc = ((first ? 0 : out_char(o, ',')) < 0 || write_str(o, k) < 0 ||
                      out_char(o, ':') < 0 || write_node(o, n->item, val, depth + 1) < 0)
                         ? -1
                         : 0;
            Py_DECREF(k);
            Py_DECREF(val);
            if (rc < 0)
                return -1;
            first = 0;
        }
        return out_char(o, pairs ? ']' : '}');
    }
    }
    return fallback("unknown plan node");
}

/* ---------------------------------------------------------------------------------------- */

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *dumps, *fdumps, *dec;
    if (!PyArg_ParseTuple(args, "OOO:configure", &dumps, &fdumps, &dec))
        return NULL;
    if (!PyCallable_Check(dumps) || !PyCallable_Check(fdumps) || !PyType_Check(dec)) {
        PyErr_SetString(PyExc_TypeError, "configure(leaf_dumps, float_dumps, decimal.Decimal)");
        return NULL;
    }
    Py_INCREF(fdumps);
    Py_XSETREF(float_dumps, fdumps);
    Py_INCREF(dumps);
    Py_XSETREF(leaf_dumps, dumps);
    Py_INCREF(dec);
    Py_XSETREF(decimal_type, dec);
    Py_RETURN_NONE;
}

/* head + the JSON of value written by plan n + tail, as new bytes (NULL with an error set) */
static PyObject *
encode_node(Node *n, PyObject *value, PyObject *head, PyObject *tail)
{
    int shared = !scratch_busy;
    Out o = {NULL, 0, 0};
    if (shared && scratch != NULL) {
        o.buf = scratch;
        o.cap = scratch_cap;
    }
    else if ((o.buf = PyMem_Malloc(SCRATCH_START)) != NULL)
        o.cap = SCRATCH_START;
    else
        return PyErr_NoMemory();
    if (shared) {
        scratch_busy = 1;
        scratch = NULL; /* owned by this call until it ends */
    }
    PyObject *result = NULL;
    if (write_node(&o, n, value, 0) == 0) {
        Py_ssize_t hl = PyBytes_GET_SIZE(head), tl = PyBytes_GET_SIZE(tail);
        result = PyBytes_FromStringAndSize(NULL, hl + o.len + tl);
        if (result != NULL) {
            char *w = PyBytes_AS_STRING(result);
            memcpy(w, PyBytes_AS_STRING(head), (size_t)hl);
            memcpy(w + hl, o.buf, (size_t)o.len);
            memcpy(w + hl + o.len, PyBytes_AS_STRING(tail), (size_t)tl);
        }
    }
    if (shared && o.cap <= SCRATCH_KEEP) {
        scratch = o.buf;
        scratch_cap = o.cap;
    }
    else
        PyMem_Free(o.buf);
    if (shared)
        scratch_busy = 0;
    return result;
}

/* encode(plan, value, head, tail) -> head + JSON of value + tail */
static PyObject *
encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encode(plan, value, head, tail)");
        return NULL;
    }
    if (leaf_dumps == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    Node *n = (Node *)PyCapsule_GetPointer(args[0], CAPSULE_NAME);
    if (n == NULL)
        return NULL;
    PyObject *head = args[2], *tail = args[3];
    if (!PyBytes_Check(head) || !PyBytes_Check(tail)) {
        PyErr_SetString(PyExc_TypeError, "head and tail must be bytes");
        return NULL;
    }
    return encode_node(n, args[1], head, tail);
}

/* ---------------------------------------------------------------------------------------- */
/* the send loop's ordinary records (cdc/pipeline/delivery.py, Delivery._send) */

static PyObject *s_topic, *s_key_schema, *s_key, *s_value_schema, *s_value, *s_raw, *s_headers,
    *s_kafka_partition;

/* What JsonConverter.from_connect returns for (schema, value) when its cache already holds
 * a compiled plan for schema (state: (converter._by_id, converter._tail)): a new reference
 * to the bytes, or to None for a null key or tombstone without a schema. NULL, with no error
 * set, for anything else: the caller leaves that record to from_connect itself. */
static PyObject *
cached_encode(PyObject *state, PyObject *schema, PyObject *value)
{
    if (schema == Py_None) {
        if (value == Py_None)
            Py_RETURN_NONE;
        return NULL;
    }
    if (value == Py_None)
        return NULL;
    PyObject *by_id = PyTuple_GET_ITEM(state, 0), *tail = PyTuple_GET_ITEM(state, 1);
    PyObject *id = PyLong_FromVoidPtr(schema);
    if (id == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *entry = PyDict_GetItemWithError(by_id, id); /* borrowed */
    Py_DECREF(id);
    if (entry == NULL || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 5 ||
        PyTuple_GET_ITEM(entry, 0) != schema) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *head = PyTuple_GET_ITEM(entry, 1), *plan = PyTuple_GET_ITEM(entry, 4);
    if (plan == Py_None || !PyBytes_Check(head))
        return NULL;
    Node *n = (Node *)PyCapsule_GetPointer(plan, CAPSULE_NAME);
    if (n == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *out = encode_node(n, value, head, tail);
    if (out == NULL)
        PyErr_Clear(); /* from_connect decides: the reference's bytes or its error */
    return out;
}

/* 1 if the attribute is set (truthy), 0 if not, -1 on error */
static int
attr_true(PyObject *rec, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(rec, name);
    if (v == NULL)
        return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* One ordinary record produced: 1 done, 0 left to the caller (no error set). */
static int
send_one(PyObject *rec, PyObject *topic, PyObject *known, PyObject *kstate, PyObject *vstate,
         PyObject *produce)
{
    if (attr_true(rec, s_raw) != 0 || attr_true(rec, s_headers) != 0) {
        PyErr_Clear();
        return 0;
    }
    PyObject *part = PyObject_GetAttr(rec, s_kafka_partition);
    if (part == NULL) {
        PyErr_Clear();
        return 0;
    }
    int fixed = part != Py_None;
    Py_DECREF(part);
    if (fixed || PySet_Contains(known, topic) != 1) {
        PyErr_Clear();
        return 0;
    }
    PyObject *ks = PyObject_GetAttr(rec, s_key_schema), *k = PyObject_GetAttr(rec, s_key);
    PyObject *vs = PyObject_GetAttr(rec, s_value_schema), *v = PyObject_GetAttr(rec, s_value);
    PyObject *key = NULL, *value = NULL, *res = NULL;
    if (ks != NULL && k != NULL && vs != NULL && v != NULL &&
        (key = cached_encode(kstate, ks, k)) != NULL &&
        (value = cached_encode(vstate, vs, v)) != NULL) {
        PyObject *args[3] = {topic, value, key};
        res = PyObject_Vectorcall(produce, args, 3, NULL);
    }
    Py_XDECREF(ks);
    Py_XDECREF(k);
    Py_XDECREF(vs);
    Py_XDECREF(v);
    Py_XDECREF(key);
    Py_XDECREF(value);
    if (res == NULL) {
        /* not produced (a full buffer, a refusal, an attribute missing): the caller's own
         * path does it again and handles what happens there */
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(res);
    return 1;
}

/* send_json(batch, start, known, key_state, value_state, produce) -> (stopped_at, sent)
 *
 * Delivery._send's loop for records whose both converters are JsonConverters with the
 * record's schemas already compiled: from batch[start] on, skip position markers and
 * produce(topic, value, key) each ordinary record (known topic, not raw, no headers, no
 * fixed partition, schemas cached with a plan), stopping at the first record it does not
 * handle, which the caller sends its own way before calling again from the next one. */
static PyObject *
send_json(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyList_Check(args[0]) || !PyLong_Check(args[1]) ||
        !PyAnySet_Check(args[2]) || !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) != 2 ||
        !PyTuple_Check(args[4]) || PyTuple_GET_SIZE(args[4]) != 2 ||
        !PyDict_Check(PyTuple_GET_ITEM(args[3], 0)) || !PyDict_Check(PyTuple_GET_ITEM(args[4], 0)) ||
        !PyBytes_Check(PyTuple_GET_ITEM(args[3], 1)) || !PyBytes_Check(PyTuple_GET_ITEM(args[4], 1))) {
        PyErr_SetString(PyExc_TypeError,
                        "send_json(batch: list, start: int, known: set, (by_id, tail), "
                        "(by_id, tail), produce)");
        return NULL;
    }
    if (leaf_dumps == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return NULL;
    }
    PyObject *batch = args[0], *known = args[2], *kstate = args[3], *vstate = args[4];
    PyObject *produce = args[5];
    Py_ssize_t i = PyLong_AsSsize_t(args[1]), sent = 0;
    if (i < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "start must be >= 0");
        return NULL;
    }
    for (; i < PyList_GET_SIZE(batch); i++) {
        PyObject *rec = PyList_GET_ITEM(batch, i);
        Py_INCREF(rec);
        PyObject *topic = PyObject_GetAttr(rec, s_topic);
        int done = 0;
        if (topic == NULL)
            PyErr_Clear();
        else if (PyUnicode_CheckExact(topic)) {
            if (PyUnicode_GET_LENGTH(topic) == 0)
                done = 1; /* a position marker: nothing to produce */
            else if (send_one(rec, topic, known, kstate, vstate, produce)) {
                done = 1;
                sent++;
            }
        }
        Py_XDECREF(topic);
        Py_DECREF(rec);
        if (!done)
            break;
    }
    return Py_BuildValue("(nn)", i, sent);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(leaf_dumps, float_dumps, decimal_type): the leaf writers and the Decimal type "
     "encode uses."},
    {"compile_plan", compile_plan, METH_O,
     "compile_plan(spec) -> plan: a per-schema plan (json._plan) compiled for encode."},
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(plan, value, head, tail) -> bytes: head + the value's JSON + tail."},
    {"send_json", (PyCFunction)(void (*)(void))send_json, METH_FASTCALL,
     "send_json(batch, start, known, key_state, value_state, produce) -> (stopped_at, sent): "
     "Delivery._send's loop over ordinary records converted by cached JSON plans."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "cdc.converters._json_c",
    "JsonConverter's payload writer, compiled (reference: cdc.converters.json).", -1, methods,
};

PyMODINIT_FUNC
PyInit__json_c(void)
{
    esc_init();
    static const char *names[] = {"topic", "key_schema", "key", "value_schema", "value",
                                  "raw", "headers", "kafka_partition"};
    PyObject **slots[] = {&s_topic, &s_key_schema, &s_key, &s_value_schema, &s_value,
                          &s_raw, &s_headers, &s_kafka_partition};
    for (int i = 0; i < 8; i++) {
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
