#include "binding/hook_methods.h"

#include <algorithm>

namespace py = pybind11;

namespace fastmts {

void check_hook_keywords(const char* hook, const py::kwargs& kwargs,
                         const std::vector<ConfigKeyword>& fields) {
  for (const auto& item : kwargs) {
    const std::string keyword = py::str(item.first);
    if (std::none_of(fields.begin(), fields.end(),
                     [&](const ConfigKeyword& f) { return f.name == keyword; }))
      throw py::type_error(std::string(hook) + "() got an unexpected keyword argument '" +
                           keyword + "'");
  }
  std::vector<std::string> missing;
  for (const ConfigKeyword& f : fields)
    if (f.required && !kwargs.contains(f.name)) missing.push_back("'" + f.name + "'");
  if (missing.empty()) return;
  std::string names;
  for (size_t i = 0; i < missing.size(); ++i)
    names += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
  throw py::type_error(std::string(hook) + "() missing " + std::to_string(missing.size()) +
                       " required keyword-only argument" + (missing.size() > 1 ? "s" : "") +
                       ": " + names);
}

py::tuple config_fields_to_python(const std::vector<ConfigKeyword>& fields) {
  py::tuple out(fields.size());
  for (size_t i = 0; i < fields.size(); ++i)
    out[i] = py::make_tuple(fields[i].name, fields[i].annotation, fields[i].required);
  return out;
}

void raise_keyword_error(const char* hook, const char* keyword, const std::exception& error) {
  throw py::type_error(std::string(hook) + "() argument '" + keyword + "': " + error.what());
}

}  // namespace fastmts
