// ragdot._ragdot: the native half of the Python package. Python validates nothing itself that
// the library validates: every shape, dtype and dimension-number error comes from RaggedDot.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "array_execute.hpp"
#include "ffi_handlers.hpp"
#include "plan_cache.hpp"
#include "status_exception.hpp"

namespace nb = nanobind;
using namespace ragdot;
using namespace ragdot::python;

namespace {

template <class Fn>
nb::capsule ffi_capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

// (output shape, output dtype name, mode 1|2|3) of a signature, or the library's error.
std::tuple<std::vector<std::int64_t>, std::string, int> describe(const SpecArgs& args) {
  const RaggedDot op = value_or_raise(RaggedDot::create(value_or_raise(make_spec(args))));
  return {op.out().shape, std::string(dtype_name(op.out().dtype)), int(op.mode())};
}

std::string plan_string(const SpecArgs& args, const std::string& backend, bool device, int ordinal) {
  PlanTarget target{device ? MemorySpace::kDevice : MemorySpace::kHost, backend, ordinal};
  return value_or_raise(cached_plan(value_or_raise(make_spec(args)), target)).to_string();
}

// Bytes of device workspace the FFI call's CUDA handler needs (an operand's relayout copy, a
// checked plan's verdict): ragdot.jax adds a result buffer of this size to the custom call, so
// XLA allocates it with the call's other buffers (also inside command buffers). 0 where the
// cuda backend cannot plan the op here; the handler then reports why when it runs.
std::size_t ffi_device_workspace_bytes(const SpecArgs& args) {
  auto spec = make_spec(args);
  if (!spec.ok()) return 0;
  auto plan = cached_plan(*spec, PlanTarget{MemorySpace::kDevice, "cuda", 0});
  return plan.ok() ? plan->workspace_bytes() : 0;
}

nb::list backends() {
  nb::list out;
  for (const BackendInfo& b : list_backends()) {
    nb::dict d;
    d["name"] = b.name;
    d["available"] = b.available;
    d["detail"] = b.detail;
    d["memory_space"] = std::string(memory_space_name(b.memory_space));
    d["automatic"] = b.automatic;
    out.append(d);
  }
  return out;
}

}  // namespace

NB_MODULE(_ragdot, m) {
  m.doc() = "ragdot: jax.lax.ragged_dot_general as a Group-GEMM (native module)";
  m.attr("__version__") = version_string();

  nb::class_<SpecArgs>(m, "SpecArgs")
      .def(nb::init<>())
      .def_rw("lhs_shape", &SpecArgs::lhs_shape)
      .def_rw("rhs_shape", &SpecArgs::rhs_shape)
      .def_rw("gs_shape", &SpecArgs::gs_shape)
      .def_rw("lhs_dtype", &SpecArgs::lhs_dtype)
      .def_rw("rhs_dtype", &SpecArgs::rhs_dtype)
      .def_rw("gs_dtype", &SpecArgs::gs_dtype)
      .def_rw("dims", &SpecArgs::dims)
      .def_rw("preferred_element_type", &SpecArgs::preferred_element_type, nb::arg().none())
      .def_rw("local_groups", &SpecArgs::local_groups, nb::arg().none());

  m.def("describe", &describe, nb::arg("spec"));
  m.def("plan_string", &plan_string, nb::arg("spec"), nb::arg("backend") = "", nb::arg("device") = false,
        nb::arg("ordinal") = 0);
  m.def(
      "execute",
      [](const SpecArgs& spec, InArray lhs, InArray rhs, InArray group_sizes, std::optional<InArray> group_offset,
         OutArray out, const std::string& backend, std::uintptr_t stream, std::optional<OutArray> workspace,
         std::optional<InArray> lhs_rows) {
        execute_arrays(spec, ArrayCall{lhs, rhs, group_sizes, group_offset, out, workspace, lhs_rows}, backend,
                       stream);
      },
      nb::arg("spec"), nb::arg("lhs"), nb::arg("rhs"), nb::arg("group_sizes"), nb::arg("group_offset").none(),
      nb::arg("out"), nb::arg("backend") = "", nb::arg("stream") = 0, nb::arg("workspace").none() = nb::none(),
      nb::arg("lhs_rows").none() = nb::none());
  m.def("workspace_bytes", &workspace_bytes, nb::arg("spec"), nb::arg("out"), nb::arg("backend") = "",
        nb::arg("lhs_gather_rows").none() = nb::none());
  m.def("ffi_device_workspace_bytes", &ffi_device_workspace_bytes, nb::arg("spec"));
  m.def("backends", &backends);
  m.def("plan_cache_size", &plan_cache_size);
  m.def("clear_plan_cache", &clear_plan_cache);

  nb::dict targets;
  targets["cpu"] = ffi_capsule(ragdot_ragged_dot_cpu);
#if RAGDOT_PYTHON_HAVE_CUDA
  targets["CUDA"] = ffi_capsule(ragdot_ragged_dot_cuda);
#endif
  m.attr("ffi_handlers") = targets;
}
