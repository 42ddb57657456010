/* msprof_kit._native: one buffer-level loop the exporters cannot vectorize with numpy.
 *
 * format_rows(pieces, slots, n, sep) -> bytes
 *
 * Renders n rows of a template and joins them with `sep`. The template is literal byte pieces
 * with one typed slot between each two of them: row i is
 *     pieces[0] + cell(slots[0], i) + pieces[1] + ... + cell(slots[k-1], i) + pieces[k].
 * Each slot is a tuple (kind, values, arg, alt, alts):
 *     kind 0 INT    values int64: decimal text                                  (str(int))
 *     kind 1 FIXED  values int64 counts of 10^-arg: sign, whole part, '.', arg digits
 *                   (1234567, 3 -> "1234.567"; -1500, 3 -> "-1.500")
 *     kind 2 TRIM   as FIXED, trailing zeros of the fraction dropped, at least one digit kept
 *                   (1234500, 3 -> "1234.5"; 0 -> "0.0"): Python's repr of k / 1000 for 3
 *     kind 3 FLOAT  values float64: Python's repr(float), the shortest text that reads back
 *                   as the same double
 *     kind 4 TEXT   values int32 or int64 codes into arg = (blob, offsets): text c is
 *                   blob[offsets[c]:offsets[c + 1]], offsets an int64 array
 * alt is None or a uint8 (or bool) array: where alt[i] = j > 0 the cell is alts[j - 1] (bytes)
 * instead of the value (N/A cells, "0" on first rows). Every array holds exactly n items.
 *
 * The pure-Python twin with the same signature and the same texts is
 * msprof_kit.native_impl.py_format_rows; tests/test_native.py checks that the two agree.
 * The formatting runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spans.h"
#include "tensor_texts.h"

enum { K_INT = 0, K_FIXED = 1, K_TRIM = 2, K_FLOAT = 3, K_TEXT = 4 };

#define MAX_DECIMALS 18
#define MAX_ALTS 16
#define NUMBER_ROOM 48 /* the longest INT, FIXED, TRIM or FLOAT text, with room to spare */
#define BOUNDED_LIMIT ((size_t)1 << 30) /* largest output reserved at its upper bound (address space only) */

static const uint64_t POW10[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
    1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
    1000000000000000000ULL, 10000000000000000000ULL};

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* ---------------------------------------------------------------------------------------- */
/* Numbers */

/* v in decimal at p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int i = 20;
    while (v >= 100) {
        unsigned k = (unsigned)(v % 100) * 2;
        v /= 100;
        tmp[--i] = DIGIT_PAIRS[k + 1];
        tmp[--i] = DIGIT_PAIRS[k];
    }
    if (v >= 10) {
        unsigned k = (unsigned)v * 2;
        tmp[--i] = DIGIT_PAIRS[k + 1];
        tmp[--i] = DIGIT_PAIRS[k];
    } else {
        tmp[--i] = (char)('0' + v);
    }
    memcpy(p, tmp + i, (size_t)(20 - i));
    return p + (20 - i);
}

/* v in exactly `width` digits, zero-padded (v < 10^width). */
static char *put_padded(char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + width;
}

static uint64_t magnitude(int64_t v)
{
    return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0)
        *p++ = '-';
    return put_u64(p, magnitude(v));
}

/* k / 10^d with d decimals; trim: trailing zeros of the fraction dropped (one digit kept). */
static char *put_decimal(char *p, int64_t k, int d, int trim)
{
    uint64_t m = magnitude(k);
    uint64_t frac = m % POW10[d];
    if (k < 0)
        *p++ = '-';
    p = put_u64(p, m / POW10[d]);
    *p++ = '.';
    if (trim) {
        while (d > 1 && frac % 10 == 0) {
            frac /= 10;
            d--;
        }
    }
    return put_padded(p, frac, d);
}

/* Python's repr of a double from its shortest digits: `digits` (nd of them, no trailing
 * zero unless the value is 0) and decpt (value = 0.digits x 10^decpt). Fixed notation when
 * -4 < decpt <= 16, else d.ddde+XX; a whole number in fixed notation ends in ".0". */
static char *put_repr_digits(char *p, int neg, const char *digits, int nd, int decpt)
{
    if (neg)
        *p++ = '-';
    if (decpt <= -4 || decpt > 16) {
        int e = decpt - 1;
        *p++ = digits[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, digits + 1, (size_t)(nd - 1));
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        if (e < 0)
            e = -e;
        if (e < 10)
            *p++ = '0';
        return put_u64(p, (uint64_t)e);
    }
    if (decpt <= 0) {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -decpt; i++)
            *p++ = '0';
        memcpy(p, digits, (size_t)nd);
        return p + nd;
    }
    if (decpt >= nd) {
        memcpy(p, digits, (size_t)nd);
        p += nd;
        for (int i = nd; i < decpt; i++)
            *p++ = '0';
        *p++ = '.';
        *p++ = '0';
        return p;
    }
    memcpy(p, digits, (size_t)decpt);
    p += decpt;
    *p++ = '.';
    memcpy(p, digits + decpt, (size_t)(nd - decpt));
    return p + (nd - decpt);
}

