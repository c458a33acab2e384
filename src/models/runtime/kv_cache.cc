// The paged KV cache (include/attn/models/runtime/kv_cache.h).
#include <attn/core/error.h>
#include <attn/models/runtime/kv_cache.h>
#include <attn/ops/inference.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

namespace attn::models::runtime {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

KvCacheConfig one_sequence_pool(KvCacheConfig kc, int64_t positions, int64_t block_tokens) {
  kc.block_tokens = block_tokens;
  kc.dtype = ops::KvDtype::f32;
  const int64_t blocks = ((positions + block_tokens - 1) / block_tokens + 1) * kc.layers;
  kc.pool_bytes = blocks * block_tokens * ops::kv_position_bytes(kc.dtype, kc.kv_heads, kc.head_dim);
  return kc;
}

PagedKvCache::PagedKvCache(const KvCacheConfig& config) : config_(config) {
  const auto& c = config_;
  ATTN_CHECK(c.layers > 0 && c.kv_heads > 0 && c.head_dim > 0 && c.block_tokens > 0,
             "PagedKvCache: layers, kv_heads, head_dim and block_tokens must be > 0; got ", c.layers, ", ",
             c.kv_heads, ", ", c.head_dim, ", ", c.block_tokens);
  if (config_.layer_windows.empty()) config_.layer_windows.assign(static_cast<std::size_t>(c.layers), 0);
  ATTN_CHECK(static_cast<int64_t>(config_.layer_windows.size()) == c.layers,
             "PagedKvCache: layer_windows must be empty or have one entry per layer (", c.layers, "); got ",
             config_.layer_windows.size());
  for (int64_t w : config_.layer_windows)
    ATTN_CHECK(w >= 0, "PagedKvCache: a layer window must be 0 (global) or >= 1; got ", w);
  elem_bytes_ = c.dtype == ops::KvDtype::q8 ? 1 : c.dtype == ops::KvDtype::f16 ? 2 : 4;
  // q8: a block is bytes, the values and then their scales (ops::q8_block_bytes).
  block_elems_ = c.dtype == ops::KvDtype::q8 ? ops::q8_block_bytes(c.kv_heads, c.block_tokens, c.head_dim)
                                             : 2 * c.kv_heads * c.block_tokens * c.head_dim;
  num_blocks_ = c.pool_bytes / block_bytes();
  ATTN_CHECK(num_blocks_ >= 1, "PagedKvCache: pool_bytes must hold at least one block of ", block_bytes(),
             " bytes; got ", c.pool_bytes);
  ATTN_CHECK(num_blocks_ <= std::numeric_limits<int32_t>::max(),
             "PagedKvCache: at most 2^31 - 1 blocks; got ", num_blocks_);
  try {
    pool_.reset(new std::byte[static_cast<std::size_t>(num_blocks_ * block_bytes())]);
  } catch (const std::bad_alloc&) {
    throw Error(detail::concat("PagedKvCache: cannot allocate a pool of ", num_blocks_ * block_bytes(),
                               " bytes (", num_blocks_, " blocks); give a smaller pool_bytes"));
  }
  refs_.assign(static_cast<std::size_t>(num_blocks_), 0);
  fill_.assign(static_cast<std::size_t>(num_blocks_), 0);
  free_.reserve(static_cast<std::size_t>(num_blocks_));
  for (int64_t b = num_blocks_ - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int64_t PagedKvCache::token_bytes() const {
  return ops::kv_position_bytes(config_.dtype, config_.kv_heads, config_.head_dim);
}

PagedKvCache::Sequence& PagedKvCache::seq_at(SeqId seq) {
  auto it = seqs_.find(seq);
  ATTN_CHECK(it != seqs_.end(), "PagedKvCache: no sequence ", seq, " (freed, or never created)");
  return it->second;
}
const PagedKvCache::Sequence& PagedKvCache::seq_at(SeqId seq) const {
  auto it = seqs_.find(seq);
  ATTN_CHECK(it != seqs_.end(), "PagedKvCache: no sequence ", seq, " (freed, or never created)");
  return it->second;
}

int64_t PagedKvCache::length(SeqId seq) const { return seq_at(seq).length; }

PagedKvCache::SeqId PagedKvCache::create() {
  Sequence s;
  s.tables.resize(static_cast<std::size_t>(config_.layers));
  const SeqId id = next_seq_++;
  seqs_.emplace(id, std::move(s));
  return id;
}

PagedKvCache::SeqId PagedKvCache::fork(SeqId parent) {
  Sequence child = seq_at(parent);
  for (auto& t : child.tables)
    for (int32_t b : t)
      if (b != kNoBlock) ++refs_[static_cast<std::size_t>(b)];
  child.written_from = child.length;  // the parent's pending rows are its own to write
  const SeqId id = next_seq_++;
  seqs_.emplace(id, std::move(child));
  return id;
}

void PagedKvCache::unref(int32_t block) {
  int32_t& r = refs_[static_cast<std::size_t>(block)];
  if (--r == 0) {
    fill_[static_cast<std::size_t>(block)] = 0;
    free_.push_back(block);
  }
}

void PagedKvCache::free(SeqId seq) {
  Sequence& s = seq_at(seq);
  for (auto& t : s.tables)
    for (int32_t b : t)
      if (b != kNoBlock) unref(b);
  seqs_.erase(seq);
}

uint64_t PagedKvCache::chain_hash(uint64_t h, const int32_t* tokens) const {
  // splitmix64 steps over the parent's hash and the block's tokens: a key, never trusted alone.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  for (int64_t i = 0; i < config_.block_tokens; ++i) h = mix(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

bool PagedKvCache::entry_evictable(const PrefixEntry& e) const {
  if (e.children != 0) return false;
  for (int32_t b : e.blocks)
    if (refs_[static_cast<std::size_t>(b)] != 1) return false;  // a sequence still reads it
  return true;
}

void PagedKvCache::drop_entry(int64_t id) {
  auto it = entries_.find(id);
  const PrefixEntry& e = it->second;
  auto range = by_hash_.equal_range(e.hash);
  for (auto h = range.first; h != range.second; ++h)
    if (h->second == id) {
      by_hash_.erase(h);
      break;
    }
  if (e.parent >= 0) {
    auto p = entries_.find(e.parent);
    if (p != entries_.end()) --p->second.children;
  }
  for (int32_t b : e.blocks) unref(b);
  entries_.erase(it);
}

bool PagedKvCache::evict_one() {
  int64_t victim = -1;
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  for (const auto& [id, e] : entries_)
    if (e.last_use < oldest && entry_evictable(e)) {
      oldest = e.last_use;
      victim = id;
    }
  if (victim < 0) return false;
  drop_entry(victim);
  ++evictions_;
  return true;
}

int64_t PagedKvCache::evictable_blocks() const {
  // An entry whose blocks only the index holds: no sequence reads them, nor (a sequence holds every
  // block of its prefix) the blocks of any entry after it, so evicting leaves first frees them all.
  int64_t n = 0;
  for (const auto& [id, e] : entries_)
    if (std::all_of(e.blocks.begin(), e.blocks.end(),
                    [this](int32_t b) { return refs_[static_cast<std::size_t>(b)] == 1; }))
      n += static_cast<int64_t>(e.blocks.size());
  return n;
}

int32_t PagedKvCache::take_block() {
  // Evicting one entry frees one block per layer unless a block is shared with a live sequence
  // (then the entry is not evictable), so one eviction frees at least one block.
  if (free_.empty() && !evict_one()) return kNoBlock;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<std::size_t>(b)] = 1;
  fill_[static_cast<std::size_t>(b)] = 0;
  return b;
}

void PagedKvCache::copy_block(int32_t from, int32_t to) {
  const auto n = static_cast<std::size_t>(block_bytes());
  std::memcpy(pool_.get() + to * n, pool_.get() + from * n, n);
  fill_[static_cast<std::size_t>(to)] = fill_[static_cast<std::size_t>(from)];
}

int64_t PagedKvCache::release_before(const Sequence& s, int64_t layer, int64_t next_pos) const {
  const int64_t w = config_.layer_windows[static_cast<std::size_t>(layer)];
  if (w == 0) return 0;
  // The earliest key a query at next_pos or later can see is next_pos − w + 1.
  const int64_t first_key = next_pos - w + 1;
  return first_key <= 0
             ? 0
             : std::min<int64_t>(first_key / config_.block_tokens,
                                 static_cast<int64_t>(s.tables[static_cast<std::size_t>(layer)].size()));
}

bool PagedKvCache::append(SeqId seq, const int32_t* tokens, int64_t n) {
  ATTN_CHECK(n >= 0, "PagedKvCache::append: n must be >= 0; got ", n);
  Sequence& s = seq_at(seq);
  if (n == 0) return true;
  const int64_t bt = config_.block_tokens, len = s.length, end = len + n;
  // Window blocks no query from `len` on can see go back first (nothing reads them again).
  for (int64_t l = 0; l < config_.layers; ++l) {
    auto& t = s.tables[static_cast<std::size_t>(l)];
    const int64_t drop = release_before(s, l, len);
    for (int64_t i = 0; i < drop; ++i)
      if (t[static_cast<std::size_t>(i)] != kNoBlock) {
        unref(t[static_cast<std::size_t>(i)]);
        t[static_cast<std::size_t>(i)] = kNoBlock;
      }
  }
  // Every new block and every copy of a shared last block, taken before any table changes.
  const bool partial = len % bt != 0;
  const int64_t new_blocks = ceil_div(end, bt) - ceil_div(len, bt);
  std::vector<int32_t> taken;
  for (int64_t l = 0; l < config_.layers; ++l) {
    const auto& t = s.tables[static_cast<std::size_t>(l)];
    const bool cow = partial && refs_[static_cast<std::size_t>(t[static_cast<std::size_t>(len / bt)])] > 1;
    for (int64_t i = 0; i < new_blocks + (cow ? 1 : 0); ++i) {
      const int32_t b = take_block();
      if (b == kNoBlock) {
        for (int32_t x : taken) unref(x);
        return false;
      }
      taken.push_back(b);
    }
  }
  std::size_t next = 0;
  for (int64_t l = 0; l < config_.layers; ++l) {
    auto& t = s.tables[static_cast<std::size_t>(l)];
    if (partial) {
      int32_t& last = t[static_cast<std::size_t>(len / bt)];
      if (refs_[static_cast<std::size_t>(last)] > 1) {
        const int32_t b = taken[next++];
        copy_block(last, b);
        unref(last);
        last = b;
      }
    }
    for (int64_t i = 0; i < new_blocks; ++i) t.push_back(taken[next++]);
    for (int64_t i = len / bt; i < ceil_div(end, bt); ++i)
      fill_[static_cast<std::size_t>(t[static_cast<std::size_t>(i)])] =
          static_cast<int32_t>(std::min(bt, end - i * bt));
  }
  for (int64_t i = 0; i < n; ++i) s.tokens.push_back(tokens ? tokens[i] : -1);
  if (!tokens) s.tokens_known = false;
  s.written_from = len;
  s.length = end;
  return true;
}

void PagedKvCache::write(SeqId seq, int64_t layer, int64_t pos, const float* k, const float* v, int64_t n) {
  Sequence& s = seq_at(seq);
  ATTN_CHECK(layer >= 0 && layer < config_.layers, "PagedKvCache::write: layer must be in [0, ",
             config_.layers, "); got ", layer);
  ATTN_CHECK(n >= 0 && pos >= s.written_from && pos + n <= s.length, "PagedKvCache::write: positions [", pos,
             ", ", pos + n, ") must lie in the last append's [", s.written_from, ", ", s.length, ")");
  const int64_t bt = config_.block_tokens, Hkv = config_.kv_heads, D = config_.head_dim;
  const auto& t = s.tables[static_cast<std::size_t>(layer)];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos + i;
    for (int64_t h = 0; h < Hkv; ++h)
      store_row(t[static_cast<std::size_t>(p / bt)], h, p % bt, k + (i * Hkv + h) * D, v + (i * Hkv + h) * D);
  }
}

void PagedKvCache::store_row(int32_t block, int64_t head, int64_t slot, const float* k, const float* v) {
  const int64_t bt = config_.block_tokens, D = config_.head_dim, Hkv = config_.kv_heads;
  const int64_t row = head * bt + slot;                // in [Hkv, bt]
  const int64_t ko = row * D, vo = ko + Hkv * bt * D;  // elements from the block's start
  std::byte* base = pool_.get() + block * block_bytes();
  switch (config_.dtype) {
    case ops::KvDtype::q8: {
      auto* q = reinterpret_cast<int8_t*>(base);
      auto* scales = reinterpret_cast<float*>(base + ops::q8_scales_offset(Hkv, bt, D));
      ops::store_q8_row(k, D, q + ko, scales + row);
      ops::store_q8_row(v, D, q + vo, scales + Hkv * bt + row);
      break;
    }
    case ops::KvDtype::f16:
      ops::store_f16(k, D, reinterpret_cast<uint16_t*>(base) + ko);
      ops::store_f16(v, D, reinterpret_cast<uint16_t*>(base) + vo);
      break;
    case ops::KvDtype::f32:
      std::memcpy(reinterpret_cast<float*>(base) + ko, k, static_cast<std::size_t>(D) * sizeof(float));
      std::memcpy(reinterpret_cast<float*>(base) + vo, v, static_cast<std::size_t>(D) * sizeof(float));
      break;
  }
}

void PagedKvCache::write_head(SeqId seq, int64_t layer, int64_t pos, int64_t head, const float* k,
                              const float* v) {
  const Sequence& s = seq_at(seq);
  ATTN_CHECK(layer >= 0 && layer < config_.layers && head >= 0 && head < config_.kv_heads,
             "PagedKvCache::write_head: layer must be in [0, ", config_.layers, ") and head in [0, ",
             config_.kv_heads, "); got ", layer, ", ", head);
  ATTN_CHECK(pos >= s.written_from && pos < s.length, "PagedKvCache::write_head: position ", pos,
             " must lie in the last append's [", s.written_from, ", ", s.length, ")");
  const int64_t bt = config_.block_tokens;
  store_row(s.tables[static_cast<std::size_t>(layer)][static_cast<std::size_t>(pos / bt)], head, pos % bt, k,
            v);
}

int64_t PagedKvCache::attach_prefix(SeqId seq, const int32_t* tokens, int64_t n) {
  Sequence& s = seq_at(seq);
  ATTN_CHECK(s.length == 0, "PagedKvCache::attach_prefix: the sequence must be empty; it holds ", s.length,
             " positions");
  const int64_t bt = config_.block_tokens;
  int64_t parent = -1;
  uint64_t h = 0;
  std::vector<int64_t> chain;
  for (int64_t i = 0; (i + 1) * bt <= n; ++i) {
    const int32_t* blk = tokens + i * bt;
    h = chain_hash(h, blk);
    int64_t found = -1;
    auto range = by_hash_.equal_range(h);
    for (auto it = range.first; it != range.second && found < 0; ++it) {
      const PrefixEntry& e = entries_.at(it->second);
      if (e.parent == parent && std::equal(e.tokens.begin(), e.tokens.end(), blk)) found = it->second;
    }
    if (found < 0) break;
    chain.push_back(found);
    parent = found;
  }
  for (int64_t id : chain) {
    PrefixEntry& e = entries_.at(id);
    e.last_use = ++clock_;
    for (int64_t l = 0; l < config_.layers; ++l) {
      const int32_t b = e.blocks[static_cast<std::size_t>(l)];
      ++refs_[static_cast<std::size_t>(b)];
      s.tables[static_cast<std::size_t>(l)].push_back(b);
    }
    s.tokens.insert(s.tokens.end(), e.tokens.begin(), e.tokens.end());
    s.entries.push_back(id);
  }
  s.length = s.written_from = static_cast<int64_t>(chain.size()) * bt;
  return s.length;
}

void PagedKvCache::commit(SeqId seq) {
  Sequence& s = seq_at(seq);
  s.written_from = s.length;
  const int64_t bt = config_.block_tokens;
  for (auto i = static_cast<int64_t>(s.entries.size()); i < s.length / bt; ++i) {
    const int64_t parent = i == 0 ? -1 : s.entries[static_cast<std::size_t>(i - 1)];
    const int32_t* blk = s.tokens.data() + i * bt;
    bool indexable =
        (i == 0 || entries_.count(parent)) && std::none_of(blk, blk + bt, [](int32_t x) { return x < 0; });
    for (const auto& t : s.tables) indexable = indexable && t[static_cast<std::size_t>(i)] != kNoBlock;
    if (!indexable) {
      s.entries.push_back(-1);
      continue;
    }
    const uint64_t h = chain_hash(i == 0 ? 0 : entries_.at(parent).hash, blk);
    int64_t found = -1;
    auto range = by_hash_.equal_range(h);
    for (auto it = range.first; it != range.second && found < 0; ++it) {
      const PrefixEntry& e = entries_.at(it->second);
      if (e.parent == parent && std::equal(e.tokens.begin(), e.tokens.end(), blk)) found = it->second;
    }
    if (found < 0) {
      PrefixEntry e;
      e.hash = h;
      e.parent = parent;
      e.tokens.assign(blk, blk + bt);
      for (const auto& t : s.tables) {
        const int32_t b = t[static_cast<std::size_t>(i)];
        ++refs_[static_cast<std::size_t>(b)];
        e.blocks.push_back(b);
      }
      if (parent >= 0) ++entries_.at(parent).children;
      found = next_entry_++;
      by_hash_.emplace(h, found);
      entries_.emplace(found, std::move(e));
    }
    entries_.at(found).last_use = ++clock_;
    s.entries.push_back(found);
  }
}

ops::PagedKv PagedKvCache::view() const {
  ops::PagedKv v;
  v.data = pool_.get();
  v.dtype = config_.dtype;
  v.num_blocks = num_blocks_;
  v.block_tokens = config_.block_tokens;
  v.kv_heads = config_.kv_heads;
  v.head_dim = config_.head_dim;
  v.block_stride = block_elems_;
  return v;
}

const std::vector<int32_t>& PagedKvCache::table(SeqId seq, int64_t layer) const {
  ATTN_CHECK(layer >= 0 && layer < config_.layers, "PagedKvCache::table: layer must be in [0, ",
             config_.layers, "); got ", layer);
  return seq_at(seq).tables[static_cast<std::size_t>(layer)];
}

ops::PagedSequence PagedKvCache::attention_sequence(SeqId seq, int64_t layer, int64_t queries) const {
  const auto& t = table(seq, layer);
  const int64_t len = seq_at(seq).length;
  ATTN_CHECK(queries >= 0 && queries <= len, "PagedKvCache::attention_sequence: queries must be in [0, ", len,
             "]; got ", queries);
  ops::PagedSequence p;
  p.blocks = t.data();
  p.table_size = static_cast<int64_t>(t.size());
  p.keys = len;
  p.queries = queries;
  return p;
}

KvAccounting PagedKvCache::accounting() const {
  KvAccounting a;
  const int64_t bb = block_bytes(), tb = token_bytes();
  a.pool = num_blocks_ * bb;
  a.blocks_free = static_cast<int64_t>(free_.size());
  for (int64_t b = 0; b < num_blocks_; ++b)
    if (refs_[static_cast<std::size_t>(b)] > 0) {
      a.reserved += bb;
      a.used += fill_[static_cast<std::size_t>(b)] * tb;
    }
  for (const auto& [id, e] : entries_)
    for (int32_t b : e.blocks)
      if (refs_[static_cast<std::size_t>(b)] == 1) a.cached += bb;
  a.wasted = a.reserved - a.used;
  a.free = a.pool - a.reserved;
  return a;
}

}  // namespace attn::models::runtime
