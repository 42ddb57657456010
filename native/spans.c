/* msprof_kit._native's byte-span loops (registered by native/_native.c): hash_dic's line keys and
 * texts (parsers/hashdic.py) and the tensor texts' interning (ingest/tensors.py). Each has a
 * pure-Python twin beside its user; tests/test_hash_dictionary.py and tests/test_decode.py check
 * that the two agree.
 */
#include "spans.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * dict_keys(buf, starts, ends) -> (colon, value, flags): the keys of hash_dic lines
 * (parsers/hashdic.py). Line i is buf[starts[i]:ends[i]] (int64 offsets); colon[i] (int64) is its
 * first ':' (-1: none); its key is the bytes before it (none without one). flags[i] (uint8): bit 0
 * "fast", a key of 1 to 20 ASCII digits; bit 1 "reach", a fast key some uint64 spells (no leading
 * zero but "0" itself, at most 18446744073709551615). value[i] (uint64): a fast key's number modulo
 * 2^64, else 0. Twin: native_impl.py_dict_keys.
 */
/* An int64 array's buffer (struct code 'q' or 'l', byte order mark allowed), or -1 with ValueError. */
static int get_i64s(PyObject *obj, Py_buffer *view, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    char code = f[strlen(f) - 1];
    if (view->itemsize != 8 || view->len % 8 || !(code == 'q' || code == 'l')) {
        PyErr_Format(PyExc_ValueError, "%s must be an int64 array", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyObject *dict_keys(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *starts_obj, *ends_obj, *result = NULL;
    Py_buffer buf, st, en;
    int64_t *colon = NULL;
    uint64_t *value = NULL;
    unsigned char *flags = NULL;
    static const char U64_MAX_TEXT[] = "18446744073709551615";
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:dict_keys", &buf_obj, &starts_obj, &ends_obj))
        return NULL;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64s(starts_obj, &st, "dict_keys: starts") < 0)
        goto no_starts;
    if (get_i64s(ends_obj, &en, "dict_keys: ends") < 0)
        goto no_ends;
    Py_ssize_t n = st.len / 8;
    const int64_t *s = st.buf, *e = en.buf;
    const unsigned char *b = buf.buf;
    if (en.len != st.len) {
        PyErr_SetString(PyExc_ValueError, "dict_keys: starts and ends must have the same length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > buf.len) {
            PyErr_Format(PyExc_ValueError, "dict_keys: line %zd is not within the buffer", i);
            goto done;
        }
    }
    colon = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    value = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
    flags = malloc((size_t)(n ? n : 1));
    if (!colon || !value || !flags) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *p = b + s[i], *end = b + e[i];
        const unsigned char *c = memchr(p, ':', (size_t)(end - p));
        uint64_t v = 0;
        unsigned char f = 0;
        colon[i] = c ? (int64_t)(c - b) : -1;
        if (c && c > p && c - p <= 20) {
            Py_ssize_t k = c - p, j = 0;
            for (; j < k && p[j] >= '0' && p[j] <= '9'; j++)
                v = v * 10u + (uint64_t)(p[j] - '0');
            if (j == k) {
                f = 1;
                if ((k == 1 || p[0] != '0') && (k < 20 || memcmp(p, U64_MAX_TEXT, 20) <= 0))
                    f |= 2;
            } else {
                v = 0;
            }
        }
        value[i] = v;
        flags[i] = f;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(y#y#y#)", (const char *)colon, (Py_ssize_t)(8 * n), (const char *)value,
                           (Py_ssize_t)(8 * n), (const char *)flags, n);
done:
    free(colon);
    free(value);
    free(flags);
    PyBuffer_Release(&en);
no_ends:
    PyBuffer_Release(&st);
no_starts:
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * gather_spans(blob, starts, lengths) -> bytes: blob[starts[i]:starts[i] + lengths[i]] of every i,
 * one after the other. spans_equal(a, a_starts, b, b_starts, lengths) -> bool: whether every span
 * of `a` reads the same as its span of `b` (ingest/tensors.py's InternedTexts). Twins:
 * native_impl.py_gather_spans, py_spans_equal.
 */
static int check_spans(const Py_buffer *blob, const int64_t *start, const int64_t *len, Py_ssize_t n,
                       const char *what)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (start[i] < 0 || len[i] < 0 || start[i] > blob->len || len[i] > blob->len - start[i]) {
            PyErr_Format(PyExc_ValueError, "%s: span %zd is not within its bytes", what, i);
            return -1;
        }
    }
    return 0;
}

PyObject *gather_spans(PyObject *self, PyObject *args)
{
    PyObject *blob_obj, *starts_obj, *lengths_obj, *result = NULL;
    Py_buffer blob, st, ln;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:gather_spans", &blob_obj, &starts_obj, &lengths_obj))
        return NULL;
    if (PyObject_GetBuffer(blob_obj, &blob, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64s(starts_obj, &st, "gather_spans: starts") < 0)
        goto no_starts;
    if (get_i64s(lengths_obj, &ln, "gather_spans: lengths") < 0)
        goto no_lengths;
    Py_ssize_t n = st.len / 8;
    const int64_t *s = st.buf, *l = ln.buf;
    if (ln.len != st.len) {
        PyErr_SetString(PyExc_ValueError, "gather_spans: starts and lengths must have the same length");
        goto done;
    }
    if (check_spans(&blob, s, l, n, "gather_spans") < 0)
        goto done;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        total += (Py_ssize_t)l[i];
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result) {
        char *out = PyBytes_AS_STRING(result);
        const char *b = blob.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            memcpy(out, b + s[i], (size_t)l[i]);
            out += l[i];
        }
        Py_END_ALLOW_THREADS
    }
done:
    PyBuffer_Release(&ln);
no_lengths:
    PyBuffer_Release(&st);
no_starts:
    PyBuffer_Release(&blob);
    return result;
}

PyObject *spans_equal(PyObject *self, PyObject *args)
{
    PyObject *a_obj, *as_obj, *b_obj, *bs_obj, *len_obj, *result = NULL;
    Py_buffer a, as, b, bs, ln;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO:spans_equal", &a_obj, &as_obj, &b_obj, &bs_obj, &len_obj))
        return NULL;
    if (PyObject_GetBuffer(a_obj, &a, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64s(as_obj, &as, "spans_equal: a_starts") < 0)
        goto no_as;
    if (PyObject_GetBuffer(b_obj, &b, PyBUF_C_CONTIGUOUS) < 0)
        goto no_b;
    if (get_i64s(bs_obj, &bs, "spans_equal: b_starts") < 0)
        goto no_bs;
    if (get_i64s(len_obj, &ln, "spans_equal: lengths") < 0)
        goto no_len;
    Py_ssize_t n = ln.len / 8;
    const int64_t *sa = as.buf, *sb = bs.buf, *l = ln.buf;
    if (as.len != ln.len || bs.len != ln.len) {
        PyErr_SetString(PyExc_ValueError, "spans_equal: a_starts, b_starts and lengths must have the same length");
        goto done;
    }
    if (check_spans(&a, sa, l, n, "spans_equal") < 0 || check_spans(&b, sb, l, n, "spans_equal") < 0)
        goto done;
    int same = 1;
    const char *pa = a.buf, *pb = b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; same && i < n; i++)
        same = memcmp(pa + sa[i], pb + sb[i], (size_t)l[i]) == 0;
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(same);
done:
    PyBuffer_Release(&ln);
no_len:
    PyBuffer_Release(&bs);
no_bs:
    PyBuffer_Release(&b);
no_b:
    PyBuffer_Release(&as);
no_as:
    PyBuffer_Release(&a);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * decode_spans(blob, starts, ends) -> list of str: blob[starts[i]:ends[i]] decoded as UTF-8,
 * undecodable bytes as U+FFFD (errors="replace"): hash_dic's texts (parsers/hashdic.py). Twin:
 * native_impl.py_decode_spans.
 */
PyObject *decode_spans(PyObject *self, PyObject *args)
{
    PyObject *blob_obj, *starts_obj, *ends_obj, *result = NULL;
    Py_buffer blob, st, en;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:decode_spans", &blob_obj, &starts_obj, &ends_obj))
        return NULL;
    if (PyObject_GetBuffer(blob_obj, &blob, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (get_i64s(starts_obj, &st, "decode_spans: starts") < 0)
        goto no_starts;
    if (get_i64s(ends_obj, &en, "decode_spans: ends") < 0)
        goto no_ends;
    Py_ssize_t n = st.len / 8;
    const int64_t *s = st.buf, *e = en.buf;
    if (en.len != st.len) {
        PyErr_SetString(PyExc_ValueError, "decode_spans: starts and ends must have the same length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < 0 || e[i] < s[i] || e[i] > blob.len) {
            PyErr_Format(PyExc_ValueError, "decode_spans: span %zd is not within the bytes", i);
            goto done;
        }
    }
    result = PyList_New(n);
    if (!result)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)blob.buf + s[i], (Py_ssize_t)(e[i] - s[i]), "replace");
        if (!text) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, text);
    }
done:
    PyBuffer_Release(&en);
no_ends:
    PyBuffer_Release(&st);
no_starts:
    PyBuffer_Release(&blob);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * Tables of texts: each str of a sequence written as a CSV field or a JSON string literal, in
 * UTF-8, one after the other. A text that is not a str is a TypeError; one UTF-8 cannot encode
 * (a lone surrogate) a UnicodeEncodeError, as str.encode("utf-8") raises.
 *
 * csv_table(texts) -> (blob, offsets): each text as one CSV field, quoted as csv.QUOTE_MINIMAL
 * quotes (in double quotes, its quotes doubled, when it holds a comma, a double quote, a CR or a
 * LF); offsets (int64 bytes, len + 1 items) where each starts. Twin: native_impl.py_csv_table (the
 * summary's Coded columns, exporters/summary/columns.py).
 *
 * json_table(texts) -> (blob, offsets): each text as a JSON string literal, as
 * json.dumps(text, ensure_ascii=False) writes it (in double quotes; a double quote and a backslash
 * escaped by a backslash; \b \f \n \r \t as such; the other characters below U+0020 as \u00xx;
 * everything else as it is). Twin: native_impl.py_json_table (the timeline's texts of a million
 * distinct op names).
 *
 * utf8_table(texts) -> (blob, offsets): each text's UTF-8 as it is (sqlite TEXT values packed into
 * pages, store/pages.py). Twin: native_impl.py_utf8_table.
 *
 * json_list(texts) -> str: the list as json.dumps(list(texts), ensure_ascii=False) writes it ("[",
 * the literals joined by ", ", "]"). Twin: native_impl.py_json_list (the labels of a store's text
 * columns, store/spilled.py).
 */
typedef Py_ssize_t (*TextSize)(const unsigned char *p, Py_ssize_t n);
typedef char *(*TextWrite)(char *out, const unsigned char *p, Py_ssize_t n);

static int needs_quotes(const unsigned char *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == ',' || c == '"' || c == '\n' || c == '\r')
            return 1;
    }
    return 0;
}

