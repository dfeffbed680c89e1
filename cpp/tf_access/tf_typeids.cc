// Kept apart from every file that includes c_api.h: typeid() needs complete
// types, and TF registered them as complete types whose mangled names are
// "10TF_Session" and "12TF_Operation". These empty definitions give the same
// names; their layout is never used.
#include "tf_access/tf_typeids.h"

struct TF_Session {};
struct TF_Operation {};

namespace fastmts {
const std::type_info& tf_session_typeid() { return typeid(TF_Session); }
const std::type_info& tf_operation_typeid() { return typeid(TF_Operation); }
}  // namespace fastmts
