#include "array_execute.hpp"

#include "host_workspace.hpp"
#include "plan_cache.hpp"
#include "status_exception.hpp"

namespace nb = nanobind;

namespace ragdot::python {

namespace {

struct Placement {
  MemorySpace space;
  int device;
};

template <class Array>
Placement placement_of(const Array& a, const char* name) {
  if (a.device_type() == nb::device::cpu::value) return {MemorySpace::kHost, 0};
  if (a.device_type() == nb::device::cuda::value) return {MemorySpace::kDevice, int(a.device_id())};
  throw nb::value_error((std::string(name) + " is on a device ragdot does not run on (only CPU and CUDA)").c_str());
}

template <class Array>
ConstBuffer buffer_of(const Array& a, MemorySpace space) {
  return {a.data(), a.nbytes(), space};
}

}  // namespace

void execute_arrays(const SpecArgs& spec_args, const ArrayCall& call, const std::string& backend,
                    std::uintptr_t stream) {
  const RaggedDotSpec spec = value_or_raise(make_spec(spec_args));
  const Placement where = placement_of(call.out, "out");
  const auto check_same = [&](const Placement& p, const char* name) {
    if (p.space != where.space || p.device != where.device)
      throw nb::value_error((std::string(name) + " is not on the same device as the output").c_str());
  };
  check_same(placement_of(call.lhs, "lhs"), "lhs");
  check_same(placement_of(call.rhs, "rhs"), "rhs");
  check_same(placement_of(call.group_sizes, "group_sizes"), "group_sizes");
  if (call.group_offset) check_same(placement_of(*call.group_offset, "group_offset"), "group_offset");
  if (spec.group_offset && !call.group_offset) throw nb::value_error("group_offset is missing");

  PlanTarget target{backend.empty() ? std::optional<MemorySpace>(where.space) : std::nullopt, backend, where.device};
  const Plan plan = value_or_raise(cached_plan(spec, target));
  // Device plans need workspace only when checked (RAGDOT_CHECKED=1); the array API does not
  // allocate device memory behind the caller's framework, so it refuses those.
  if (plan.workspace_bytes() && where.space == MemorySpace::kDevice)
    throw nb::type_error(("a checked GPU plan needs workspace, which the array API does not provide; use "
                          "ragdot.jax or unset RAGDOT_CHECKED: " + plan.to_string()).c_str());
  ExecuteArgs args;
  args.lhs = buffer_of(call.lhs, where.space);
  args.rhs = buffer_of(call.rhs, where.space);
  args.group_sizes = buffer_of(call.group_sizes, where.space);
  if (spec.group_offset) args.group_offset = buffer_of(*call.group_offset, where.space);
  args.out = {call.out.data(), call.out.nbytes(), where.space};
  args.stream = reinterpret_cast<void*>(stream);
  if (plan.workspace_bytes()) args.workspace = host_workspace(plan.workspace_bytes());
  Status status;
  {
    nb::gil_scoped_release release;
    status = plan.execute(args);
  }
  raise_if_error(status);
}

}  // namespace ragdot::python
