// The device MoE layer in a build without the GPU backends: every entry point says so.
#include "ragdot/moe_device.hpp"

namespace ragdot::moe {

namespace {
Status no_cuda() { return unavailable("ragdot was built without CUDA: the device MoE layer is not available"); }
}  // namespace

struct DeviceMoeLayer::State {
  MoeConfig c;
};

DeviceMoeLayer::DeviceMoeLayer(std::unique_ptr<State> s) : s_(std::move(s)) {}
DeviceMoeLayer::DeviceMoeLayer(DeviceMoeLayer&&) noexcept = default;
DeviceMoeLayer& DeviceMoeLayer::operator=(DeviceMoeLayer&&) noexcept = default;
DeviceMoeLayer::~DeviceMoeLayer() = default;

Result<DeviceMoeLayer> DeviceMoeLayer::create(const MoeConfig&, std::int64_t, const DeviceMoeOptions&) {
  return no_cuda();
}
Status DeviceMoeLayer::forward(const void*, const DeviceMoeParams&, void*, void*) { return no_cuda(); }
Status DeviceMoeLayer::backward(const void*, const DeviceMoeParams&, const void*, const DeviceMoeGrads&, void*) {
  return no_cuda();
}
Result<DeviceMoeProfile> DeviceMoeLayer::profile(const void*, const DeviceMoeParams&, void*, const void*,
                                                 const DeviceMoeGrads&, void*, const DeviceMoeProfileOptions&) {
  return no_cuda();
}
DeviceMoeRouting DeviceMoeLayer::routing() const { return {}; }
Result<DeviceMoeRoutingStats> DeviceMoeLayer::routing_stats(void*) const { return no_cuda(); }
const MoeConfig& DeviceMoeLayer::config() const { return s_->c; }
std::int64_t DeviceMoeLayer::tokens() const { return 0; }
std::size_t DeviceMoeLayer::device_bytes() const { return 0; }
bool DeviceMoeLayer::graph_safe() const { return false; }
std::string DeviceMoeLayer::describe() const { return {}; }

Status fill_device_uniform(int, void*, DType, std::int64_t, std::uint32_t, float, void*) { return no_cuda(); }

}  // namespace ragdot::moe
