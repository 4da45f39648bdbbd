#pragma once
// Whether this binary holds sm_90a device code that runs on `device`. The kernels built on the
// TMA, wgmma and bulk copies (hopper_ptx.cuh) compile their bodies to a trap in a build for other
// architectures, so their hosts ask this before choosing them. Every .cu of the library is built
// for the same architectures, so one probe answers for all. Leaves no CUDA error behind and the
// current device as it was.

namespace rtgen::kernels {

bool HopperDeviceCodeRuns(int device);

// Whether this binary holds device code `device` can load at all (the default build has sm_90a
// code alone: an A100 or L4 has none). Leaves no CUDA error behind and the current device as
// it was.
bool DeviceCodeLoads(int device);

}  // namespace rtgen::kernels
