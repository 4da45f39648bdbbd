#pragma once
// The text of kernels/tuned_matmul/*.tsv, joined at configure time into a generated source
// (kernels/shipped_tune_table.cc.in): the tune cache's format (matmul_tune_cache.h), read by
// MatmulTuneCache::Shipped().

#include <string_view>

namespace rtgen::kernels {

std::string_view ShippedTuneTableText();

}  // namespace rtgen::kernels
