// The paged KV cache of the inference runtime (issue 37): fixed-size blocks from ONE pool sized in
// bytes, shared by every layer of a model, and per sequence one block table per layer.
//
//   block      block_tokens positions of ONE layer: K then V, each [Hkv, block_tokens, D], f32,
//              f16 (IEEE half bits) or q8 (int8 rows, each with an f32 scale after the block's
//              values: include/attn/ops/paged_attention.h). Block i of a sequence's layer-l table
//              holds positions [i · block_tokens, (i + 1) · block_tokens).
//   fork       a new sequence sharing every block of its parent (reference counts); the first
//              append into a shared block copies it first (copy-on-write), so no sequence ever sees
//              or writes another's rows.
//   window     a sliding-window layer (query at position i sees keys j with i − W < j ≤ i) gives
//              back the blocks wholly before the window of its next query; their table entries
//              become kNoBlock.
//   prefix     full blocks, once written (commit), are indexed by the tokens before and in them (a
//              chained hash, verified token by token against the parent entry and the block's own
//              tokens on every hit). A new sequence attaches the longest cached prefix. The index
//              holds its own reference, so cached blocks outlive their sequences; unreferenced
//              cached blocks are evicted least-recently-used (leaves first) when the pool runs out.
//
// Running out of blocks is never an error that damages state: append returns false and leaves the
// sequence and every other as they were. Bad arguments (an unknown sequence, a write outside the
// positions just appended, a size mismatch) throw attn::Error with the expected and the actual
// values. Not thread-safe: one owner (the model's step) calls it.
#pragma once

#include <attn/ops/paged_attention.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace attn::models::runtime {

struct KvCacheConfig {
  int64_t layers = 0;         // decoder layers, each with its own blocks
  int64_t kv_heads = 0;       // Hkv
  int64_t head_dim = 0;       // D
  int64_t block_tokens = 16;  // positions per block
  ops::KvDtype dtype = ops::KvDtype::f32;
  int64_t pool_bytes = 0;  // the pool's size; blocks = pool_bytes / block_bytes (at least 1)
  // Per layer 0 (global) or the window W >= 1; empty = every layer global.
  std::vector<int64_t> layer_windows;
};

// Bytes of the pool, as reported by PagedKvCache::accounting().
struct KvAccounting {
  int64_t pool = 0;      // every block
  int64_t reserved = 0;  // blocks held by a sequence or the prefix index (each block once)
  int64_t used = 0;      // the filled positions of the reserved blocks
  int64_t wasted = 0;    // reserved − used: the unfilled tails of the sequences' last blocks
  int64_t cached = 0;    // reserved blocks held only by the prefix index (evictable)
  int64_t free = 0;      // pool − reserved
  int64_t blocks_free = 0;
};

// `layout` with an f32 pool of blocks of `block_tokens` that holds one sequence of `positions` on every
// layer, plus one block per layer (a partial last block while the sequence grows).
KvCacheConfig one_sequence_pool(KvCacheConfig layout, int64_t positions, int64_t block_tokens = 16);

class PagedKvCache {
 public:
  static constexpr int32_t kNoBlock = -1;
  using SeqId = int64_t;

  explicit PagedKvCache(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_bytes() const { return block_elems_ * elem_bytes_; }
  int64_t token_bytes() const;  // one position of one layer (K and V; q8: with their scales)

  // ---- sequences ----
  SeqId create();  // an empty sequence
  // A new sequence sharing every block (and the tokens) of `parent`, with the rows as they are now
  // (fork after the parent's commit: rows it has appended but not yet written stay its to write).
  SeqId fork(SeqId parent);
  // Drops the sequence's references; its committed full blocks stay in the prefix index.
  void free(SeqId seq);
  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }
  int64_t length(SeqId seq) const;  // positions appended
  int64_t sequences() const { return static_cast<int64_t>(seqs_.size()); }

  // For an empty sequence: attaches the longest chain of cached full blocks whose tokens equal the
  // first tokens of `tokens` (at most n of them) and returns the positions attached (a multiple of
  // block_tokens, possibly 0). The caller computes the rest.
  int64_t attach_prefix(SeqId seq, const int32_t* tokens, int64_t n);

