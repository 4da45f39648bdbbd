#include "engine/sequence.h"

#include <algorithm>
#include <utility>

namespace rtgen {

Sequence::Sequence(Request request, StreamSink sink_fn, const Tokenizer* tokenizer,
                   uint64_t seed, int64_t order)
    // request_ is declared (made) after the detokenizer: it reads `request`.
    : detokenizer(tokenizer, request.prompt_tokens, request.skip_special_tokens),
      sink(std::move(sink_fn)),
      request_(std::move(request)),
      seed_(seed),
      order_(order),
      num_prompt_tokens_(static_cast<int32_t>(request_.prompt_tokens.size())),
      tokens_(request_.prompt_tokens) {
  ordering_deadline_ = request_.deadline;
  if (request_.latency_budget.has_value()) {
    ordering_deadline_ = std::min(ordering_deadline_, request_.arrival + *request_.latency_budget);
  } else if (request_.deadline == absl::InfiniteFuture()) {
    ordering_deadline_ = request_.arrival + kDefaultLatencyBudget;
  }
  tokens_.reserve(tokens_.size() + static_cast<size_t>(request_.stopping.max_tokens) + 1);
}

}  // namespace rtgen
