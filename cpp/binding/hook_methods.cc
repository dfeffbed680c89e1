#include "binding/hook_methods.h"

#include <algorithm>

namespace py = pybind11;

namespace fastmts {

void check_hook_keywords(const char* hook, const py::kwargs& kwargs,
                         const std::vector<std::pair<std::string, bool>>& fields) {
  for (const auto& item : kwargs) {
    const std::string keyword = py::str(item.first);
    if (std::none_of(fields.begin(), fields.end(),
                     [&](const auto& f) { return f.first == keyword; }))
      throw py::type_error(std::string(hook) + "() got an unexpected keyword argument '" +
                           keyword + "'");
  }
  std::vector<std::string> missing;
  for (const auto& [name, required] : fields)
    if (required && !kwargs.contains(name)) missing.push_back("'" + name + "'");
  if (missing.empty()) return;
  std::string names;
  for (size_t i = 0; i < missing.size(); ++i)
    names += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
  throw py::type_error(std::string(hook) + "() missing " + std::to_string(missing.size()) +
                       " required keyword-only argument" + (missing.size() > 1 ? "s" : "") +
                       ": " + names);
}

void raise_keyword_error(const char* hook, const char* keyword, const std::exception& error) {
  throw py::type_error(std::string(hook) + "() argument '" + keyword + "': " + error.what());
}

}  // namespace fastmts
