// How a native hook declares what Python gives it and reads of it, so that
// the binding registers every hook with one template (no hand-written
// constructor per hook). A hook class H has
//   static constexpr const char* kName = "ProfilerHook";  // TF's class name
//   struct Config { ...; static auto fields(); };          // its keywords
//   explicit H(Config);
// and, where Python reads or sets its state, `static auto properties()` and
// `static auto methods()` (tuples of the descriptors below); a hook with a
// `timer()` also gets timer_state / set_timer_state. Each field, property and
// method argument is converted by its C++ type (the binding's
// hook_config_conversion.h), so a value that needs a conversion its type
// would not say has a small named type here (InfoEnabledCheck,
// RunRequestFill). Nothing here knows Python.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <tuple>

#include "core/run_plan.h"

namespace fastmts {

// One member of a hook's Config and the keyword that sets it. A required
// field's keyword must be given; an optional one may be omitted or None
// (the member keeps its default).
template <typename Config, typename T>
struct HookField {
  const char* name;
  T Config::*member;
  bool required;
};

template <typename Config, typename T>
constexpr HookField<Config, T> field(const char* name, T Config::*member) {
  return {name, member, true};
}

template <typename Config, typename T>
constexpr HookField<Config, T> optional_field(const char* name, T Config::*member) {
  return {name, member, false};
}

// A value of the hook Python reads (a const member function), and sets if
// `set` is given (a member function of one argument).
template <typename Getter, typename Setter = std::nullptr_t>
struct HookProperty {
  const char* name;
  Getter get;
  Setter set;
};

template <typename Getter>
constexpr HookProperty<Getter> property(const char* name, Getter get) {
  return {name, get, nullptr};
}

template <typename Getter, typename Setter>
constexpr HookProperty<Getter, Setter> property(const char* name, Getter get, Setter set) {
  return {name, get, set};
}

// A member function Python calls, with its parameters' names.
template <typename Method, std::size_t N>
struct HookMethod {
  const char* name;
  Method method;
  std::array<const char*, N> params;
};

template <typename Method, typename... Names>
constexpr HookMethod<Method, sizeof...(Names)> method(const char* name, Method m,
                                                      Names... params) {
  return {name, m, {params...}};
}

// The hook classes the binding registers (NativeHookClasses, at the end of
// core/native_hooks.h).
template <typename... Hooks>
struct HookList {};

// Whether TF's logger prints INFO records now (read from a Python logger).
struct InfoEnabledCheck {
  std::function<bool()> fn;
};

// Fills a step's request (its feeds) before the step (from a Python callable
// that returns the resolved feeds).
struct RunRequestFill {
  std::function<void(RunRequest&)> fn;
};

}  // namespace fastmts
