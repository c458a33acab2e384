// The inference attention entry (include/attn/ops/paged_attention.h): validation, then one kernel.
#include "kernels/cpu/paged_attention.h"

#include <attn/core/error.h>
#include <attn/ops/paged_attention.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace attn::ops {

namespace {
void check_pool(const PagedKv& kv, int64_t H) {
  ATTN_CHECK(kv.data != nullptr && kv.num_blocks >= 1,
             "paged_attention: the pool must be non-null with >= 1 block; got ", kv.num_blocks, " blocks");
  ATTN_CHECK(kv.block_tokens >= 1 && kv.kv_heads >= 1 && kv.head_dim >= 1,
             "paged_attention: block_tokens, kv_heads and head_dim must be >= 1; got ", kv.block_tokens, ", ",
             kv.kv_heads, ", ", kv.head_dim);
  ATTN_CHECK(H >= 1 && H % kv.kv_heads == 0,
             "paged_attention: H must be a positive multiple of Hkv = ", kv.kv_heads, "; got H = ", H);
  if (kv.dtype == KvDtype::q8) {
    const int64_t need = q8_block_bytes(kv.kv_heads, kv.block_tokens, kv.head_dim);
    ATTN_CHECK(kv.block_stride >= need && kv.block_stride % 4 == 0,
               "paged_attention: a q8 pool's block_stride must be a multiple of 4 and >= q8_block_bytes = ",
               need, " bytes; got ", kv.block_stride);
    ATTN_CHECK(reinterpret_cast<uintptr_t>(kv.data) % 4 == 0,
               "paged_attention: a q8 pool must start on a 4-byte boundary (its f32 scales)");
    return;
  }
  const int64_t need = 2 * kv.kv_heads * kv.block_tokens * kv.head_dim;
  ATTN_CHECK(kv.block_stride >= need,
             "paged_attention: block_stride must be >= 2 · Hkv · block_tokens · D = ", need, "; got ",
             kv.block_stride);
}

// The blocks the sequence's rows see must be valid ids.
void check_sequence(const PagedKv& kv, const PagedSequence& s, int64_t i, int64_t window) {
  ATTN_CHECK(s.keys >= 0 && s.queries >= 0 && s.queries <= s.keys, "paged_attention: sequence ", i,
             " must have 0 <= queries <= keys; got queries ", s.queries, ", keys ", s.keys);
  if (s.queries == 0) return;
  const int64_t bt = kv.block_tokens;
  const int64_t first_pos = s.keys - s.queries;
  const int64_t lo = window > 0 && first_pos - window + 1 > 0 ? first_pos - window + 1 : 0;
  const int64_t need = (s.keys + bt - 1) / bt;
  ATTN_CHECK(s.blocks != nullptr && s.table_size >= need, "paged_attention: sequence ", i,
             " needs a table of >= ", need, " blocks for ", s.keys, " keys; got ", s.table_size);
  for (int64_t b = lo / bt; b < need; ++b)
    ATTN_CHECK(s.blocks[b] >= 0 && s.blocks[b] < kv.num_blocks, "paged_attention: sequence ", i, " block ", b,
               " (positions ", b * bt, "..) must be in [0, ", kv.num_blocks, "); got ", s.blocks[b]);
}
}  // namespace

const char* kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::f32:
      return "f32";
    case KvDtype::f16:
      return "f16";
    case KvDtype::q8:
      return "q8";
  }
  return "?";
}

KvDtype parse_kv_dtype(std::string_view name) {
  for (KvDtype d : {KvDtype::f32, KvDtype::f16, KvDtype::q8})
    if (name == kv_dtype_name(d)) return d;
  throw Error(detail::concat("KV cache type must be f32, f16 or q8; got '", name, "'"));
}

int64_t kv_position_bytes(KvDtype dtype, int64_t kv_heads, int64_t head_dim) {
  const int64_t row = dtype == KvDtype::q8 ? head_dim + 4 : head_dim * (dtype == KvDtype::f16 ? 2 : 4);
  return 2 * kv_heads * row;
}

