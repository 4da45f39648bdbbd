#include "tests/kernels/decode_launch.h"

namespace rtgen::testing_gpu {

kernels::DecodeAttentionParams DecodeParams(const Cache& c, int seqs, int heads,
                                            const kernels::DecodeSplitPlan& plan,
                                            const DecodeBuffers& b) {
  kernels::DecodeAttentionParams p;
  p.q = b.q.bf16();
  p.q_stride = b.q_stride;
  p.k_cache = b.k.bf16();
  p.v_cache = b.v.bf16();
  p.block_tables = b.tables.get();
  p.context_lens = b.ctx.get();
  p.out = b.out.bf16();
  p.num_seqs = seqs;
  SetCacheShape(c, heads, &p);
  p.num_splits = plan.num_splits;
  p.partition_size = plan.partition_size;
  p.partial_out = b.partial_out.get();
  p.partial_ml = b.partial_ml.get();
  return p;
}

}  // namespace rtgen::testing_gpu
