#include "engine/tokenizer/bpe_merge.h"

#include <queue>
#include <tuple>

namespace rtgen {
namespace {

struct Candidate {
  double priority;
  int left;  // position of the left symbol
  int32_t left_id, right_id;
  bool operator>(const Candidate& o) const {
    return std::tie(priority, left) > std::tie(o.priority, o.left);
  }
};

}  // namespace

std::vector<int32_t> ApplyMerges(const std::vector<int32_t>& symbols, const MergeRule& rule) {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;
  std::vector<int32_t> id = symbols;
  std::vector<int> next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    if (auto m = rule(id[left], id[next[left]])) {
      queue.push({m->priority, left, id[left], id[next[left]]});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const int right = next[c.left];
    // Stale when either side has merged since this candidate was queued.
    if (!alive[c.left] || right < 0 || id[c.left] != c.left_id || id[right] != c.right_id) {
      continue;
    }
    const auto m = rule(c.left_id, c.right_id);
    id[c.left] = m->merged;
    alive[right] = false;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  std::vector<int32_t> out;
  for (int i = 0; i >= 0; i = next[i]) out.push_back(id[i]);
  return out;
}

}  // namespace rtgen
