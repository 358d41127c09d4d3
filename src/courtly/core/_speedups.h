/* courtly.core._speedups: what its two C files share (_speedups.c: the
 * module, SimHash and collapse; _speedups_html.c: the HTML helpers). */

#ifndef COURTLY_SPEEDUPS_H
#define COURTLY_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *speedups_attr_values(PyObject *self, PyObject *args);
PyObject *speedups_count_over(PyObject *self, PyObject *args);
PyObject *speedups_link_anchors(PyObject *self, PyObject *args);
int speedups_html_init(void); /* at import: 0, or -1 with an exception set */

#endif