/* Digits of a decimal M x 10^e10 that reads back as x: the candidates of `prec` significant
 * digits nearest to |x| (printf's correctly rounded one, then its other neighbour). Returns the
 * number of digits written to `digits` (trailing zeros dropped) and sets *decpt, or 0 when no
 * decimal of that precision reads back as x. */
static int shortest_at(double ax, int prec, char *digits, int *decpt)
{
    char text[40];
    uint64_t mant = 0;
    int exp10, nd = 0;
    snprintf(text, sizeof text, "%.*e", prec - 1, ax);
    double back = strtod(text, NULL);
    const char *c = text;
    for (; *c && *c != 'e'; c++) {
        if (*c >= '0' && *c <= '9')
            mant = mant * 10 + (uint64_t)(*c - '0');
    }
    exp10 = atoi(c + 1) - (prec - 1); /* value = mant x 10^exp10 */
    if (back != ax) {
        /* the interval of decimals that read back as x is not centred on x at a power of two:
           the other neighbour on the grid of `prec` digits may still be inside it */
        if (back < ax) {
            mant += 1;
            if (mant == POW10[prec]) {
                mant = POW10[prec - 1];
                exp10 += 1;
            }
        } else {
            mant -= 1;
            if (mant < POW10[prec - 1]) {
                mant = POW10[prec] - 1;
                exp10 -= 1;
            }
        }
        snprintf(text, sizeof text, "%" PRIu64 "e%d", mant, exp10);
        if (strtod(text, NULL) != ax)
            return 0;
    }
    while (mant % 10 == 0 && mant) {
        mant /= 10;
        exp10 += 1;
    }
    char *end = put_u64(digits, mant);
    nd = (int)(end - digits);
    *decpt = nd + exp10;
    return nd;
}

/* Python's repr(x). */
static char *put_float(char *p, double x)
{
    if (isnan(x)) {
        memcpy(p, "nan", 3);
        return p + 3;
    }
    int neg = signbit(x) != 0;
    double ax = fabs(x);
    if (isinf(x)) {
        if (neg)
            *p++ = '-';
        memcpy(p, "inf", 3);
        return p + 3;
    }
    if (ax == 0.0) {
        if (neg)
            *p++ = '-';
        memcpy(p, "0.0", 3);
        return p + 3;
    }
    /* The usual case, a whole number of thousandths below 10^12 (microseconds from integer
       ns): x is the double nearest to k/1000, a decimal of at most 15 significant digits, so
       it is the shortest text that reads back as x (10^15 < 2^52: decimals of 15 digits are
       told apart by doubles) and repr prints it in fixed notation. */
    if (ax < 1e12) {
        double scaled = nearbyint(ax * 1000.0);
        int64_t k = (int64_t)scaled;
        if ((double)k / 1000.0 == ax) {
            if (neg)
                *p++ = '-';
            return put_decimal(p, k, 3, 1);
        }
    }
    /* Any other double: the shortest decimal that reads back, nearest to x among those. For a
       normal double a decimal of 15 digits or fewer reads back only if the correctly rounded
       15-digit one does; subnormals have fewer significant bits and may need fewer digits. */
    char digits[24];
    int decpt = 0, nd = 0;
    if (ax < DBL_MIN) {
        /* whether some decimal of `prec` digits reads back only grows with prec (such a decimal,
           padded with a zero, is one of prec + 1 digits between x and one of the two tried next),
           so the fewest digits are found by bisection; 17 always suffice */
        int lo = 1, hi = 17;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (shortest_at(ax, mid, digits, &decpt))
                hi = mid;
            else
                lo = mid + 1;
        }
        nd = shortest_at(ax, lo, digits, &decpt);
    } else {
        for (int prec = 15; prec <= 17 && nd == 0; prec++)
            nd = shortest_at(ax, prec, digits, &decpt);
    }
    return put_repr_digits(p, neg, digits, nd, decpt);
}

/* ---------------------------------------------------------------------------------------- */
/* Slots */

typedef struct {
    int kind;
    int decimals;
    int code_size;          /* TEXT: 4 or 8 */
    const void *values;
    const char *blob;       /* TEXT */
    Py_ssize_t blob_len;
    const int64_t *offsets; /* TEXT: n_texts + 1 */
    Py_ssize_t n_texts;
    const uint8_t *alt;     /* NULL: no alternative texts */
    int n_alts;
    const char *alt_text[MAX_ALTS];
    Py_ssize_t alt_len[MAX_ALTS];
    size_t max_len;         /* the longest cell */
} Slot;

/* The buffers a call holds: at most 4 a slot (values, blob, offsets, alt). */
typedef struct {
    Py_buffer *views;
    int n, cap;
} Views;

static int get_view(Views *vs, PyObject *obj, Py_buffer **out, const char *what)
{
    if (vs->n >= vs->cap) {
        PyErr_SetString(PyExc_SystemError, "format_rows: more buffers than slots allow");
        return -1;
    }
    Py_buffer *v = &vs->views[vs->n];
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Format(PyExc_TypeError, "format_rows: %s is not a contiguous buffer", what);
        return -1;
    }
    vs->n++;
    *out = v;
    return 0;
}

