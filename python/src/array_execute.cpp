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

PlanTarget target_for(const std::string& backend, const Placement& where,
                      std::optional<std::int64_t> lhs_gather_rows = std::nullopt) {
  return PlanTarget{backend.empty() ? std::optional<MemorySpace>(where.space) : std::nullopt, backend, where.device,
                    lhs_gather_rows};
}

}  // namespace

std::size_t workspace_bytes(const SpecArgs& spec_args, const OutArray& out, const std::string& backend,
                            std::optional<std::int64_t> lhs_gather_rows) {
  const RaggedDotSpec spec = value_or_raise(make_spec(spec_args));
  const Placement where = placement_of(out, "out");
  if (where.space != MemorySpace::kDevice) return 0;
  return value_or_raise(cached_plan(spec, target_for(backend, where, lhs_gather_rows))).workspace_bytes();
}

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
  std::optional<std::int64_t> table_rows;
  if (call.lhs_rows) {
    check_same(placement_of(*call.lhs_rows, "lhs_rows"), "lhs_rows");
    const InArray& rows = *call.lhs_rows;
    if (rows.dtype() != nb::dtype<std::int32_t>() || rows.ndim() != 1)
      throw nb::type_error("lhs_rows must be a 1-D int32 array");
    if (spec.lhs.rank() != 2 || std::int64_t(rows.shape(0)) != spec.lhs.shape[0])
      throw nb::value_error("lhs_rows needs one index per row of a 2-D lhs");
    if (call.lhs.ndim() != 2 || std::int64_t(call.lhs.shape(1)) != spec.lhs.shape[1])
      throw nb::value_error("with lhs_rows, lhs is a table of rows [r, c] as long as the op's lhs rows");
    table_rows = std::int64_t(call.lhs.shape(0));
  }

  const Plan plan = value_or_raise(cached_plan(spec, target_for(backend, where, table_rows)));
  // Device workspace comes from the caller's framework (the module never allocates device memory
  // behind it): ragdot's Python layer asks workspace_bytes first.
  const std::size_t ws_bytes = plan.workspace_bytes();
  if (ws_bytes && where.space == MemorySpace::kDevice) {
    if (!call.workspace || call.workspace->nbytes() < ws_bytes)
      throw nb::value_error(("this GPU plan needs " + std::to_string(ws_bytes) +
                             " bytes of device workspace (see workspace_bytes): " + plan.to_string()).c_str());
    check_same(placement_of(*call.workspace, "workspace"), "workspace");
  }
  ExecuteArgs args;
  args.lhs = buffer_of(call.lhs, where.space);
  args.rhs = buffer_of(call.rhs, where.space);
  args.group_sizes = buffer_of(call.group_sizes, where.space);
  if (spec.group_offset) args.group_offset = buffer_of(*call.group_offset, where.space);
  if (call.lhs_rows) args.lhs_rows = buffer_of(*call.lhs_rows, where.space);
  args.out = {call.out.data(), call.out.nbytes(), where.space};
  args.stream = reinterpret_cast<void*>(stream);
  if (ws_bytes && where.space == MemorySpace::kDevice)
    args.workspace = {call.workspace->data(), call.workspace->nbytes(), MemorySpace::kDevice};
  else if (ws_bytes)
    args.workspace = host_workspace(ws_bytes);
  Status status;
  {
    nb::gil_scoped_release release;
    status = plan.execute(args);
  }
  raise_if_error(status);
}

}  // namespace ragdot::python
