#include "status_exception.hpp"

#include <nanobind/nanobind.h>

namespace nb = nanobind;

namespace ragdot::python {

void raise_status(const Status& s) {
  const std::string message = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument: throw nb::value_error(message.c_str());
    case StatusCode::kUnsupported: throw nb::type_error(message.c_str());
    default: throw std::runtime_error(s.to_string());
  }
}

}  // namespace ragdot::python