int64_t q8_scales_offset(int64_t kv_heads, int64_t block_tokens, int64_t head_dim) {
  return (2 * kv_heads * block_tokens * head_dim + 63) / 64 * 64;
}

int64_t q8_block_bytes(int64_t kv_heads, int64_t block_tokens, int64_t head_dim) {
  return (q8_scales_offset(kv_heads, block_tokens, head_dim) + 8 * kv_heads * block_tokens + 63) / 64 * 64;
}

void store_q8_row(const float* x, int64_t n, int8_t* q, float* d) {
  float amax = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  if (!finite || amax == 0.0f) {
    std::fill_n(q, n, int8_t{0});
    *d = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float inv = 127.0f / amax;
  for (int64_t i = 0; i < n; ++i)
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
  *d = amax / 127.0f;
}

void paged_attention(const float* q, int64_t H, const PagedKv& kv, std::span<const PagedSequence> seqs,
                     const PagedAttentionOptions& options, float* out, float* lse) {
  check_pool(kv, H);
  ATTN_CHECK(options.window >= 0, "paged_attention: window must be >= 0 (0 = none); got ", options.window);
  ATTN_CHECK(std::isfinite(options.softcap) && options.softcap >= 0,
             "paged_attention: softcap must be finite and >= 0 (0 = none); got ", options.softcap);
  const int64_t g1 = options.kv_head_end ? options.kv_head_end : kv.kv_heads;
  ATTN_CHECK(options.kv_head_begin >= 0 && options.kv_head_begin < g1 && g1 <= kv.kv_heads,
             "paged_attention: kv heads [kv_head_begin, kv_head_end) must be a non-empty range in [0, ",
             kv.kv_heads, "]; got [", options.kv_head_begin, ", ", options.kv_head_end, ")");
  ATTN_CHECK(std::isfinite(options.scale) && options.scale >= 0,
             "paged_attention: scale must be finite and >= 0 (0 = 1/sqrt(D)); got ", options.scale);
  std::vector<kernels::PagedSeqArgs> args(seqs.size());
  int64_t rows = 0;
  bool capture = false;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    check_sequence(kv, seqs[i], static_cast<int64_t>(i), options.window);
    args[i] = {seqs[i].blocks, seqs[i].keys, seqs[i].queries, rows, seqs[i].weights};
    rows += seqs[i].queries;
    capture = capture || seqs[i].weights != nullptr;
  }
  if (rows == 0) return;
  std::vector<float> own_lse;  // the weights are re-derived from the log-sum-exp
  if (capture && lse == nullptr) {
    own_lse.resize(static_cast<std::size_t>(rows * H));
    lse = own_lse.data();
  }
  ATTN_CHECK(q != nullptr && out != nullptr, "paged_attention: q and out must be non-null for ", rows,
             " rows");
  kernels::PagedAttnArgs a;
  a.q = q;
  a.out = out;
  a.lse = lse;
  a.H = H;
  a.Hkv = kv.kv_heads;
  a.D = kv.head_dim;
  a.kv = kv.data;
  a.f16 = kv.dtype == KvDtype::f16;
  a.q8 = kv.dtype == KvDtype::q8;
  if (a.q8) a.q8_scales = q8_scales_offset(kv.kv_heads, kv.block_tokens, kv.head_dim);
  a.block_tokens = kv.block_tokens;
  a.block_stride = kv.block_stride;
  a.seqs = args.data();
  a.n_seqs = static_cast<int64_t>(args.size());
  a.scale = options.scale > 0 ? options.scale : 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
  a.window = options.window;
  a.softcap = options.softcap;
  a.g0 = options.kv_head_begin;
  a.g1 = g1;
  kernels::cpu::paged_attention(a);
}

}  // namespace attn::ops
