#include "engine/block_manager.h"

#include <algorithm>
#include <cassert>

#include "engine/common/splitmix64.h"

namespace rtgen {
namespace {

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      enable_prefix_caching_(enable_prefix_caching),
      blocks_(static_cast<size_t>(num_blocks)),
      block_tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0) {
  free_uncached_.reserve(static_cast<size_t>(num_blocks));
  cached_.reserve(static_cast<size_t>(num_blocks));
  // Stack: block 0 is taken first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_uncached_.push_back(b);
}

uint64_t BlockManager::HashBlock(uint64_t parent, std::span<const int32_t> tokens) {
  // Two token ids per 64-bit word, one mix per word; the length goes in with the parent so that
  // an odd trailing id cannot collide with a zero pair.
  uint64_t h = SplitMix64(parent ^ 0x5bd1e995ULL ^ (static_cast<uint64_t>(tokens.size()) << 32));
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    h = SplitMix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) |
                 (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32)));
  }
  if (i < tokens.size()) h = SplitMix64(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

std::span<const int32_t> BlockManager::BlockTokens(int32_t block) const {
  return std::span<const int32_t>(block_tokens_)
      .subspan(static_cast<size_t>(block) * static_cast<size_t>(block_size_),
               static_cast<size_t>(block_size_));
}

int32_t BlockManager::FindCached(uint64_t hash, std::span<const int32_t> tokens,
                                 uint64_t parent_reg) const {
  auto it = cached_.find({parent_reg, hash});
  if (it == cached_.end()) return -1;
  std::span<const int32_t> stored = BlockTokens(it->second);
  if (!std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end())) return -1;
  return it->second;
}