static Py_ssize_t csv_size(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t size = n;
    if (needs_quotes(p, n)) {
        size += 2;
        for (Py_ssize_t j = 0; j < n; j++)
            size += p[j] == '"';
    }
    return size;
}

static char *csv_write(char *out, const unsigned char *p, Py_ssize_t n)
{
    if (!needs_quotes(p, n)) {
        memcpy(out, p, (size_t)n);
        return out + n;
    }
    *out++ = '"';
    for (Py_ssize_t j = 0; j < n; j++) {
        *out++ = (char)p[j];
        if (p[j] == '"')
            *out++ = '"';
    }
    *out++ = '"';
    return out;
}

static Py_ssize_t plain_size(const unsigned char *p, Py_ssize_t n)
{
    (void)p;
    return n;
}

static char *plain_write(char *out, const unsigned char *p, Py_ssize_t n)
{
    memcpy(out, p, (size_t)n);
    return out + n;
}

static Py_ssize_t json_size(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t size = n + 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            size += 1;
        else if (c < 0x20)
            size += 5;
    }
    return size;
}

static char *json_write(char *out, const unsigned char *p, Py_ssize_t n)
{
    static const char HEX[] = "0123456789abcdef";
    *out++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\f': *out++ = 'f'; break;
        case '\n': *out++ = 'n'; break;
        case '\r': *out++ = 'r'; break;
        case '\t': *out++ = 't'; break;
        default:
            *out++ = 'u';
            *out++ = '0';
            *out++ = '0';
            *out++ = HEX[c >> 4];
            *out++ = HEX[c & 15];
        }
    }
    *out++ = '"';
    return out;
}

