// Binding glue: registers a native hook class as the core declares it
// (core/hook_config.h), so adding a hook needs no binding code.
// register_native_hook<H> makes _native.<H::kName> with
//   - a keyword-only __init__(**kwargs): each keyword one of H::Config::fields()
//     (an unknown one, or a required one missing, is a TypeError naming it, as
//     Python words it), converted by its type (hook_config_conversion.h);
//   - `config_fields`, a class attribute: (keyword, annotation, required), in order
//     (what .ci/native_stubs.py lists as __init__'s keywords);
//   - H::properties() and H::methods(), where H declares them;
//   - timer_state / set_timer_state when H has a timer(): the timer TF's hook
//     object keeps, as TF keeps it (last step or None, time), which
//     HookStateSync reads and sets.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "binding/hook_config_conversion.h"
#include "binding/python_conversion.h"
#include "core/hook_config.h"
#include "core/hooked_session.h"

namespace fastmts {

// One keyword of a hook's __init__: its name, how the stubs annotate it,
// whether it must be given.
struct ConfigKeyword {
  std::string name;
  std::string annotation;
  bool required;
};

// The keyword check of a hook's __init__: TypeError for a keyword not in
// `fields` or a required one missing.
void check_hook_keywords(const char* hook, const pybind11::kwargs& kwargs,
                         const std::vector<ConfigKeyword>& fields);

// `config_fields`: (name, annotation, required) tuples.
pybind11::tuple config_fields_to_python(const std::vector<ConfigKeyword>& fields);

// `error` (a TypeError or a failed cast) raised again as a TypeError that
// names the hook and the keyword.
[[noreturn]] void raise_keyword_error(const char* hook, const char* keyword,
                                      const std::exception& error);

template <typename T>
struct ByNone : std::false_type {};  // whether T's own annotation says None
template <typename T>
struct ByNone<std::optional<T>> : std::true_type {};

template <typename Config, typename T>
ConfigKeyword config_keyword(const HookField<Config, T>& f) {
  std::string annotation = python_annotation<T>();
  if (!f.required && !ByNone<T>::value) annotation += " | None";  // an optional field may be None
  return {f.name, annotation, f.required};
}

template <typename Config>
std::vector<ConfigKeyword> config_fields() {
  return std::apply(
      [](const auto&... f) { return std::vector<ConfigKeyword>{config_keyword(f)...}; },
      Config::fields());
}

template <typename Config, typename T>
void set_config_field(const char* hook, Config& config, const HookField<Config, T>& f,
                      const pybind11::kwargs& kwargs) {
  if (!kwargs.contains(f.name)) return;  // an optional field (check_hook_keywords)
  pybind11::handle value = kwargs[f.name];
  if (!f.required && value.is_none()) return;
  try {
    config.*f.member = from_python<T>(value);
  } catch (const pybind11::type_error& e) {
    raise_keyword_error(hook, f.name, e);
  } catch (const pybind11::cast_error& e) {
    raise_keyword_error(hook, f.name, e);
  }
}

template <typename Config>
Config config_from_kwargs(const char* hook, const std::vector<ConfigKeyword>& keywords,
                          const pybind11::kwargs& kwargs) {
  check_hook_keywords(hook, kwargs, keywords);
  Config config{};
  std::apply([&](const auto&... f) { (set_config_field(hook, config, f, kwargs), ...); },
             Config::fields());
  return config;
}

template <typename H, typename = void>
struct HasProperties : std::false_type {};
template <typename H>
struct HasProperties<H, std::void_t<decltype(H::properties())>> : std::true_type {};
template <typename H, typename = void>
struct HasMethods : std::false_type {};
template <typename H>
struct HasMethods<H, std::void_t<decltype(H::methods())>> : std::true_type {};
template <typename H, typename = void>
struct HasTimer : std::false_type {};
template <typename H>
struct HasTimer<H, std::void_t<decltype(std::declval<H&>().timer())>> : std::true_type {};

template <typename H>
using HookClass = pybind11::class_<H, Hook, std::shared_ptr<H>>;

template <typename H, typename C, typename T>
auto setter_of(void (C::*set)(T)) {
  return [set](H& hook, pybind11::handle value) {
    (hook.*set)(from_python<std::decay_t<T>>(value));
  };
}

template <typename H, typename Getter, typename Setter>
void add_property(HookClass<H>& cls, const HookProperty<Getter, Setter>& p) {
  auto get = [g = p.get](H& hook) { return (hook.*g)(); };
  if constexpr (std::is_same_v<Setter, std::nullptr_t>) {
    cls.def_property_readonly(p.name, get);
  } else {
    cls.def_property(p.name, get, setter_of<H>(p.set));
  }
}

// A method's parameter as pybind11 takes it: the C++ type where pybind11
// converts it as from_python does (so its signature names the type), else
// the Python object, converted here.
template <typename T>
using MethodParam = std::conditional_t<ByPybind11<std::decay_t<T>>::value, std::decay_t<T>,
                                       pybind11::object>;

template <typename T>
std::decay_t<T> method_arg(MethodParam<T>&& value) {
  if constexpr (ByPybind11<std::decay_t<T>>::value) {
    return std::move(value);
  } else {
    return from_python<std::decay_t<T>>(value);
  }
}

template <typename H, typename C, typename... Args, std::size_t N, std::size_t... I>
void add_method(HookClass<H>& cls, const char* name, void (C::*fn)(Args...),
                const std::array<const char*, N>& params, std::index_sequence<I...>) {
  static_assert(sizeof...(Args) == N, "one name per parameter");
  cls.def(
      name,
      [fn](H& hook, MethodParam<Args>... values) {
        (hook.*fn)(method_arg<Args>(std::move(values))...);
      },
      pybind11::arg(params[I])...);
}

template <typename H, typename Method, std::size_t N>
void add_method(HookClass<H>& cls, const HookMethod<Method, N>& m) {
  add_method(cls, m.name, m.method, m.params, std::make_index_sequence<N>{});
}

template <typename H>
void add_timer_state(HookClass<H>& cls) {
  cls.def_property_readonly("timer_state",
                            [](H& hook) {
                              return std::make_tuple(optional_step(hook.timer().last_step()),
                                                     hook.timer().last_time());
                            })
      .def(
          "set_timer_state",
          [](H& hook, std::optional<int64_t> last_step, double last_time) {
            hook.timer().set_state(last_step, last_time);
          },
          pybind11::arg("last_step"), pybind11::arg("last_time"));
}

template <typename H>
void register_native_hook(pybind11::module_& m) {
  using Config = typename H::Config;
  const std::vector<ConfigKeyword> keywords = config_fields<Config>();
  HookClass<H> cls(m, H::kName);
  cls.def(pybind11::init([keywords](const pybind11::kwargs& kwargs) {
    return std::make_shared<H>(config_from_kwargs<Config>(H::kName, keywords, kwargs));
  }));
  cls.attr("config_fields") = config_fields_to_python(keywords);
  if constexpr (HasProperties<H>::value)
    std::apply([&](const auto&... p) { (add_property(cls, p), ...); }, H::properties());
  if constexpr (HasMethods<H>::value)
    std::apply([&](const auto&... f) { (add_method(cls, f), ...); }, H::methods());
  if constexpr (HasTimer<H>::value) add_timer_state(cls);
}

template <typename... Hooks>
void register_native_hooks(pybind11::module_& m, HookList<Hooks...>) {
  (register_native_hook<Hooks>(m), ...);
}

}  // namespace fastmts
