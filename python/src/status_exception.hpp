// A ragdot Status raised as the Python exception that fits it, with the library's message:
// bad input is a ValueError, an unsupported dtype or layout a TypeError, a missing backend or
// device a RuntimeError.
#pragma once

#include "ragdot/status.hpp"

namespace ragdot::python {

[[noreturn]] void raise_status(const Status& status);

template <class T>
T value_or_raise(Result<T> r) {
  if (!r.ok()) raise_status(r.status());
  return std::move(r).value();
}

inline void raise_if_error(const Status& s) {
  if (!s.is_ok()) raise_status(s);
}

}  // namespace ragdot::python
