#include "engine/model/gguf_types.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rtgen {

GgmlTypeTraits GetGgmlTypeTraits(uint32_t type) {
  // ggml's type ids; sizes are what ggml stores per block. Only the dequantisable ones are
  // read, the rest are here so that files holding them can still be opened and bounds-checked.
  switch (type) {
    case 0: return {"F32", 1, 4};
    case 1: return {"F16", 1, 2};
    case 2: return {"Q4_0", 32, 18};
    case 3: return {"Q4_1", 32, 20};
    case 6: return {"Q5_0", 32, 22};
    case 7: return {"Q5_1", 32, 24};
    case 8: return {"Q8_0", 32, 34};
    case 9: return {"Q8_1", 32, 36};
    case 10: return {"Q2_K", 256, 84};
    case 11: return {"Q3_K", 256, 110};
    case 12: return {"Q4_K", 256, 144};
    case 13: return {"Q5_K", 256, 176};
    case 14: return {"Q6_K", 256, 210};
    case 15: return {"Q8_K", 256, 292};
    case 16: return {"IQ2_XXS", 256, 66};
    case 17: return {"IQ2_XS", 256, 74};
    case 18: return {"IQ3_XXS", 256, 98};
    case 19: return {"IQ1_S", 256, 50};
    case 20: return {"IQ4_NL", 32, 18};
    case 21: return {"IQ3_S", 256, 110};
    case 22: return {"IQ2_S", 256, 82};
    case 23: return {"IQ4_XS", 256, 136};
    case 24: return {"I8", 1, 1};
    case 25: return {"I16", 1, 2};
    case 26: return {"I32", 1, 4};
    case 27: return {"I64", 1, 8};
    case 28: return {"F64", 1, 8};
    case 29: return {"IQ1_M", 256, 56};
    case 30: return {"BF16", 1, 2};
    default: return {};
  }
}

std::string GgmlTypeName(uint32_t type) {
  const GgmlTypeTraits t = GetGgmlTypeTraits(type);
  return t.name != nullptr ? t.name : "unknown";
}

bool IsDequantizable(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return true;
  }
  return false;
}

absl::StatusOr<uint64_t> GgmlTensorBytes(const GgufTensorInfo& info) {
  const GgmlTypeTraits t = GetGgmlTypeTraits(info.type);
  if (t.name == nullptr) {
    return absl::UnimplementedError(absl::StrCat("gguf: unsupported tensor type ", info.type,
                                                 " (unknown) for '", info.name, "'"));
  }
  if (info.dims.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", info.name, "' has no dims"));
  }
  if (info.dims[0] % t.block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: tensor '", info.name, "' row length ", info.dims[0],
                     " is not a multiple of the ", t.name, " block size ", t.block_size));
  }
  // Count elements with an overflow check; the byte count must fit in int64 too.
  constexpr uint64_t kLimit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t n = 1;
  for (int64_t d : info.dims) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: tensor '", info.name, "' has a non-positive dim ", d));
    }
    const uint64_t ud = static_cast<uint64_t>(d);
    if (n > kLimit / ud) {
      return absl::InvalidArgumentError(
          absl::StrCat("gguf: element count of tensor '", info.name, "' overflows"));
    }
    n *= ud;
  }
  const uint64_t blocks = n / static_cast<uint64_t>(t.block_size);
  const uint64_t bb = static_cast<uint64_t>(t.block_bytes);
  if (blocks > kLimit / bb) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: byte size of tensor '", info.name, "' overflows"));
  }
  return blocks * bb;
}

}  // namespace rtgen
