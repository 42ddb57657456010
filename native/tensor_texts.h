/* msprof_kit._native.tensor_texts (native/tensor_texts.c), registered by native/_native.c. */
#ifndef MSPROF_KIT_TENSOR_TEXTS_H
#define MSPROF_KIT_TENSOR_TEXTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *tensor_texts(PyObject *self, PyObject *args);

#endif