std::vector<int32_t> BlockManager::FindPrefixHits(const Sequence& seq,
                                                  std::vector<uint64_t>* hashes) const {
  std::vector<int32_t> hits;
  if (!enable_prefix_caching_) return hits;
  std::span<const int32_t> tokens = seq.tokens();
  // Full blocks strictly before the last token: the last token is always computed.
  const int32_t max_hits = (seq.num_tokens() - 1) / block_size_;
  uint64_t parent = 0, parent_reg = 0;
  for (int32_t i = 0; i < max_hits; ++i) {
    std::span<const int32_t> block_tokens = tokens.subspan(
        static_cast<size_t>(i) * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = HashBlock(parent, block_tokens);
    const int32_t block = FindCached(h, block_tokens, parent_reg);
    if (block < 0) break;
    hits.push_back(block);
    if (hashes != nullptr) hashes->push_back(h);
    parent = h;
    parent_reg = blocks_[block].reg;
  }
  return hits;
}

bool BlockManager::CanAllocate(const Sequence& seq) const {
  const std::vector<int32_t> hits = FindPrefixHits(seq, nullptr);
  int32_t revived = 0;  // hits that are now free (evictable) and stop being free once shared
  for (int32_t b : hits) revived += blocks_[b].ref_count == 0 ? 1 : 0;
  const int32_t fresh = BlocksFor(seq.num_tokens()) - static_cast<int32_t>(hits.size());
  return fresh + revived <= num_free_blocks();
}

int32_t BlockManager::Allocate(Sequence& seq) {
  assert(seq.block_table.empty());
  seq.block_hashes.clear();
  const std::vector<int32_t> hits = FindPrefixHits(seq, &seq.block_hashes);
  for (int32_t b : hits) {
    Block& block = blocks_[b];
    if (block.ref_count == 0) {
      LruRemove(b);
      ++num_used_;
    }
    ++block.ref_count;
    seq.block_table.push_back(b);
  }
  const int32_t total = BlocksFor(seq.num_tokens());
  while (static_cast<int32_t>(seq.block_table.size()) < total) {
    seq.block_table.push_back(TakeFreeBlock());
  }
  seq.block_chain_reg = hits.empty() ? 0 : blocks_[hits.back()].reg;
  const int32_t cached = static_cast<int32_t>(hits.size()) * block_size_;
  seq.num_computed_tokens = cached;
  cached_hit_tokens_ += cached;
  return cached;
}

void BlockManager::AppendSlow(Sequence& seq, int32_t num_tokens) {
  const int32_t total = BlocksFor(num_tokens);
  while (static_cast<int32_t>(seq.block_table.size()) < total) {
    seq.block_table.push_back(TakeFreeBlock());
  }
}

void BlockManager::CommitSlow(Sequence& seq) {
  const int32_t full = seq.num_computed_tokens / block_size_;
  std::span<const int32_t> tokens = seq.tokens();
  while (static_cast<int32_t>(seq.block_hashes.size()) < full) {
    const size_t i = seq.block_hashes.size();
    const uint64_t parent = i == 0 ? 0 : seq.block_hashes[i - 1];
    std::span<const int32_t> block_tokens =
        tokens.subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = HashBlock(parent, block_tokens);
    seq.block_hashes.push_back(h);
    const uint64_t parent_reg = seq.block_chain_reg;
    if (!enable_prefix_caching_ || parent_reg == kNoChain) continue;
    const int32_t b = seq.block_table[i];
    Block& block = blocks_[b];
    // Prefix hits' hashes were pushed by Allocate: every block committed here is fresh.
    assert(!block.has_hash);
    const auto [it, inserted] = cached_.try_emplace({parent_reg, h}, b);
    if (!inserted) {
      // Registered first by another sequence after the same parent: the same tokens (this copy
      // stays unregistered, and the next block's parent is that one), or other tokens under the
      // same hash, after which none of this sequence's blocks can be registered.
      const int32_t other = it->second;
      const std::span<const int32_t> stored = BlockTokens(other);
      const bool same =
          std::equal(stored.begin(), stored.end(), block_tokens.begin(), block_tokens.end());
      seq.block_chain_reg = same ? blocks_[other].reg : kNoChain;
      continue;
    }
    block.has_hash = true;
    block.hash = h;
    block.reg = next_reg_++;
    block.parent_reg = parent_reg;
    seq.block_chain_reg = block.reg;
    std::copy(block_tokens.begin(), block_tokens.end(),
              block_tokens_.begin() + static_cast<std::ptrdiff_t>(b) * block_size_);
  }
}

void BlockManager::Free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& block = blocks_[*it];
    assert(block.ref_count > 0);
    if (--block.ref_count > 0) continue;
    --num_used_;
    if (block.has_hash) {
      LruPushBack(*it);
    } else {
      free_uncached_.push_back(*it);
    }
  }
  seq.block_table.clear();
  seq.block_hashes.clear();
  seq.block_chain_reg = 0;
  seq.num_computed_tokens = 0;
}

int32_t BlockManager::TakeFreeBlock() {
  int32_t b;
  if (!free_uncached_.empty()) {
    b = free_uncached_.back();
    free_uncached_.pop_back();
  } else {
    assert(lru_head_ >= 0);
    b = lru_head_;
    LruRemove(b);
    Block& block = blocks_[b];
    cached_.erase({block.parent_reg, block.hash});
    block.has_hash = false;
    block.reg = block.parent_reg = 0;  // its registration ends: children can match no parent
  }
  blocks_[b].ref_count = 1;
  ++num_used_;
  return b;
}

void BlockManager::LruPushBack(int32_t b) {
  Block& block = blocks_[b];
  block.lru_prev = lru_tail_;
  block.lru_next = -1;
  if (lru_tail_ >= 0) {
    blocks_[lru_tail_].lru_next = b;
  } else {
    lru_head_ = b;
  }
  lru_tail_ = b;
  ++lru_size_;
}

void BlockManager::LruRemove(int32_t b) {
  Block& block = blocks_[b];
  if (block.lru_prev >= 0) {
    blocks_[block.lru_prev].lru_next = block.lru_next;
  } else {
    lru_head_ = block.lru_next;
  }
  if (block.lru_next >= 0) {
    blocks_[block.lru_next].lru_prev = block.lru_prev;
  } else {
    lru_tail_ = block.lru_prev;
  }
  block.lru_prev = block.lru_next = -1;
  --lru_size_;
}

}  // namespace rtgen
