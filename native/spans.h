/* msprof_kit._native's byte-span functions (native/spans.c), registered by native/_native.c. */
#ifndef MSPROF_KIT_SPANS_H
#define MSPROF_KIT_SPANS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *dict_keys(PyObject *self, PyObject *args);
PyObject *decode_spans(PyObject *self, PyObject *args);
PyObject *gather_spans(PyObject *self, PyObject *args);
PyObject *spans_equal(PyObject *self, PyObject *args);
PyObject *csv_table(PyObject *self, PyObject *args);
PyObject *json_table(PyObject *self, PyObject *args);
PyObject *utf8_table(PyObject *self, PyObject *args);
PyObject *json_list(PyObject *self, PyObject *args);

#endif