static void release_views(Views *vs)
{
    for (int i = 0; i < vs->n; i++)
        PyBuffer_Release(&vs->views[i]);
    vs->n = 0;
}

/* The struct code of a buffer: its last character ('<q' -> 'q'). */
static char code_of(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
    return f[strlen(f) - 1];
}

static int is_int_code(char c)
{
    return c == 'q' || c == 'l' || c == 'i';
}

static int check_items(const Py_buffer *v, Py_ssize_t n, Py_ssize_t itemsize, const char *what, int j)
{
    if (v->itemsize != itemsize || v->len != n * itemsize) {
        PyErr_Format(PyExc_ValueError, "format_rows: slot %d: %s must hold %zd items of %zd bytes "
                     "(got %zd bytes in items of %zd)", j, what, n, itemsize, v->len, v->itemsize);
        return -1;
    }
    return 0;
}

static int parse_slot(PyObject *tuple, int j, Py_ssize_t n, Slot *s, Views *vs)
{
    PyObject *kind, *values, *arg, *alt, *alts;
    Py_buffer *v;
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 5) {
        PyErr_Format(PyExc_TypeError, "format_rows: slot %d is not a (kind, values, arg, alt, alts) tuple", j);
        return -1;
    }
    kind = PyTuple_GET_ITEM(tuple, 0);
    values = PyTuple_GET_ITEM(tuple, 1);
    arg = PyTuple_GET_ITEM(tuple, 2);
    alt = PyTuple_GET_ITEM(tuple, 3);
    alts = PyTuple_GET_ITEM(tuple, 4);
    memset(s, 0, sizeof *s);
    s->kind = (int)PyLong_AsLong(kind);
    if (s->kind == -1 && PyErr_Occurred())
        return -1;
    if (get_view(vs, values, &v, "values") < 0)
        return -1;
    s->values = v->buf;
    switch (s->kind) {
    case K_INT:
    case K_FIXED:
    case K_TRIM:
        s->max_len = 22 + MAX_DECIMALS; /* sign, 19 digits, '.', the decimals */
        if (!is_int_code(code_of(v)) || check_items(v, n, 8, "values", j) < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "format_rows: slot %d: values must be int64", j);
            return -1;
        }
        if (s->kind != K_INT) {
            long d = PyLong_AsLong(arg);
            if (d == -1 && PyErr_Occurred())
                return -1;
            if (d < 1 || d > MAX_DECIMALS) {
                PyErr_Format(PyExc_ValueError, "format_rows: slot %d: decimals must be 1 to %d, not %ld",
                             j, MAX_DECIMALS, d);
                return -1;
            }
            s->decimals = (int)d;
        }
        break;
    case K_FLOAT:
        s->max_len = 24; /* -2.2250738585072014e-308 */
        if (code_of(v) != 'd' || check_items(v, n, 8, "values", j) < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "format_rows: slot %d: values must be float64", j);
            return -1;
        }
        break;
    case K_TEXT: {
        Py_buffer *blob, *offsets;
        if (!is_int_code(code_of(v)) || (v->itemsize != 4 && v->itemsize != 8)) {
            PyErr_Format(PyExc_TypeError, "format_rows: slot %d: codes must be int32 or int64", j);
            return -1;
        }
        if (check_items(v, n, v->itemsize, "codes", j) < 0)
            return -1;
        s->code_size = (int)v->itemsize;
        if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != 2) {
            PyErr_Format(PyExc_TypeError, "format_rows: slot %d: arg must be a (blob, offsets) tuple", j);
            return -1;
        }
        if (get_view(vs, PyTuple_GET_ITEM(arg, 0), &blob, "blob") < 0 ||
            get_view(vs, PyTuple_GET_ITEM(arg, 1), &offsets, "offsets") < 0)
            return -1;
        if (offsets->itemsize != 8 || !is_int_code(code_of(offsets)) || offsets->len < 8) {
            PyErr_Format(PyExc_TypeError, "format_rows: slot %d: offsets must be a non-empty int64 array", j);
            return -1;
        }
        s->blob = blob->buf;
        s->blob_len = blob->len;
        s->offsets = offsets->buf;
        s->n_texts = offsets->len / 8 - 1;
        for (Py_ssize_t c = 0; c < s->n_texts; c++) {
            int64_t lo = s->offsets[c], hi = s->offsets[c + 1];
            if (lo >= 0 && hi >= lo && hi <= s->blob_len && (size_t)(hi - lo) > s->max_len)
                s->max_len = (size_t)(hi - lo);
        }
        break;
    }
    default:
        PyErr_Format(PyExc_ValueError, "format_rows: slot %d: unknown kind %d", j, s->kind);
        return -1;
    }
    if (alt != Py_None) {
        Py_buffer *a;
        if (!PyTuple_Check(alts) || PyTuple_GET_SIZE(alts) > MAX_ALTS) {
            PyErr_Format(PyExc_TypeError, "format_rows: slot %d: alts must be a tuple of at most %d bytes",
                         j, MAX_ALTS);
            return -1;
        }
        if (get_view(vs, alt, &a, "alt") < 0 || check_items(a, n, 1, "alt", j) < 0)
            return -1;
        s->alt = a->buf;
        s->n_alts = (int)PyTuple_GET_SIZE(alts);
        for (int i = 0; i < s->n_alts; i++) {
            PyObject *t = PyTuple_GET_ITEM(alts, i);
            if (!PyBytes_Check(t)) {
                PyErr_Format(PyExc_TypeError, "format_rows: slot %d: alts must be bytes", j);
                return -1;
            }
            s->alt_text[i] = PyBytes_AS_STRING(t);
            s->alt_len[i] = PyBytes_GET_SIZE(t);
            if ((size_t)s->alt_len[i] > s->max_len)
                s->max_len = (size_t)s->alt_len[i];
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The output */

/* The output: a malloc'ed buffer grown as needed, or (bounded) the buffer of a bytes object
   already as large as the rows can be. */
typedef struct {
    char *buf;
    size_t len, cap;
    int bounded;
} Out;

static int reserve(Out *o, size_t extra)
{
    if (o->len + extra <= o->cap)
        return 0;
    if (o->bounded)
        return -1;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + extra)
        cap += cap / 2;
    char *grown = realloc(o->buf, cap);
    if (!grown)
        return -1;
    o->buf = grown;
    o->cap = cap;
    return 0;
}

enum { OK = 0, E_MEMORY, E_CODE, E_ALT, E_OFFSETS };

typedef struct {
    int error;
    int slot;
    Py_ssize_t row;
    int64_t value;
} Failure;

/* Row by row: room for a whole row is made first (with the texts' room made as they come
   unless the output is bounded, where a row never exceeds row_room). */
static void render(Out *o, const char *const *piece, const Py_ssize_t *piece_len, size_t row_room,
                   const Slot *slots, int k, Py_ssize_t n, const char *sep, size_t sep_len, Failure *f)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (reserve(o, row_room) < 0)
            goto nomem;
        char *p = o->buf + o->len;
        if (i) {
            memcpy(p, sep, sep_len);
            p += sep_len;
        }
        memcpy(p, piece[0], (size_t)piece_len[0]);
        p += piece_len[0];
        for (int j = 0; j < k; j++) {
            const Slot *s = &slots[j];
            unsigned a = s->alt ? s->alt[i] : 0;
            const char *text = NULL;
            size_t text_len = 0;
            if (a) {
                if ((int)a > s->n_alts) {
                    *f = (Failure){E_ALT, j, i, (int64_t)a};
                    return;
                }
                text = s->alt_text[a - 1];
                text_len = (size_t)s->alt_len[a - 1];
            } else {
                switch (s->kind) {
                case K_INT:
                    p = put_i64(p, ((const int64_t *)s->values)[i]);
                    break;
                case K_FIXED:
                case K_TRIM:
                    p = put_decimal(p, ((const int64_t *)s->values)[i], s->decimals, s->kind == K_TRIM);
                    break;
                case K_FLOAT:
                    p = put_float(p, ((const double *)s->values)[i]);
                    break;
                default: { /* K_TEXT */
                    int64_t c = s->code_size == 4 ? ((const int32_t *)s->values)[i]
                                                  : ((const int64_t *)s->values)[i];
                    if (c < 0 || c >= s->n_texts) {
                        *f = (Failure){E_CODE, j, i, c};
                        return;
                    }
                    int64_t lo = s->offsets[c], hi = s->offsets[c + 1];
                    if (lo < 0 || hi < lo || hi > s->blob_len) {
                        *f = (Failure){E_OFFSETS, j, i, c};
                        return;
                    }
                    text = s->blob + lo;
                    text_len = (size_t)(hi - lo);
                }
                }
            }
            if (text) {
                if (!o->bounded) {
                    /* a text of any length: make room for it and for the rest of the row */
                    o->len = (size_t)(p - o->buf);
                    if (reserve(o, text_len + row_room) < 0)
                        goto nomem;
                    p = o->buf + o->len;
                }
                memcpy(p, text, text_len);
                p += text_len;
            }
            memcpy(p, piece[j + 1], (size_t)piece_len[j + 1]);
            p += piece_len[j + 1];
        }
        o->len = (size_t)(p - o->buf);
    }
    return;
