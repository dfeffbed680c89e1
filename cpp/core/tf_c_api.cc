#include "core/tf_c_api.h"

#include <dlfcn.h>

#include <vector>

namespace fastmts {
namespace tf {

#define FASTMTS_DEFINE_TF_FUNCTION(ret, name, params) ret(*name) params = nullptr;
FASTMTS_TF_C_API_FUNCTIONS(FASTMTS_DEFINE_TF_FUNCTION)
FASTMTS_TF_TSTRING_FUNCTIONS(FASTMTS_DEFINE_TF_FUNCTION)
FASTMTS_TF_ENCODED_STRING_FUNCTIONS(FASTMTS_DEFINE_TF_FUNCTION)
#undef FASTMTS_DEFINE_TF_FUNCTION

}  // namespace tf

std::string bind_tf_c_api(const std::string& library) {
  // RTLD_NOLOAD: only a library TensorFlow itself loaded, never a second copy
  // of its runtime. The handle is kept for the life of the process (TF's
  // libraries are never unloaded either).
  void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) {
    const char* why = dlerror();
    return library + " is not loaded" + (why ? std::string(": ") + why : std::string());
  }
  // dlsym on the handle searches the library and then its dependencies, so
  // this finds each function wherever the release keeps it
  // (_pywrap_tensorflow_internal.so up to 2.11, libtensorflow_cc.so.2 from
  // 2.12, libtensorflow_framework.so.2 from 2.19 for the tensor and status
  // functions): the definitions TF's session binding uses.
  std::vector<std::pair<void**, void*>> found;
  std::string missing;
#define FASTMTS_LOOK_UP_TF_FUNCTION(ret, name, params)                           \
  if (void* symbol = dlsym(handle, "TF_" #name))                                   \
    found.emplace_back(reinterpret_cast<void**>(&tf::name), symbol);              \
  else                                                                           \
    missing += (missing.empty() ? "" : ", ") + std::string("TF_" #name);
  FASTMTS_TF_C_API_FUNCTIONS(FASTMTS_LOOK_UP_TF_FUNCTION)
#undef FASTMTS_LOOK_UP_TF_FUNCTION
  if (!missing.empty()) return library + " does not provide " + missing;
#define FASTMTS_LOOK_UP_OPTIONAL_TF_FUNCTION(ret, name, params)                  \
  if (void* symbol = dlsym(handle, "TF_" #name))                                   \
    found.emplace_back(reinterpret_cast<void**>(&tf::name), symbol);
  FASTMTS_TF_TSTRING_FUNCTIONS(FASTMTS_LOOK_UP_OPTIONAL_TF_FUNCTION)
  FASTMTS_TF_ENCODED_STRING_FUNCTIONS(FASTMTS_LOOK_UP_OPTIONAL_TF_FUNCTION)
#undef FASTMTS_LOOK_UP_OPTIONAL_TF_FUNCTION
  for (auto& [slot, symbol] : found) *slot = symbol;
  return {};
}

}  // namespace fastmts
