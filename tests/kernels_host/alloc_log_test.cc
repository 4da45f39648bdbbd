// The allocation log's line (kernels/alloc_log.h), without a GPU.

#include "kernels/alloc_log.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace rtgen::kernels {
namespace {

const void* At(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(AllocLogTest, NamesKindBytesAddressAndLargePage) {
  // 0x7f0000200000 + 0x101100: 2 MiB page 0x3f80001 (66584577), 1052928 bytes into it (past
  // the first MiB, so a 1 MiB page would not give it).
  EXPECT_EQ(FormatAllocation("device", 4096, At(0x7f0000301100)),
            "alloc device 4096 B at 0x7f0000301100 (2 MiB page 66584577, offset 1052928)");
}

TEST(AllocLogTest, AnAddressOnAPageBoundaryHasOffsetZero) {
  EXPECT_EQ(FormatAllocation("pinned", 1, At(uintptr_t{3} << 21)),
            "alloc pinned 1 B at 0x600000 (2 MiB page 3, offset 0)");
}

}  // namespace
}  // namespace rtgen::kernels