nomem:
    f->error = E_MEMORY;
}

static PyObject *format_rows(PyObject *self, PyObject *args)
{
    PyObject *pieces_obj, *slots_obj, *pieces = NULL, *slot_seq = NULL, *result = NULL;
    Py_ssize_t n;
    Py_buffer sep;
    Views vs = {NULL, 0, 0};
    Slot *slots = NULL;
    const char **piece = NULL;
    Py_ssize_t *piece_len = NULL;
    Out out = {NULL, 0, 0, 0};
    Failure fail = {OK, 0, 0, 0};
    (void)self;

    if (!PyArg_ParseTuple(args, "OOny*:format_rows", &pieces_obj, &slots_obj, &n, &sep))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "format_rows: n must not be negative");
        goto done;
    }
    pieces = PySequence_Fast(pieces_obj, "format_rows: pieces must be a sequence of bytes");
    slot_seq = PySequence_Fast(slots_obj, "format_rows: slots must be a sequence of tuples");
    if (!pieces || !slot_seq)
        goto done;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(slot_seq);
    if (k > INT_MAX / 4 - 1) {
        PyErr_SetString(PyExc_ValueError, "format_rows: too many slots");
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(pieces) != k + 1) {
        PyErr_Format(PyExc_ValueError, "format_rows: %zd slots need %zd pieces, not %zd", k, k + 1,
                     PySequence_Fast_GET_SIZE(pieces));
        goto done;
    }
    vs.cap = 4 * (int)k + 1;
    vs.views = PyMem_Calloc((size_t)vs.cap, sizeof *vs.views);
    slots = PyMem_Calloc((size_t)k + 1, sizeof *slots);
    piece = PyMem_Calloc((size_t)k + 1, sizeof *piece);
    piece_len = PyMem_Calloc((size_t)k + 1, sizeof *piece_len);
    if (!vs.views || !slots || !piece || !piece_len) {
        PyErr_NoMemory();
        goto done;
    }
    size_t fixed_room = (size_t)sep.len;
    for (Py_ssize_t j = 0; j <= k; j++) {
        PyObject *b = PySequence_Fast_GET_ITEM(pieces, j);
        if (!PyBytes_Check(b)) {
            PyErr_Format(PyExc_TypeError, "format_rows: piece %zd is not bytes", j);
            goto done;
        }
        piece[j] = PyBytes_AS_STRING(b);
        piece_len[j] = PyBytes_GET_SIZE(b);
        fixed_room += (size_t)piece_len[j] + NUMBER_ROOM;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        if (parse_slot(PySequence_Fast_GET_ITEM(slot_seq, j), (int)j, n, &slots[j], &vs) < 0)
            goto done;
    }
    /* The longest row: when n of them fit in BOUNDED_LIMIT, the rows go straight into a bytes
       object of that size (only the pages written become resident), shrunk at the end. Else
       into a buffer grown from a guess, copied at the end. */
    size_t row_max = (size_t)sep.len, guess = (size_t)sep.len + (size_t)k * 12;
    for (Py_ssize_t j = 0; j <= k; j++) {
        row_max += (size_t)piece_len[j] + (j < k ? slots[j].max_len : 0);
        guess += (size_t)piece_len[j];
    }
    if (n > 0 && row_max <= BOUNDED_LIMIT / (size_t)n) {
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(row_max * (size_t)n));
        if (!result)
            goto done;
        out.buf = PyBytes_AS_STRING(result);
        out.cap = row_max * (size_t)n;
        out.bounded = 1;
        fixed_room = row_max;
    } else if (reserve(&out, n ? guess * (size_t)n : 1) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    render(&out, piece, piece_len, fixed_room, slots, (int)k, n, sep.buf, (size_t)sep.len, &fail);
    Py_END_ALLOW_THREADS
    if (fail.error != OK && out.bounded)
        Py_CLEAR(result);
    switch (fail.error) {
    case OK:
        if (!out.bounded)
            result = PyBytes_FromStringAndSize(out.buf, (Py_ssize_t)out.len);
        else if (_PyBytes_Resize(&result, (Py_ssize_t)out.len) < 0)
            result = NULL;
        break;
    case E_MEMORY:
        PyErr_NoMemory();
        break;
    case E_CODE:
        PyErr_Format(PyExc_IndexError, "format_rows: slot %d, row %zd: code %lld is not below the %zd texts",
                     fail.slot, fail.row, (long long)fail.value, slots[fail.slot].n_texts);
        break;
    case E_ALT:
        PyErr_Format(PyExc_IndexError, "format_rows: slot %d, row %zd: alt %lld but only %d alts",
                     fail.slot, fail.row, (long long)fail.value, slots[fail.slot].n_alts);
        break;
    default:
        PyErr_Format(PyExc_ValueError, "format_rows: slot %d, row %zd: the offsets of text %lld lie outside "
                     "the blob", fail.slot, fail.row, (long long)fail.value);
    }
done:
    if (!out.bounded)
        free(out.buf);
    release_views(&vs);
    PyMem_Free(vs.views);
    PyMem_Free(slots);
    PyMem_Free(piece);
    PyMem_Free(piece_len);
    Py_XDECREF(pieces);
    Py_XDECREF(slot_seq);
    PyBuffer_Release(&sep);
    return result;
}

