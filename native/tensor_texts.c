/* tensor_texts(payload, order, starts, dtypes, formats) -> (blob, offsets, hashes)
 *
 * The six texts of each op of tensor_info records, as the reference prints them: input shapes,
 * input data types, input formats, output shapes, output data types, output formats.
 *
 * payload  the records' bytes from tensor_num on (TENSOR_WIDTH = 224 bytes a record, little-endian
 *          uint32: tensor_num, then 5 slots of type, format, dtype, 8 dims)
 * order    int64 record numbers, op after op; starts: int64, op g is order[starts[g]:starts[g + 1]]
 * dtypes   (blob, int64 offsets): the name of each ge::DataType code, an empty name for a code
 *          without one (printed in decimal); formats: the same for the low byte of ge::Format
 *
 * An op's tensors are its records' first min(tensor_num, 5) slots, record after record; type 0 is
 * an input, any other an output. A shape is its dims up to the first 0, joined by ','; a format
 * is its low byte's name, with ':<sub-format>' when bits 8-23 are not 0; the code 0xFFFFFFFF
 * reads UNDEFINED. A column joins its tensors' texts with ';', shapes within double quotes; an
 * empty column (or '""') reads N/A.
 *
 * Returns the texts as one blob: text 6g + c (op g, column c) is blob[offsets[6g + c]:
 * offsets[6g + c + 1]], offsets as int64 bytes; hashes: uint64 bytes, the 64-bit FNV-1a hash of
 * each text. The Python twin is msprof_kit.native_impl.py_tensor_texts.
 */
#include "tensor_texts.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TENSOR_WIDTH 224
#define TENSOR_SLOTS 5
#define TENSOR_DIMS 8
#define SLOT_BYTES 44
#define UNDEFINED 0xFFFFFFFFu
#define FNV_OFFSET 0xCBF29CE484222325ULL
#define FNV_PRIME 0x100000001B3ULL

typedef struct {
    char *p;
    size_t len, cap;
} Text;

static int room(Text *t, size_t extra)
{
    if (t->len + extra <= t->cap)
        return 0;
    size_t cap = t->cap ? t->cap : 1 << 16;
    while (cap < t->len + extra)
        cap += cap / 2;
    char *grown = realloc(t->p, cap);
    if (!grown)
        return -1;
    t->p = grown;
    t->cap = cap;
    return 0;
}

static uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static char *put_u32(char *p, uint32_t v)
{
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

typedef struct {
    const char *blob;
    const int64_t *offsets;
    Py_ssize_t n;      /* names */
    size_t longest;    /* the longest name */
} Names;

/* The name of code v, or v in decimal when it has none. */
static char *put_name(char *p, const Names *names, uint32_t v)
{
    if (v == UNDEFINED) {
        memcpy(p, "UNDEFINED", 9);
        return p + 9;
    }
    if ((Py_ssize_t)v < names->n) {
        int64_t a = names->offsets[v], b = names->offsets[v + 1];
        if (b > a) {
            memcpy(p, names->blob + a, (size_t)(b - a));
            return p + (b - a);
        }
    }
    return put_u32(p, v);
}

static char *put_format(char *p, const Names *formats, uint32_t v)
{
    if (v == UNDEFINED)
        return put_name(p, formats, v);
    p = put_name(p, formats, v & 0xFF);
    uint32_t sub = (v >> 8) & 0xFFFF;
    if (sub) {
        *p++ = ':';
        p = put_u32(p, sub);
    }
    return p;
}

/* Column `col` of the op made of records order[lo:hi] appended to t. */
static int put_column(Text *t, const unsigned char *payload, const int64_t *order, Py_ssize_t lo,
                      Py_ssize_t hi, int col, const Names *dtypes, const Names *formats, size_t per_record)
{
    int output = col >= 3, kind = col % 3, items = 0;
    size_t start = t->len;
    if (room(t, 3))
        return -1;
    if (kind == 0)
        t->p[t->len++] = '"';
    for (Py_ssize_t k = lo; k < hi; k++) {
        const unsigned char *rec = payload + (size_t)order[k] * TENSOR_WIDTH;
        uint32_t num = u32_at(rec);
        if (num > TENSOR_SLOTS)
            num = TENSOR_SLOTS;
        if (room(t, per_record))
            return -1;
        char *p = t->p + t->len;
        for (uint32_t s = 0; s < num; s++) {
            const unsigned char *slot = rec + 4 + s * SLOT_BYTES;
            if ((u32_at(slot) != 0) != output)
                continue;
            if (items++)
                *p++ = ';';
            if (kind == 0) {
                for (int d = 0; d < TENSOR_DIMS; d++) {
                    uint32_t v = u32_at(slot + 12 + 4 * d);
                    if (!v)
                        break;
                    if (d)
                        *p++ = ',';
                    p = put_u32(p, v);
                }
            } else if (kind == 1) {
                p = put_name(p, dtypes, u32_at(slot + 8));
            } else {
                p = put_format(p, formats, u32_at(slot + 4));
            }
        }
        t->len = (size_t)(p - t->p);
    }
    if (room(t, 3))
        return -1;
    if (kind == 0)
        t->p[t->len++] = '"';
    if (t->len - start == (kind == 0 ? 2u : 0u)) {
        memcpy(t->p + start, "N/A", 3);
        t->len = start + 3;
    }
    return 0;
}

static int get_names(PyObject *arg, Py_buffer *blob, Py_buffer *offsets, Names *names, const char *what)
{
    PyObject *b, *o;
    if (!PyTuple_Check(arg) || !PyArg_ParseTuple(arg, "OO", &b, &o)) {
        PyErr_Format(PyExc_TypeError, "tensor_texts: %s must be (blob, offsets)", what);
        return -1;
    }
    if (PyObject_GetBuffer(b, blob, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (PyObject_GetBuffer(o, offsets, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(blob);
        return -1;
    }
    names->blob = blob->buf;
    names->offsets = offsets->buf;
    names->n = offsets->len / 8 - 1;
    names->longest = 0;
    int ok = offsets->itemsize == 8 && names->n >= 0;
    for (Py_ssize_t i = 0; ok && i < names->n; i++) {
        int64_t a = names->offsets[i], b2 = names->offsets[i + 1];
        ok = a >= 0 && b2 >= a && b2 <= blob->len;
        if (ok && (size_t)(b2 - a) > names->longest)
            names->longest = (size_t)(b2 - a);
    }
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "tensor_texts: %s offsets must be ascending int64 within the blob", what);
        PyBuffer_Release(blob);
        PyBuffer_Release(offsets);
        return -1;
    }
    return 0;
}

PyObject *tensor_texts(PyObject *self, PyObject *args)
{
    PyObject *payload_obj, *order_obj, *starts_obj, *dtypes_obj, *formats_obj, *result = NULL;
    Py_buffer payload, order, starts, dt_blob, dt_off, fm_blob, fm_off;
    Names dtypes, formats;
    Text t = {NULL, 0, 0};
    int64_t *offsets = NULL;
    uint64_t *hashes = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO:tensor_texts", &payload_obj, &order_obj, &starts_obj, &dtypes_obj,
                          &formats_obj))
        return NULL;
    if (PyObject_GetBuffer(payload_obj, &payload, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(order_obj, &order, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto no_order;
    if (PyObject_GetBuffer(starts_obj, &starts, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        goto no_starts;
    if (get_names(dtypes_obj, &dt_blob, &dt_off, &dtypes, "dtypes") < 0)
        goto no_dtypes;
    if (get_names(formats_obj, &fm_blob, &fm_off, &formats, "formats") < 0)
        goto no_formats;

    Py_ssize_t n = payload.len / TENSOR_WIDTH, n_order = order.len / 8, m = starts.len / 8 - 1;
    const int64_t *ord = order.buf, *st = starts.buf;
    if (payload.len % TENSOR_WIDTH || order.itemsize != 8 || starts.itemsize != 8 || m < 0) {
        PyErr_SetString(PyExc_ValueError, "tensor_texts: payload must hold 224-byte records, order and starts "
                        "int64 items, starts at least one");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_order; i++) {
        if (ord[i] < 0 || ord[i] >= n) {
            PyErr_Format(PyExc_ValueError, "tensor_texts: order[%zd] = %lld is not a record", i, (long long)ord[i]);
            goto done;
        }
    }
    for (Py_ssize_t g = 0; g <= m; g++) {
        if (st[g] < 0 || st[g] > n_order || (g && st[g] < st[g - 1])) {
            PyErr_Format(PyExc_ValueError, "tensor_texts: starts must ascend within order (starts[%zd])", g);
            goto done;
        }
    }
    /* the longest record's column: 5 tensors, each a separator and its longest text */
    size_t name_room = (dtypes.longest > formats.longest ? dtypes.longest : formats.longest) + 16;
    size_t per_record = TENSOR_SLOTS * (1 + (name_room > 88 ? name_room : 88));
    offsets = malloc(sizeof(int64_t) * (size_t)(6 * m + 1));
    hashes = malloc(sizeof(uint64_t) * (size_t)(6 * m + (m == 0)));
    if (!offsets || !hashes) {
        PyErr_NoMemory();
        goto done;
    }
    offsets[0] = 0;
    for (Py_ssize_t g = 0; g < m; g++) {
        for (int col = 0; col < 6; col++) {
            size_t start = t.len;
            if (put_column(&t, payload.buf, ord, st[g], st[g + 1], col, &dtypes, &formats, per_record) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            uint64_t h = FNV_OFFSET;
            for (size_t i = start; i < t.len; i++) {
                h ^= (unsigned char)t.p[i];
                h *= FNV_PRIME;
            }
            offsets[6 * g + col + 1] = (int64_t)t.len;
            hashes[6 * g + col] = h;
        }
    }
    result = Py_BuildValue("(y#y#y#)", t.p ? t.p : "", (Py_ssize_t)t.len, (const char *)offsets,
                           (Py_ssize_t)(sizeof(int64_t) * (size_t)(6 * m + 1)), (const char *)hashes,
                           (Py_ssize_t)(sizeof(uint64_t) * (size_t)(6 * m)));
done:
    free(t.p);
    free(offsets);
    free(hashes);
    PyBuffer_Release(&fm_blob);
    PyBuffer_Release(&fm_off);
no_formats:
    PyBuffer_Release(&dt_blob);
    PyBuffer_Release(&dt_off);
no_dtypes:
    PyBuffer_Release(&starts);
no_starts:
    PyBuffer_Release(&order);
no_order:
    PyBuffer_Release(&payload);
    return result;
}
