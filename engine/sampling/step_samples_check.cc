#include "engine/sampling/step_samples_check.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rtgen {

absl::Status CheckStepSamples(const StepInput& in, bool params_required) {
  const int32_t s = in.num_seqs();
  std::vector<int32_t> sampled_by(static_cast<size_t>(s), -1);  // the first sample naming it
  for (size_t i = 0; i < in.samples.size(); ++i) {
    const SampleRequest& r = in.samples[i];
    if (r.seq_index < 0 || r.seq_index >= s || (params_required && r.params == nullptr)) {
      return absl::InvalidArgumentError(
          absl::StrCat("samples[", i, "] has a bad seq_index or no params"));
    }
    if (in.query_start[r.seq_index + 1] == in.query_start[r.seq_index]) {
      return absl::InvalidArgumentError(
          absl::StrCat("samples[", i, "] names sequence ", r.seq_index, " with no tokens"));
    }
    int32_t& first = sampled_by[static_cast<size_t>(r.seq_index)];
    if (first >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("samples[", i, "] names sequence ",
                                                     r.seq_index, ", as samples[", first,
                                                     "] does: one sample a sequence"));
    }
    first = static_cast<int32_t>(i);
  }
  return absl::OkStatus();
}

}  // namespace rtgen
