// Python C API calls fastmts uses that are newer than the oldest Python it
// builds for (3.7): where the Python built against lacks one, a stand-in with
// the same meaning. Include it before using any of them.
#pragma once

#include <Python.h>

#if PY_VERSION_HEX < 0x03090000  // Python 3.7 and 3.8
inline PyObject* PyObject_CallNoArgs(PyObject* callable) {
  return PyObject_CallFunctionObjArgs(callable, nullptr);
}
inline PyObject* PyObject_CallOneArg(PyObject* callable, PyObject* arg) {
  return PyObject_CallFunctionObjArgs(callable, arg, nullptr);
}
#endif

#if PY_VERSION_HEX < 0x03080000  // Python 3.7: the same call, by its older name
#define PyObject_Vectorcall(callable, args, nargsf, kwnames) \
  _PyObject_FastCallKeywords(callable, args, static_cast<Py_ssize_t>(nargsf), kwnames)
#elif PY_VERSION_HEX < 0x03090000  // Python 3.8: still underscored
#define PyObject_Vectorcall _PyObject_Vectorcall
#endif

#if PY_VERSION_HEX < 0x030D0000  // before 3.13: the same check, underscored
#define Py_IsFinalizing _Py_IsFinalizing
#endif

#if PY_VERSION_HEX < 0x030D0000  // before 3.13: a strong reference from the borrowed one
inline int PyWeakref_GetRef(PyObject* ref, PyObject** pobj) {
  PyObject* obj = PyWeakref_GetObject(ref);  // borrowed; deprecated from 3.13
  *pobj = nullptr;
  if (obj == nullptr) return -1;
  if (obj == Py_None) return 0;
  Py_INCREF(obj);
  *pobj = obj;
  return 1;
}
#endif
