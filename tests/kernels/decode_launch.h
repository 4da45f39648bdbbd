#pragma once
// A decode attention launch's parameters over a test cache (attention_reference.h) and the device
// buffers that hold it: attention_test.cc, gemv_merged_input_test.cc.

#include "kernels/decode_attention.h"
#include "tests/kernels/attention_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace rtgen::testing_gpu {

// The device side of a decode attention launch over cache c: query rows of q_stride elements,
// output rows, the split plan and its partial buffers.
struct DecodeBuffers {
  const DeviceArray<uint16_t>& q;
  int q_stride;
  const DeviceArray<uint16_t>& k;
  const DeviceArray<uint16_t>& v;
  const DeviceArray<int32_t>& tables;
  const DeviceArray<int32_t>& ctx;
  const DeviceArray<uint16_t>& out;
  const DeviceArray<float>& partial_out;
  const DeviceArray<float>& partial_ml;
};

// `seqs` sequences of `heads` query heads over c, planned as `plan`; the scale 1 / sqrt(hd), no
// merge counters (attention's combine launch merges the partitions).
kernels::DecodeAttentionParams DecodeParams(const Cache& c, int seqs, int heads,
                                            const kernels::DecodeSplitPlan& plan,
                                            const DecodeBuffers& b);

}  // namespace rtgen::testing_gpu
