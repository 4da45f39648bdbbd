#pragma once
// Whether this binary holds sm_90a device code that runs on `device`. The kernels built on the
// TMA, wgmma and bulk copies (hopper_ptx.cuh) compile their bodies to a trap in a build for other
// architectures, so their hosts ask this before choosing them. Every .cu of the library is built
// for the same architectures, so one probe answers for all. Leaves no CUDA error behind and the
// current device as it was.

namespace rtgen::kernels {

bool HopperDeviceCodeRuns(int device);

}  // namespace rtgen::kernels
