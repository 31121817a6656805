// Expert parallelism's NCCL side in a build without CUDA or without nccl.h: every call says so.
#include "ragdot/ep_transport.hpp"

namespace ragdot::ep {

namespace {
Status not_built() { return unavailable(RAGDOT_EP_MISSING); }
}  // namespace

Result<std::string> nccl_version() { return not_built(); }
Result<UniqueId> new_unique_id() { return not_built(); }

struct Communicator::State {};

Communicator::Communicator(std::unique_ptr<State> s) : s_(std::move(s)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

Result<Communicator> Communicator::create(const Bootstrap&) { return not_built(); }
int Communicator::rank() const { return 0; }
int Communicator::world_size() const { return 1; }
int Communicator::device() const { return -1; }
void* Communicator::native_handle() const { return nullptr; }
Status Communicator::exchange_counts(const void*, void*, std::int64_t, void*) const { return not_built(); }
Result<ExchangePlan> Communicator::plan(const void*, const void*, std::int64_t, void*, Layout) {
  return not_built();
}
Status Communicator::dispatch(const ExchangePlan&, const void*, void*, std::int64_t, void*) const { return not_built(); }
Status Communicator::combine(const ExchangePlan&, const void*, void*, std::int64_t, void*) const { return not_built(); }

}  // namespace ragdot::ep
