"""The C handles of TF's Python graph objects, as the native core takes
them: an operation's `TF_Operation*` (the object TF's Python keeps it in)
and a tensor's `TF_Output` (that operation and the output's index).

The one place that reads them: TF's Python keeps an operation's C handle in
its private `_c_op`, on every supported release.
"""


def c_op_of(op):
  """The object holding `op`'s `TF_Operation*` (SWIG or pybind11, by release:
  cpp/tf_access/tf_python_handles.h reads it)."""
  return op._c_op  # pylint: disable=protected-access  # TF keeps the C handle there


def output_of(tensor):
  """`tensor` as the native core's `(c_op, index)`."""
  return c_op_of(tensor.op), tensor.value_index