/* The texts of args' one argument as a new PySequence_Fast (NULL with the error set), and the
 * bytes `size` gives them all (each text's UTF-8 is cached by the str for the second pass). */
static PyObject *sized_texts(PyObject *args, const char *name, TextSize size, Py_ssize_t *total)
{
    PyObject *texts, *list;
    if (!PyArg_ParseTuple(args, "O", &texts))
        return NULL;
    list = PySequence_Fast(texts, "");
    if (!list) {
        PyErr_Format(PyExc_TypeError, "%s: texts must be a sequence of str", name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    PyObject **items = PySequence_Fast_ITEMS(list);
    *total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        const char *p;
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "%s: item %zd is not a str", name, i);
            Py_DECREF(list);
            return NULL;
        }
        p = PyUnicode_AsUTF8AndSize(items[i], &len);
        if (!p) {
            Py_DECREF(list);
            return NULL;
        }
        *total += size((const unsigned char *)p, len);
    }
    return list;
}

/* The (blob, offsets) of csv_table and json_table. */
static PyObject *text_blob(PyObject *args, const char *name, TextSize size, TextWrite write)
{
    PyObject *blob = NULL, *offsets = NULL, *result = NULL;
    Py_ssize_t total;
    PyObject *list = sized_texts(args, name, size, &total);
    if (!list)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    PyObject **items = PySequence_Fast_ITEMS(list);
    blob = PyBytes_FromStringAndSize(NULL, total);
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    if (blob && offsets) {
        char *start = PyBytes_AS_STRING(blob), *out = start;
        int64_t *off = (int64_t *)PyBytes_AS_STRING(offsets);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t len;
            const char *p = PyUnicode_AsUTF8AndSize(items[i], &len);
            off[i] = out - start;
            out = write(out, (const unsigned char *)p, len);
        }
        off[n] = out - start;
        result = PyTuple_Pack(2, blob, offsets);
    }
    Py_XDECREF(blob);
    Py_XDECREF(offsets);
    Py_DECREF(list);
    return result;
}

