#pragma once
// The persistent decode kernel's diagnostic trace (RTGEN_PERSISTENT_TRACE=1,
// PersistentDecodeParams::trace): where the last step's time went, per phase of a layer.

#include <cstdint>

namespace rtgen {

// Reads the stamps of the last launch (device memory, [2][layers][points][grid]) and prints,
// per interval between trace points, each block's own time (median and slowest, SM clock at
// the device's nominal rate) and the earliest start to the last end over blocks (global timer).
void PrintPersistentTrace(const uint64_t* device_trace, int layers, int grid);

}  // namespace rtgen