static PyObject *float_repr(PyObject *self, PyObject *arg)
{
    char text[NUMBER_ROOM];
    double x = PyFloat_AsDouble(arg);
    (void)self;
    if (x == -1.0 && PyErr_Occurred())
        return NULL;
    char *end = put_float(text, x);
    return PyUnicode_FromStringAndSize(text, end - text);
}

/* ---------------------------------------------------------------------------------------- */
/* sqlite table b-tree leaves
 *
 * table_leaves(kinds, columns, n, page_size, rowids) -> (pages, keys)
 *
 * Packs n rows into the leaf pages of an sqlite table b-tree (the file format's "table b-tree
 * leaf page", type 13), filled in row order, each page as full as its cells allow. kinds is
 * bytes, one letter a column: 'i' INT (int64 values), 'r' REAL (float64), 'n' NUMERIC (float64:
 * a whole number within int64 is stored as an integer, as sqlite's NUMERIC affinity does), 'k'
 * the rowid alias of an INTEGER PRIMARY KEY (stored as NULL; its buffer is not read, pass None).
 * A NaN REAL or NUMERIC is NULL. 't' TEXT: the column is a pair (blob, offsets), UTF-8 bytes and
 * n + 1 int64 offsets, text i being blob[offsets[i]:offsets[i + 1]]; a row must fit in a page
 * without overflow pages (its payload at most page_size - 35 bytes). rowids is the first rowid (the
 * rows get consecutive ones) or an int64 buffer of n strictly increasing rowids. Returns the pages (a multiple of page_size bytes)
 * and, as int64 bytes, the last rowid of each page: the keys of the interior pages above them.
 * Leaf pages hold no page numbers, so they can be placed anywhere in a file.
 */

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    unsigned char tmp[10];
    int n = 0;
    if (v > 0x00ffffffffffffffULL) {
        p[8] = (unsigned char)v;
        v >>= 8;
        for (int i = 7; i >= 0; i--) {
            p[i] = (unsigned char)((v & 0x7f) | 0x80);
            v >>= 7;
        }
        return p + 9;
    }
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | 0x80);
        v >>= 7;
    } while (v);
    tmp[0] &= 0x7f;
    while (n)
        *p++ = tmp[--n];
    return p;
}

