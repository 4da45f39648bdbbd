#pragma once
// Whether a kernel's pointer argument suits 16-byte vector accesses (host-side launch checks).

#include <cstdint>

namespace rtgen::kernels {

inline bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace rtgen::kernels
