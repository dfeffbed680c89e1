// The part of TensorFlow's C API that fastmts uses, declared here rather than
// taken from TF's headers, and bound at run time to the TF the process has
// already loaded (bind_tf_c_api). So the extension builds without TensorFlow,
// and one build runs on every supported release (1.15 to 2.21): it carries no
// link-time dependency on any one of them, only on the C ABI of these
// functions, which TF keeps stable. The functions for TF_STRING elements
// changed with the releases; those are optional (tf_strings.h picks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" {

// Opaque handles: fastmts never looks inside them.
struct TF_Session;
struct TF_Operation;
struct TF_Tensor;
struct TF_Status;

// TF's DataType numbering (types.proto); only the values fastmts names.
enum TF_DataType {
  TF_FLOAT = 1,
  TF_DOUBLE = 2,
  TF_INT32 = 3,
  TF_STRING = 7,
  TF_INT64 = 9,
  TF_BFLOAT16 = 14,
  TF_HALF = 19,
  TF_UINT32 = 22,
  TF_UINT64 = 23,
};

// TF's error codes (error_codes.proto); only the values fastmts names.
enum TF_Code {
  TF_OK = 0,
  TF_INTERNAL = 13,
};

struct TF_Output {
  TF_Operation* oper;
  int index;
};

struct TF_Buffer {
  const void* data;
  size_t length;
  void (*data_deallocator)(void* data, size_t length);
};

// One element of a TF_STRING tensor from TF 2.4 on: TF's 24-byte tstring
// (tf_strings.cc handles it).
struct TF_TString {
  uint64_t opaque[3];
};

}  // extern "C"

// X(return type, name without the TF_ prefix, parameter list)
#define FASTMTS_TF_C_API_FUNCTIONS(X)                                                     \
  X(TF_Status*, NewStatus, (void))                                                        \
  X(void, DeleteStatus, (TF_Status*))                                                     \
  X(TF_Code, GetCode, (const TF_Status*))                                                 \
  X(const char*, Message, (const TF_Status*))                                             \
  X(TF_Tensor*, AllocateTensor, (TF_DataType, const int64_t*, int, size_t))               \
  X(void, DeleteTensor, (TF_Tensor*))                                                     \
  X(TF_Tensor*, NewTensor,                                                                 \
    (TF_DataType, const int64_t*, int, void*, size_t, void (*)(void*, size_t, void*), void*)) \
  X(TF_DataType, TensorType, (const TF_Tensor*))                                          \
  X(int, NumDims, (const TF_Tensor*))                                                     \
  X(int64_t, Dim, (const TF_Tensor*, int))                                                \
  X(size_t, TensorByteSize, (const TF_Tensor*))                                           \
  X(void*, TensorData, (const TF_Tensor*))                                                \
  X(int64_t, TensorElementCount, (const TF_Tensor*))                                      \
  X(TF_Tensor*, TensorMaybeMove, (TF_Tensor*))                                            \
  X(size_t, DataTypeSize, (TF_DataType))                                                  \
  X(TF_Buffer*, NewBuffer, (void))                                                        \
  X(void, DeleteBuffer, (TF_Buffer*))                                                     \
  X(void, SessionRun,                                                                     \
    (TF_Session*, const TF_Buffer*, const TF_Output*, TF_Tensor* const*, int,             \
     const TF_Output*, TF_Tensor**, int, const TF_Operation* const*, int, TF_Buffer*,     \
     TF_Status*))                                                                         \
  X(const char*, OperationName, (TF_Operation*))

// Optional: a release that lacks them leaves them null.
// The tstring functions, exported from TF 2.5 on (2.4 has the layout only).
#define FASTMTS_TF_TSTRING_FUNCTIONS(X)                                                    \
  X(void, StringInit, (TF_TString*))                                                      \
  X(void, StringCopy, (TF_TString*, const char*, size_t))                                 \
  X(const char*, StringGetDataPointer, (const TF_TString*))                               \
  X(size_t, StringGetSize, (const TF_TString*))
// TF 1.15 to 2.3's encoded TF_STRING tensors (an offset table, then each
// element as a varint length and its bytes), removed in 2.4.
#define FASTMTS_TF_ENCODED_STRING_FUNCTIONS(X)                                             \
  X(size_t, StringEncode, (const char*, size_t, char*, size_t, TF_Status*))               \
  X(size_t, StringDecode, (const char*, size_t, const char**, size_t*, TF_Status*))       \
  X(size_t, StringEncodedSize, (size_t))

namespace fastmts {
namespace tf {

// tf::SessionRun(...) calls TF_SessionRun of the bound TensorFlow, and so on.
#define FASTMTS_DECLARE_TF_FUNCTION(ret, name, params) extern ret(*name) params;
FASTMTS_TF_C_API_FUNCTIONS(FASTMTS_DECLARE_TF_FUNCTION)
FASTMTS_TF_TSTRING_FUNCTIONS(FASTMTS_DECLARE_TF_FUNCTION)
FASTMTS_TF_ENCODED_STRING_FUNCTIONS(FASTMTS_DECLARE_TF_FUNCTION)
#undef FASTMTS_DECLARE_TF_FUNCTION

}  // namespace tf

// Binds every function above to the definitions that `library` (a shared
// object the process has already loaded, or one of its dependencies) resolves
// them to, the optional ones where it has them. Loads nothing new. Returns an
// empty string on success, otherwise which required one is missing; on
// failure nothing is bound. Call once, before any use.
std::string bind_tf_c_api(const std::string& library);

}  // namespace fastmts