static const int SERIAL_SIZE[10] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};

/* The serial type of an integer (schema format 4: 0 and 1 take no body). */
static int int_serial(int64_t v)
{
    uint64_t u = v < 0 ? ~(uint64_t)v : (uint64_t)v;
    if (v == 0)
        return 8;
    if (v == 1)
        return 9;
    if (u <= 127)
        return 1;
    if (u <= 32767)
        return 2;
    if (u <= 8388607)
        return 3;
    if (u <= 2147483647)
        return 4;
    if (u <= 0x00007fffffffffffULL)
        return 5;
    return 6;
}

static unsigned char *put_be(unsigned char *p, uint64_t v, int size)
{
    for (int i = size - 1; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
    return p + size;
}

#define MAX_LEAF_COLUMNS 100

typedef struct {
    char kind;
    const void *values;           /* 'i', 'r', 'n': n values; 't': the texts' UTF-8 bytes */
    const int64_t *offsets;       /* 't': n + 1 offsets into values */
} LeafColumn;

static int varint_len(uint64_t v)
{
    int n = 1;
    if (v > 0x00ffffffffffffffULL)
        return 9;
    while (v >>= 7)
        n++;
    return n;
}

/* Column j of row i as (serial type, integer bits): reals as their IEEE bits. */
static int cell_value(const LeafColumn *c, Py_ssize_t i, uint64_t *bits)
{
    double r;
    int64_t v;
    switch (c->kind) {
    case 'k':
        return 0;
    case 't':
        *bits = (uint64_t)(c->offsets[i + 1] - c->offsets[i]);  /* the text's length */
        return 13 + 2 * (int)*bits;
    case 'i':
        v = ((const int64_t *)c->values)[i];
        *bits = (uint64_t)v;
        return int_serial(v);
    default:
        r = ((const double *)c->values)[i];
        if (r != r)
            return 0;
        if (c->kind == 'n' && r > -9223372036854775808.0 && r < 9223372036854775808.0) {
            v = (int64_t)r;
            if ((double)v == r && v != INT64_MIN && v != INT64_MAX) {
                *bits = (uint64_t)v;
                return int_serial(v);
            }
        }
        memcpy(bits, &r, sizeof r);
        return 7;
    }
}

/* The body size of serial type s (texts: their length). */
static size_t serial_size(int s)
{
    return s >= 13 ? (size_t)(s - 13) / 2 : (size_t)SERIAL_SIZE[s];
}

/* Packs the rows into out (room for every page); returns the number of pages. */
static Py_ssize_t pack_leaves(const LeafColumn *cols, int k, Py_ssize_t n, size_t page, int64_t first,
                              const int64_t *rowids, unsigned char *out, int64_t *keys)
{
    int serial[MAX_LEAF_COLUMNS];
    uint64_t bits[MAX_LEAF_COLUMNS];
    Py_ssize_t pages = 0;
    unsigned char *pg = NULL;
    size_t top = 0;  /* start of the cell content area */
    int cells = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t rowid = rowids ? rowids[i] : first + i;
        size_t body = 0, types = 0;
        for (int j = 0; j < k; j++) {
            serial[j] = cell_value(&cols[j], i, &bits[j]);
            body += serial_size(serial[j]);
            types += (size_t)varint_len((uint64_t)serial[j]);
        }
        /* the header: its own size (a varint that counts itself) and the serial types */
        size_t header = types + 1 < 128 ? types + 1 : types + 2;
        size_t payload = header + body;
        size_t size = (size_t)varint_len(payload) + (size_t)varint_len((uint64_t)rowid) + payload;
        if (pg == NULL || 8 + 2 * (size_t)(cells + 1) + size > top) {
            if (pg != NULL) {
                put_be(pg + 3, (uint64_t)cells, 2);
                put_be(pg + 5, (uint64_t)top, 2);
            }
            pg = out + (size_t)pages * page;
            memset(pg, 0, page);
            pg[0] = 13;
            top = page;
            cells = 0;
            pages++;
        }
        top -= size;
        unsigned char *p = put_varint(pg + top, payload);
        p = put_varint(p, (uint64_t)rowid);
        p = put_varint(p, header);
        for (int j = 0; j < k; j++)
            p = put_varint(p, (uint64_t)serial[j]);
        for (int j = 0; j < k; j++) {
            int s = serial[j];
            if (s >= 13) {
                memcpy(p, (const unsigned char *)cols[j].values + cols[j].offsets[i], (size_t)bits[j]);
                p += bits[j];
            } else if (SERIAL_SIZE[s]) {
                p = put_be(p, bits[j], SERIAL_SIZE[s]);
            }
        }
        put_be(pg + 8 + 2 * (size_t)cells, (uint64_t)top, 2);
        cells++;
        keys[pages - 1] = rowid;
    }
    if (pg != NULL) {
        put_be(pg + 3, (uint64_t)cells, 2);
        put_be(pg + 5, (uint64_t)top, 2);
    }
    return pages;
}