  // Reserves positions [length, length + n) on every layer for the tokens `tokens` (n of them, or
  // null: no prefix keys for them), copying a shared last block first, releasing window blocks no
  // query from here on can see, and evicting unreferenced cached blocks if needed. Returns false,
  // changing nothing, when the pool cannot hold them.
  bool append(SeqId seq, const int32_t* tokens, int64_t n);
  // Writes the rows of positions [pos, pos + n) of one layer: k, v [n, Hkv, D] f32 contiguous
  // (rounded to half for an f16 cache, to int8 rows and their scales for q8). Only positions of
  // the last append may be written.
  void write(SeqId seq, int64_t layer, int64_t pos, const float* k, const float* v, int64_t n);
  // The rows of ONE kv head at one position: k, v [D]. Calls for distinct (layer, head) may run
  // concurrently (disjoint rows, nothing else changes): a decode step splitting heads over threads.
  void write_head(SeqId seq, int64_t layer, int64_t pos, int64_t head, const float* k, const float* v);
  // Declares every appended position written on every layer: full blocks with known tokens enter
  // the prefix index.
  void commit(SeqId seq);

  // ---- the attention's view ----
  // The pool (the same for every layer: the tables say which blocks are whose).
  ops::PagedKv view() const;
  // The block table of one layer and sequence (kNoBlock for released window blocks).
  const std::vector<int32_t>& table(SeqId seq, int64_t layer) const;
  // An ops::PagedSequence for paged_attention: the sequence's table on `layer`, keys = length,
  // the last `queries` positions as query rows.
  ops::PagedSequence attention_sequence(SeqId seq, int64_t layer, int64_t queries) const;

  KvAccounting accounting() const;
  // For a scheduler's admission, without accounting()'s walk over the pool: blocks on the free list,
  // blocks held only by the prefix index (each evictable once the entries after it are gone), and
  // the prefix entries evicted so far.
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t evictable_blocks() const;
  int64_t evictions() const { return evictions_; }
  int64_t refcount(int32_t block) const { return refs_.at(static_cast<std::size_t>(block)); }
  int64_t cached_blocks() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Sequence {
    std::vector<std::vector<int32_t>> tables;  // [layer][block]
    std::vector<int32_t> tokens;               // known tokens by position (-1: unknown)
    std::vector<int64_t> entries;              // prefix entry of each committed full block, or -1
    int64_t length = 0;
    int64_t written_from = 0;  // positions [written_from, length) may be written
    bool tokens_known = true;  // every position so far came with a token
  };
  struct PrefixEntry {
    uint64_t hash = 0;
    int64_t parent = -1;          // entry of the block before, -1 for block 0
    std::vector<int32_t> tokens;  // the block's tokens
    std::vector<int32_t> blocks;  // one per layer
    int64_t children = 0;         // entries whose parent this is
    uint64_t last_use = 0;
  };

  Sequence& seq_at(SeqId seq);
  const Sequence& seq_at(SeqId seq) const;
  int32_t take_block();  // a free block (evicting if needed) or kNoBlock
  bool evict_one();
  void unref(int32_t block);
  bool entry_evictable(const PrefixEntry& e) const;
  void drop_entry(int64_t id);
  void copy_block(int32_t from, int32_t to);
  // K and V of one kv head at slot `slot` of `block`, stored in the pool's type.
  void store_row(int32_t block, int64_t head, int64_t slot, const float* k, const float* v);
  int64_t release_before(const Sequence& s, int64_t layer, int64_t next_pos) const;
  uint64_t chain_hash(uint64_t parent_hash, const int32_t* tokens) const;

  KvCacheConfig config_;
  int64_t num_blocks_ = 0, block_elems_ = 0, elem_bytes_ = 4;
  // The pool, allocated once and not initialised (its pages are touched as blocks are first
  // written; only written rows are ever read).
  std::unique_ptr<std::byte[]> pool_;  // float, half bits or q8 blocks, as config_.dtype says
  std::vector<int32_t> refs_;          // per block: references by sequences and the prefix index
  std::vector<int32_t> fill_;          // per block: positions filled
  std::vector<int32_t> free_;          // free block ids (a stack)
  std::unordered_map<SeqId, Sequence> seqs_;
  SeqId next_seq_ = 0;
  std::unordered_map<int64_t, PrefixEntry> entries_;    // by entry id
  std::unordered_multimap<uint64_t, int64_t> by_hash_;  // hash -> entry ids
  int64_t next_entry_ = 0;
  uint64_t clock_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace attn::models::runtime
