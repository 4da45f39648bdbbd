#pragma once
// KV block bookkeeping, pure CPU state: reference-counted fixed-size blocks and automatic prefix
// caching. A FULL block whose KV is written is registered under its parent's registration (an
// id, unique and never reused: 0 for a first block) and a chained content hash (hash(parent
// block's hash, the block's token ids)); a later sequence with the same prefix shares it. A hit
// needs the candidate's parent to be the sequence's previous hit and its own tokens to be the
// sequence's, so by induction a shared block's whole prefix is the sequence's, token for token,
// whatever the hashes do (64-bit chains can be made to collide on purpose: a crafted prompt must
// not place its KV under another user's prefix). A block whose refcount drops to 0 keeps its
// registration and stays in the cache, evictable in least-recently-freed order; an evicted
// block's children can no longer be reached and age out the same way. Allocation takes free
// uncached blocks first, then evicts.
//
// Invariant: num_free_blocks() + num_used_blocks() == num_blocks(), where free counts both
// uncached free blocks and evictable cached ones.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/sequence.h"

namespace rtgen {

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t BlocksFor(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Whether the sequence's whole current context (prompt and any output kept across a
  // preemption) can get blocks now.
  bool CanAllocate(const Sequence& seq) const;
  // Gives `seq` (which holds no blocks) a block table covering all its tokens, sharing cached
  // blocks for its longest cached prefix of full blocks. Sets seq.num_computed_tokens to the hit
  // count and returns it; it is always < seq.num_tokens() so at least one token is computed.
  int32_t Allocate(Sequence& seq);

  // Whether the table can grow to cover num_computed_tokens + num_new_tokens tokens.
  bool CanAppend(const Sequence& seq, int32_t num_new_tokens) const {
    const int32_t have = static_cast<int32_t>(seq.block_table.size());
    const int32_t end = seq.num_computed_tokens + num_new_tokens;
    if (end <= have * block_size_) return true;  // the common decode case: no new block
    return BlocksFor(end) - have <= num_free_blocks();
  }
  void Append(Sequence& seq, int32_t num_new_tokens) {
    const int32_t end = seq.num_computed_tokens + num_new_tokens;
    if (end <= static_cast<int32_t>(seq.block_table.size()) * block_size_) return;
    AppendSlow(seq, end);
  }

  // Registers the hash of every block that is now full and whose KV is written (call after the
  // step that wrote it succeeded).
  void CommitComputedBlocks(Sequence& seq) {
    if (seq.num_computed_tokens / block_size_ > static_cast<int32_t>(seq.block_hashes.size())) {
      CommitSlow(seq);
    }
  }

  // Drops the sequence's references (tail first, so tail blocks are evicted first) and resets
  // its block table and computed count.
  void Free(Sequence& seq);

  int32_t num_free_blocks() const {
    return static_cast<int32_t>(free_uncached_.size()) + lru_size_;
  }
  int32_t num_used_blocks() const { return num_used_; }
  int32_t num_cached_free_blocks() const { return lru_size_; }
  int64_t cached_hit_tokens() const { return cached_hit_tokens_; }
  int32_t ref_count(int32_t block) const { return blocks_[block].ref_count; }
  bool is_cached(int32_t block) const { return blocks_[block].has_hash; }

  static uint64_t HashBlock(uint64_t parent, std::span<const int32_t> tokens);
  // Sequence::block_chain_reg of a sequence none of whose later blocks can be registered.
  static constexpr uint64_t kNoChain = ~uint64_t{0};

 private:
  struct Block {
    int32_t ref_count = 0;
    bool has_hash = false;
    uint64_t hash = 0;
    uint64_t reg = 0;         // while has_hash: this registration's id (from 1, never reused)
    uint64_t parent_reg = 0;  // while has_hash: the block before it's reg, 0 for a first block
    int32_t lru_prev = -1;  // links in the evictable list (ref_count == 0 && has_hash)
    int32_t lru_next = -1;
  };

  // Cached blocks that `seq` can share: its longest prefix of full blocks that are cached,
  // never including the block holding the last token. Fills `hashes` for them.
  std::vector<int32_t> FindPrefixHits(const Sequence& seq, std::vector<uint64_t>* hashes) const;
  // The cached block registered after the block whose registration is `parent_reg` (0: first)
  // under `hash`, holding these tokens; -1 when none.
  int32_t FindCached(uint64_t hash, std::span<const int32_t> tokens, uint64_t parent_reg) const;
  void AppendSlow(Sequence& seq, int32_t num_tokens);
  void CommitSlow(Sequence& seq);
  int32_t TakeFreeBlock();
  void LruPushBack(int32_t block);
  void LruRemove(int32_t block);
  std::span<const int32_t> BlockTokens(int32_t block) const;

  int32_t block_size_;
  bool enable_prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<int32_t> block_tokens_;  // [num_blocks * block_size] contents of hashed blocks
  std::vector<int32_t> free_uncached_;
  int32_t lru_head_ = -1;  // evicted first
  int32_t lru_tail_ = -1;
  int32_t lru_size_ = 0;
  int32_t num_used_ = 0;   // blocks with ref_count > 0
  int64_t cached_hit_tokens_ = 0;
  uint64_t next_reg_ = 1;
  // {parent's registration, chained hash} -> block: children of an evicted parent keep keys no
  // lookup can form, and never stand in the way of the same content after a new parent.
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, int32_t> cached_;
};

}  // namespace rtgen