static PyObject *table_leaves(PyObject *self, PyObject *args)
{
    PyObject *columns_obj, *rowids_obj, *seq = NULL, *pages = NULL, *keys = NULL, *result = NULL;
    Py_buffer kinds, views[2 * MAX_LEAF_COLUMNS + 1];
    int held = 0;
    Py_ssize_t n, page;
    LeafColumn cols[MAX_LEAF_COLUMNS];
    const int64_t *rowids = NULL;
    long long first = 0;
    size_t text_max = 0, text_total = 0;  /* the texts' longest row and all rows, with their serial types */
    (void)self;

    if (!PyArg_ParseTuple(args, "y*OnnO:table_leaves", &kinds, &columns_obj, &n, &page, &rowids_obj))
        return NULL;
    seq = PySequence_Fast(columns_obj, "table_leaves: columns must be a sequence");
    if (!seq)
        goto done;
    Py_ssize_t k = kinds.len;
    if (PySequence_Fast_GET_SIZE(seq) != k || k < 1 || k > MAX_LEAF_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "table_leaves: %zd kinds, %zd columns (1 to %d, one kind each)",
                     k, PySequence_Fast_GET_SIZE(seq), MAX_LEAF_COLUMNS);
        goto done;
    }
    if (n < 0 || page < 512 || page > 65536 || (page & (page - 1))) {
        PyErr_SetString(PyExc_ValueError, "table_leaves: n must not be negative; page_size a power of two "
                        "from 512 to 65536");
        goto done;
    }
    /* the largest cell (9-byte varints, 8-byte bodies) stays below the local payload limit */
    if ((Py_ssize_t)(20 + 10 * k) > page - 35 - 8) {
        PyErr_SetString(PyExc_ValueError, "table_leaves: rows too wide for the page size");
        goto done;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        char kind = ((const char *)kinds.buf)[j];
        PyObject *col = PySequence_Fast_GET_ITEM(seq, j);
        cols[j].kind = kind;
        cols[j].values = NULL;
        cols[j].offsets = NULL;
        if (kind == 'k')
            continue;
        if (kind != 'i' && kind != 'r' && kind != 'n' && kind != 't') {
            PyErr_Format(PyExc_ValueError, "table_leaves: column %zd: kind %c is not one of i, r, n, k, t", j, kind);
            goto done;
        }
        if (kind == 't') {
            if (!PyTuple_Check(col) || PyTuple_GET_SIZE(col) != 2) {
                PyErr_Format(PyExc_ValueError, "table_leaves: column %zd must be a pair (blob, offsets)", j);
                goto done;
            }
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(col, 0), &views[held], PyBUF_C_CONTIGUOUS) < 0)
                goto done;
            Py_buffer *blob = &views[held++];
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(col, 1), &views[held], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
                goto done;
            Py_buffer *off = &views[held++];
            if (!is_int_code(code_of(off)) || off->itemsize != 8 || off->len != (n + 1) * 8) {
                PyErr_Format(PyExc_ValueError, "table_leaves: column %zd must hold %zd int64 offsets", j, n + 1);
                goto done;
            }
            const int64_t *o = off->buf;
            int64_t longest = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > (int64_t)blob->len) {
                    PyErr_Format(PyExc_ValueError, "table_leaves: column %zd: text %zd is not inside the blob", j, i);
                    goto done;
                }
                if (o[i + 1] - o[i] > longest)
                    longest = o[i + 1] - o[i];
            }
            cols[j].values = blob->buf;
            cols[j].offsets = o;
            text_max += (size_t)longest + 2;  /* its bytes, and a serial type up to 3 bytes long */
            text_total += n ? (size_t)(o[n] - o[0]) + 2 * (size_t)n : 0;
            continue;
        }
        if (PyObject_GetBuffer(col, &views[held], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        Py_buffer *v = &views[held++];
        char code = code_of(v);
        int ok = kind == 'i' ? is_int_code(code) && v->itemsize == 8 : code == 'd';
        if (!ok || v->len != n * 8) {
            PyErr_Format(PyExc_ValueError, "table_leaves: column %zd must hold %zd %s", j, n,
                         kind == 'i' ? "int64 values" : "float64 values");
            goto done;
        }
        cols[j].values = v->buf;
    }
    if (PyLong_Check(rowids_obj)) {
        first = PyLong_AsLongLong(rowids_obj);
        if (first == -1 && PyErr_Occurred())
            goto done;
        if (n > 0 && first > LLONG_MAX - n) {
            PyErr_SetString(PyExc_OverflowError, "table_leaves: rowids overflow int64");
            goto done;
        }
    } else {
        if (PyObject_GetBuffer(rowids_obj, &views[held], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        Py_buffer *v = &views[held++];
        if (!is_int_code(code_of(v)) || v->itemsize != 8 || v->len != n * 8) {
            PyErr_Format(PyExc_ValueError, "table_leaves: rowids must hold %zd int64 values", n);
            goto done;
        }
        rowids = v->buf;
        for (Py_ssize_t i = 1; i < n; i++) {
            if (rowids[i] <= rowids[i - 1]) {
                PyErr_Format(PyExc_ValueError, "table_leaves: rowid %lld at row %zd does not follow %lld",
                             (long long)rowids[i], i, (long long)rowids[i - 1]);
                goto done;
            }
        }
    }
    /* a row's payload stays local (no overflow pages): at most page - 35 bytes */
    size_t cell_max = 22 + 10 * (size_t)k + text_max;
    if (cell_max > (size_t)page - 35 - 8) {
        PyErr_SetString(PyExc_ValueError, "table_leaves: a row's texts are too long for the page size");
        goto done;
    }
    /* at most one page a row, and never more than the cells' total size needs */
    size_t bound = n ? ((size_t)n * (22 + 10 * (size_t)k + 2) + text_total) / ((size_t)page - 8 - cell_max - 2) + 1 : 0;
    if (bound > (size_t)n)
        bound = (size_t)n;
    pages = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(bound * (size_t)page));
    keys = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(bound * 8));
    if (!pages || !keys)
        goto done;
    Py_ssize_t used;
    Py_BEGIN_ALLOW_THREADS
    used = pack_leaves(cols, (int)k, n, (size_t)page, (int64_t)first, rowids,
                       (unsigned char *)PyBytes_AS_STRING(pages), (int64_t *)PyBytes_AS_STRING(keys));
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&pages, used * page) < 0 || _PyBytes_Resize(&keys, used * 8) < 0)
        goto done;
    result = PyTuple_Pack(2, pages, keys);
