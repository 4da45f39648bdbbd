#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include "engine/common/splitmix64.h"
#include "tests/engine/test_util.h"

namespace rtgen::testing {
namespace {

class BlockManagerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Sequence> Seq(std::vector<int32_t> prompt) {
    return MakeSeq(&tok_, MakeRequest("s", std::move(prompt), 8), nullptr);
  }
  // Pretends the step computing every token of `seq` ran.
  static void ComputeAll(BlockManager& bm, Sequence& seq) {
    seq.num_computed_tokens = seq.num_tokens();
    bm.CommitComputedBlocks(seq);
  }
  FakeTokenizer tok_;
};

TEST_F(BlockManagerTest, AllocateAndFreeKeepCountsBalanced) {
  BlockManager bm(8, 16, true);
  auto a = Seq(Range(1, 40));
  ASSERT_TRUE(bm.CanAllocate(*a));
  EXPECT_EQ(bm.Allocate(*a), 0);
  EXPECT_EQ(a->block_table.size(), 3u);
  EXPECT_EQ(bm.num_used_blocks(), 3);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  for (int32_t b : a->block_table) EXPECT_EQ(bm.ref_count(b), 1);
  bm.Free(*a);
  EXPECT_TRUE(a->block_table.empty());
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST_F(BlockManagerTest, SharedPrefixIsCountedAndRefcounted) {
  BlockManager bm(8, 16, true);
  auto a = Seq(Range(1, 40));
  bm.Allocate(*a);
  ComputeAll(bm, *a);  // blocks 0 and 1 of a are full and registered
  std::vector<int32_t> p = Range(1, 32);
  p.push_back(200);
  p.push_back(201);
  auto b = Seq(p);
  ASSERT_TRUE(bm.CanAllocate(*b));
  EXPECT_EQ(bm.Allocate(*b), 32);
  EXPECT_EQ(b->num_computed_tokens, 32);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
  EXPECT_EQ(b->block_table[1], a->block_table[1]);
  EXPECT_NE(b->block_table[2], a->block_table[2]);
  EXPECT_EQ(bm.ref_count(a->block_table[0]), 2);
  EXPECT_EQ(bm.num_used_blocks(), 4);
  EXPECT_EQ(bm.cached_hit_tokens(), 32);
  bm.Free(*a);
  EXPECT_EQ(bm.ref_count(b->block_table[0]), 1);
  bm.Free(*b);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST_F(BlockManagerTest, LastPromptTokenIsNeverCached) {
  BlockManager bm(8, 16, true);
  auto a = Seq(Range(1, 32));
  bm.Allocate(*a);
  ComputeAll(bm, *a);
  auto b = Seq(Range(1, 32));  // identical: only the first block may be reused
  EXPECT_EQ(bm.Allocate(*b), 16);
  EXPECT_LT(b->num_computed_tokens, b->num_tokens());
  EXPECT_EQ(b->block_table.size(), 2u);
}

TEST_F(BlockManagerTest, NoHitsWhenCachingDisabled) {
  BlockManager bm(8, 16, false);
  auto a = Seq(Range(1, 40));
  bm.Allocate(*a);
  ComputeAll(bm, *a);
  bm.Free(*a);
  auto b = Seq(Range(1, 40));
  EXPECT_EQ(bm.Allocate(*b), 0);
  EXPECT_EQ(bm.num_cached_free_blocks(), 0);
}

TEST_F(BlockManagerTest, FreedCachedBlocksAreReusedThenEvictedInLruOrder) {
  BlockManager bm(4, 16, true);
  auto a = Seq(Range(1, 32));
  bm.Allocate(*a);
  ComputeAll(bm, *a);
  bm.Free(*a);
  auto b = Seq(Range(100, 32));
  bm.Allocate(*b);
  ComputeAll(bm, *b);
  bm.Free(*b);
  EXPECT_EQ(bm.num_cached_free_blocks(), 4);
  EXPECT_EQ(bm.num_free_blocks(), 4);

  // A freed sequence comes back and finds its prefix (minus the block with the last token).
  auto a2 = Seq(Range(1, 33));
  EXPECT_EQ(bm.Allocate(*a2), 32);
  bm.Free(*a2);

  // a2's third block evicted b's tail block (the LRU head); a's blocks went back to the LRU
  // tail. Two more blocks: the one free uncached block, then b's head block.
  auto c = Seq(Range(150, 20));
  EXPECT_EQ(bm.Allocate(*c), 0);
  EXPECT_EQ(bm.num_used_blocks(), 2);
  auto b2 = Seq(Range(100, 33));
  EXPECT_TRUE(bm.CanAllocate(*b2) == false);  // b2 needs 3 blocks, its prefix was evicted
  bm.Free(*c);
  auto a3 = Seq(Range(1, 33));
  EXPECT_EQ(bm.Allocate(*a3), 32);            // a's blocks survived
  bm.Free(*a3);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), 4);
}

TEST_F(BlockManagerTest, TailBlocksAreEvictedBeforeHeadBlocks) {
  BlockManager bm(3, 4, true);
  auto a = Seq(Range(1, 12));
  bm.Allocate(*a);
  ComputeAll(bm, *a);
  const std::vector<int32_t> table = a->block_table;
  bm.Free(*a);
  auto c = Seq(Range(50, 3));  // one block: evicts a's last block first
  bm.Allocate(*c);
  EXPECT_EQ(c->block_table[0], table[2]);
  EXPECT_TRUE(bm.is_cached(table[0]));
  EXPECT_TRUE(bm.is_cached(table[1]));
  EXPECT_FALSE(bm.is_cached(table[2]));
}

TEST_F(BlockManagerTest, AppendAddsABlockAtTheBoundary) {
  BlockManager bm(2, 4, true);
  auto a = Seq(Range(1, 4));
  bm.Allocate(*a);
  ComputeAll(bm, *a);
  a->AppendToken(9);  // token 5 needs a second block
  ASSERT_TRUE(bm.CanAppend(*a, 1));
  bm.Append(*a, 1);
  EXPECT_EQ(a->block_table.size(), 2u);
  a->num_computed_tokens = 5;
  for (int i = 0; i < 3; ++i) a->AppendToken(9);
  EXPECT_TRUE(bm.CanAppend(*a, 3));   // still inside block 2
  EXPECT_FALSE(bm.CanAppend(*a, 4));  // would need a third block
  bm.Free(*a);
  EXPECT_EQ(bm.num_free_blocks(), 2);
}

TEST_F(BlockManagerTest, SameContentComputedTwiceIsRegisteredOnce) {
  BlockManager bm(8, 4, true);
  auto a = Seq(Range(1, 9));
  auto b = Seq(Range(1, 9));
  bm.Allocate(*a);
  bm.Allocate(*b);  // nothing registered yet: no hits
  EXPECT_EQ(b->num_computed_tokens, 0);
  ComputeAll(bm, *a);
  ComputeAll(bm, *b);
  EXPECT_TRUE(bm.is_cached(a->block_table[0]));
  EXPECT_FALSE(bm.is_cached(b->block_table[0]));
  bm.Free(*a);
  bm.Free(*b);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_EQ(bm.num_cached_free_blocks(), 2);
}

// Two different first blocks built to share a 64-bit chain hash (HashBlock mixes two ids a word:
// the collider's third and fourth ids are chosen so the second word lands on the victim's
// state). A prompt starting with the collider must not place its next block's KV under the
// victim's prefix: the victim's lookup then finds that block by hash and by its own tokens, and
// before the parent check it shared it (8 tokens hit, the second block's KV computed after
// another context); and the victim's own second block, computed later, is registered and found.
TEST_F(BlockManagerTest, AHashCollisionInThePrefixIsNoHit) {
  BlockManager bm(16, 4, true);
  const auto word = [](int32_t x, int32_t y) {
    return uint64_t{static_cast<uint32_t>(x)} | (uint64_t{static_cast<uint32_t>(y)} << 32);
  };
  const uint64_t s0 = SplitMix64(0x5bd1e995ULL ^ (uint64_t{4} << 32));  // parent 0, 4 ids
  const uint64_t mid = SplitMix64(s0 ^ word(1, 2)) ^ word(3, 4);
  std::vector<int32_t> collider;
  for (int32_t x = 100; collider.empty(); ++x) {
    const uint64_t w = mid ^ SplitMix64(s0 ^ word(x, 0));
    if ((w & 0x8000000080000000ULL) == 0) {  // both ids non-negative
      collider = {x, 0, static_cast<int32_t>(static_cast<uint32_t>(w)),
                  static_cast<int32_t>(w >> 32)};
    }
  }
  ASSERT_NE(collider, Range(1, 4));
  ASSERT_EQ(BlockManager::HashBlock(0, collider), BlockManager::HashBlock(0, Range(1, 4)));

  auto first = Seq({1, 2, 3, 4, 9});  // registers the victim's first block
  bm.Allocate(*first);
  ComputeAll(bm, *first);
  std::vector<int32_t> crafted = collider;
  for (int32_t t : {5, 6, 7, 8, 9}) crafted.push_back(t);  // then the victim's second block
  auto attacker = Seq(crafted);
  EXPECT_EQ(bm.Allocate(*attacker), 0);
  ComputeAll(bm, *attacker);
  auto victim = Seq(Range(1, 9));
  EXPECT_EQ(bm.Allocate(*victim), 4);
  EXPECT_EQ(victim->block_table[0], first->block_table[0]);
  EXPECT_NE(victim->block_table[1], attacker->block_table[1]);
  ComputeAll(bm, *victim);
  auto again = Seq(Range(1, 9));
  EXPECT_EQ(bm.Allocate(*again), 8);  // the victim's own second block, after its own first
  EXPECT_EQ(again->block_table[1], victim->block_table[1]);
}

// A child registered under a parent that is evicted later does not stand in the way of the same
// content computed after a new parent: A and B run the same 8-token prefix at once (B's copies
// stay unregistered, its third block registered after A's second), A's blocks are evicted, C
// computes the prefix again; D then shares all 12 tokens, C's third block among them (keyed by
// the hash alone, B's stale child kept C's from being registered: 8).
TEST_F(BlockManagerTest, AChildOfAnEvictedParentDoesNotBlockTheSameContentAgain) {
  BlockManager bm(12, 4, true);
  const std::vector<int32_t> prefix = Range(1, 8);
  const auto prompt = [&](std::vector<int32_t> tail) {
    std::vector<int32_t> p = prefix;
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  auto a = Seq(prompt({9}));
  auto b = Seq(prompt({20, 21, 22, 23, 30}));
  EXPECT_EQ(bm.Allocate(*a), 0);
  EXPECT_EQ(bm.Allocate(*b), 0);  // before A's blocks are computed
  ComputeAll(bm, *a);
  ComputeAll(bm, *b);
  bm.Free(*a);
  std::vector<std::unique_ptr<Sequence>> fillers;  // take every free block: A's are evicted
  while (bm.num_free_blocks() > 0) {
    fillers.push_back(Seq(Range(100 + 4 * static_cast<int32_t>(fillers.size()), 3)));
    bm.Allocate(*fillers.back());
  }
  for (auto& f : fillers) bm.Free(*f);
  auto c = Seq(prompt({20, 21, 22, 23, 40}));
  EXPECT_EQ(bm.Allocate(*c), 0);
  ComputeAll(bm, *c);
  auto d = Seq(prompt({20, 21, 22, 23, 50}));
  ASSERT_TRUE(bm.CanAllocate(*d));
  EXPECT_EQ(bm.Allocate(*d), 12);
  EXPECT_EQ(d->block_table[2], c->block_table[2]);
}

}  // namespace
}  // namespace rtgen::testing
