#include "host_workspace.hpp"

#include <memory>
#include <new>

namespace ragdot::python {

MutableBuffer host_workspace(std::size_t bytes) {
  struct Aligned {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  thread_local std::unique_ptr<std::byte[], Aligned> buffer;
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(64))));
    capacity = bytes;
  }
  return {buffer.get(), capacity, MemorySpace::kHost};
}

}  // namespace ragdot::python