done:
    for (int i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyBuffer_Release(&kinds);
    Py_XDECREF(seq);
    Py_XDECREF(pages);
    Py_XDECREF(keys);
    return result;
}

static PyMethodDef METHODS[] = {
    {"format_rows", format_rows, METH_VARARGS,
     "format_rows(pieces, slots, n, sep) -> bytes: n rows of literal pieces and typed slots, joined by sep."},
    {"table_leaves", table_leaves, METH_VARARGS,
     "table_leaves(kinds, columns, n, page_size, rowids) -> (pages, keys): sqlite table b-tree leaf pages "
     "(texts: a (blob, offsets) pair a column)."},
    {"tensor_texts", tensor_texts, METH_VARARGS,
     "tensor_texts(payload, order, starts, dtypes, formats) -> (blob, offsets, hashes): the six tensor texts "
     "of each op of tensor_info records (native/tensor_texts.c)."},
    {"dict_keys", dict_keys, METH_VARARGS,
     "dict_keys(buf, starts, ends) -> (colon, value, flags): the keys of hash_dic lines (parsers/hashdic.py)."},
    {"csv_table", csv_table, METH_VARARGS,
     "csv_table(texts) -> (blob, offsets): the texts as CSV fields (quoted when they must be), UTF-8, with int64 offsets."},
    {"json_table", json_table, METH_VARARGS,
     "json_table(texts) -> (blob, offsets): the texts as JSON string literals (json.dumps, ensure_ascii=False), UTF-8, "
     "with int64 offsets."},
    {"utf8_table", utf8_table, METH_VARARGS,
     "utf8_table(texts) -> (blob, offsets): the texts' UTF-8 one after the other, with int64 offsets."},
    {"json_list", json_list, METH_VARARGS,
     "json_list(texts) -> str: the list of texts as json.dumps(list(texts), ensure_ascii=False) writes it."},
    {"decode_spans", decode_spans, METH_VARARGS,
     "decode_spans(blob, starts, ends) -> list: the spans of blob decoded as UTF-8 (errors='replace')."},
    {"gather_spans", gather_spans, METH_VARARGS,
     "gather_spans(blob, starts, lengths) -> bytes: the spans of blob, one after the other."},
    {"spans_equal", spans_equal, METH_VARARGS,
     "spans_equal(a, a_starts, b, b_starts, lengths) -> bool: whether each span of a reads as its span of b."},
    {"float_repr", float_repr, METH_O, "float_repr(x) -> str: repr(float(x)), as format_rows prints FLOAT slots."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "msprof_kit._native",
    "The C loop of msprof-kit's exporters (native/_native.c); msprof_kit.native_impl is its Python twin.",
    -1, METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&MODULE);
}