PyObject *csv_table(PyObject *self, PyObject *args)
{
    (void)self;
    return text_blob(args, "csv_table", csv_size, csv_write);
}

PyObject *json_table(PyObject *self, PyObject *args)
{
    (void)self;
    return text_blob(args, "json_table", json_size, json_write);
}

PyObject *utf8_table(PyObject *self, PyObject *args)
{
    (void)self;
    return text_blob(args, "utf8_table", plain_size, plain_write);
}

PyObject *json_list(PyObject *self, PyObject *args)
{
    PyObject *result = NULL;
    Py_ssize_t total;
    (void)self;
    PyObject *list = sized_texts(args, "json_list", json_size, &total);
    if (!list)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
    PyObject **items = PySequence_Fast_ITEMS(list);
    total += 2 + (n > 1 ? 2 * (n - 1) : 0);
    char *buf = PyMem_Malloc((size_t)total);
    if (!buf) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    char *out = buf;
    *out++ = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len;
        const char *p = PyUnicode_AsUTF8AndSize(items[i], &len);
        if (i) {
            *out++ = ',';
            *out++ = ' ';
        }
        out = json_write(out, (const unsigned char *)p, len);
    }
    *out++ = ']';
    result = PyUnicode_DecodeUTF8(buf, out - buf, "strict");
    PyMem_Free(buf);
    Py_DECREF(list);
    return result;
}
