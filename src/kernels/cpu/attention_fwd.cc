// Fused CPU attention forward: the driver (tiling, masks, dropout, threads,
// split-KV, weight capture) and the scalar kernels. The SIMD kernels live in
// attention_fwd_avx512.cc and attention_fwd_avx2.cc; isa.cc picks one at run
// time.
//
// Work item = one query tile (up to Br rows that share a batch b and a kv head
// hk) against one range of keys. For each key tile of Bc keys:
//   S = Q·Kᵀ·scale (+softcap, +bias, masks)       kernels.scores + apply_masks
//   m' = max(m, rowmax S), P = exp(S − m'),        kernels.softmax
//   l = l·e^(m−m') + rowsum P
//   O = O·e^(m−m') + P·V   (P after dropout)       kernels.pv
// and at the end out = O / l, lse = m + log l. Key tiles outside the union of
// the rows' allowed intervals (MaskArgs::range) are skipped; per-element
// masking runs only on tiles that are not entirely allowed for every row.
// Inside a key tile that crosses the causal diagonal, the scores above it and
// their P·V terms are skipped (per 16-row vector / per row block).
//
// Variants of the same loop:
//  * row path: tiles of at most Kernels::row_max rows (decode without GQA) keep
//    S row-major with keys in the SIMD lanes (scores_rows, softmax_rows);
//  * bf16 inputs (AttnArgs::bf16, AVX512_BF16): Q packed in pairs along D, V
//    packed in pairs along keys (once per call when several query tiles read
//    the same values, else per key tile), P rounded to bf16 for P·V
//    (scores_bf16, pv_bf16); softmax, masks and dropout stay fp32.
// fp32 Q is transposed and multiplied by the scale once per tile (pack_qt), so
// the scores kernels do no multiply. The rows a tile touches once (the next
// tile's queries, this tile's outputs) are prefetched a share per key tile; the
// next key tile's keys and this tile's values are fetched by the fp32 scores
// kernel while it reads the keys (Kernels::scores' pf). bf16 without dropout:
// the softmax writes P as bf16 pairs directly (softmax_pairs).
// Tiles without masks, the range's first (the kernel seeds the maxima from its
// first block of keys) or once every row has a finite running maximum, take P
// straight from the scores microkernel's epilogue, exponentiated against those
// maxima (Kernels::scores_exp, scores_exp_pairs: no separate max and exp passes
// over S); a logit more than kExpHeadroom above its row's maximum, or NaN, sends
// the tile back to scores + softmax.
#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/attention_fwd_kernels.h"
#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {
namespace {

using fwd::Kernels;
using fwd::kMaxRows;
using fwd::kRowPad;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// 64-byte aligned float buffer.
struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedBuf = std::unique_ptr<float[], AlignedFree>;
AlignedBuf aligned_floats(int64_t n) {
  return AlignedBuf(
      static_cast<float*>(::operator new[](sizeof(float) * std::max<int64_t>(n, 16), std::align_val_t(64))));
}

// The rows of one query tile: they share batch b and kv head hk.
struct TileRows {
  int64_t b = 0, hk = 0;
  int n = 0;
  int64_t h[kMaxRows], i[kMaxRows];
};

// Per-thread scratch, O(tile) in size.
struct Scratch {
  AlignedBuf qt;           // [D, ldq]
  AlignedBuf st;           // [Bc, ldq]
  AlignedBuf o;            // [Br, ldo]
  AlignedBuf m, l, alpha;  // [Br]
  AlignedBuf qr;           // [row_max, ldo]  row path: query rows, row-major
  AlignedBuf sr;           // [row_max, lds]  row path: S row-major
  AlignedBuf vp, pb;       // bf16 inputs: V pairs [ceil(Bc/2), ldo], P pairs [ceil(Bc/2), Br] (uint32_t)
  int64_t lo[kMaxRows], hi[kMaxRows];
  uint64_t drop_key[kMaxRows];
  int vlim[kMaxRows / kRowPad], rlim[kMaxRows];  // per-vector and per-row key limits in a key tile
  // Cache lines to fetch while this tile runs (plan_prefetch), a few per key tile: a burst of hundreds of
  // prefetches that miss to memory fills the load queue and stalls the kernels behind it.
  struct Line {
    const char* p;
    bool write;
  };
  std::vector<Line> pf;
  std::size_t pf_next = 0;

  // Issues the next share of the planned prefetches, `shares_left` (>= 1) shares before the end.
  void prefetch_share(int64_t shares_left) {
    const std::size_t left = pf.size() - pf_next;
    const std::size_t e =
        pf_next + (left + static_cast<std::size_t>(shares_left) - 1) / static_cast<std::size_t>(shares_left);
    for (std::size_t x = pf_next; x < e; ++x) {
      if (pf[x].write)
        __builtin_prefetch(pf[x].p, 1, 2);
      else
        __builtin_prefetch(pf[x].p, 0, 2);
    }
    pf_next = e;
  }
};

struct Geometry {
  int Br, Bc, ldo;
  int Bcr;  // keys per key tile on the row path
  int lds;  // row stride of the row path's S: Bcr rounded up to 16
};

// One query row against a long key run (decode without GQA) streams K and V from memory: longer key
// tiles on the row path switch between the two streams less often (measured ~5-10% faster per thread
// at Lk = 32768 with 1024 keys than with 96). Tiles of several rows keep Bc, so a key tile's values stay
// in L1 across the rows' P·V.
constexpr int kRowStreamKeys = 1024;

// Query rows per tile. Every query tile streams the keys and values of its kv head once; when those no
// longer fit in L2 they come from L3 tile after tile, and twice the rows per tile halves that traffic.
// Measured on fp32, 1 thread (AMD EPYC Zen 4, 1 MiB L2): N = 8192, D = 128 81-84 -> 87-88 GFLOP/s; at D = 64
// and at N = 512 the larger tile (S no longer in L1) was 1-5% slower, hence the bounds.
constexpr int64_t kLongKvBytes = int64_t{2} << 20;  // fp32 K + V of one kv head
int query_rows(const AttnArgs<float>& a, const Kernels& kn) {
  const bool long_kv = !a.bf16 && a.D >= 96 && a.Lk * a.D * 8 > kLongKvBytes;
  return long_kv && 2 * kn.max_rows <= kMaxRows ? 2 * kn.max_rows : kn.max_rows;
}

// Tiles with few query rows take the row path (keys in SIMD lanes) when the ISA has one (AVX-512: up to 8
// rows, where it beats the 16-row column kernels; measured with attention_bench --decode-lq).
bool use_rows(const AttnArgs<float>& a, const Kernels& kn, const TileRows& t) {
  return !a.bf16 && kn.scores_rows && t.n <= kn.row_max;
}

uint32_t* as_u32(const AlignedBuf& b) { return reinterpret_cast<uint32_t*>(b.get()); }

// bf16 inputs: the tile's query rows in pairs along D, transposed: qt2[p * ldq + r] =
// (q[r, 2p], q[r, 2p + 1]), 0 past D and for padding rows.
void pack_q_bf16(const AttnArgs<float>& a, const TileRows& t, int ldq, uint32_t* qt2) {
  const int64_t np = (a.D + 1) / 2;
  for (int r = 0; r < t.n; ++r) {
    const uint16_t* q = a.q16 + t.b * a.sq.b + t.h[r] * a.sq.h + t.i[r] * a.sq.r;
    for (int64_t p = 0; p < np; ++p) {
      const uint32_t hi = 2 * p + 1 < a.D ? q[2 * p + 1] : 0u;
      qt2[p * ldq + r] = q[2 * p] | (hi << 16);
    }
  }
  for (int64_t p = 0; p < np; ++p)
    for (int r = t.n; r < ldq; ++r) qt2[p * ldq + r] = 0u;
}

// Row pointer helpers (strides in elements).
inline const float* q_row(const AttnArgs<float>& a, int64_t b, int64_t h, int64_t i) {
  return a.q + b * a.sq.b + h * a.sq.h + i * a.sq.r;
}

// Zero-padded transposed copy of the tile's query rows, multiplied by the softmax scale:
// qt[d * ldq + r] = scale · q[r, d]. The scores kernels then run with scale = 1 (no multiply).
void pack_q(const AttnArgs<float>& a, const Kernels& kn, const TileRows& t, int ldq, float* qt) {
  const float* rows[kMaxRows];
  for (int r = 0; r < t.n; ++r) rows[r] = q_row(a, t.b, t.h[r], t.i[r]);
  kn.pack_qt(rows, t.n, static_cast<int>(a.D), static_cast<float>(a.scale), qt, ldq);
}

// Row-major, zero-padded copy of the tile's query rows for the row path: qr[r * ldo + d].
void pack_q_rows(const AttnArgs<float>& a, const TileRows& t, int ldo, float* qr) {
  for (int r = 0; r < t.n; ++r) {
    const float* q = q_row(a, t.b, t.h[r], t.i[r]);
    float* dst = qr + static_cast<int64_t>(r) * ldo;
    std::memcpy(dst, q, sizeof(float) * a.D);
    std::fill(dst + a.D, dst + ldo, 0.f);
  }
}

// Allowed key interval of every row; returns the union [ulo, uhi) (empty when
// every row is fully masked) and, through max_lo/min_hi, the interval allowed
// for all rows at once.
struct Union {
  int64_t lo, hi, max_lo, min_hi;
};
Union row_ranges(const AttnArgs<float>& a, const TileRows& t, Scratch& s) {
  Union u{a.Lk, 0, 0, a.Lk};
  for (int r = 0; r < t.n; ++r) {
    const KeyRange kr = a.mask.range(t.b, t.i[r]);
    s.lo[r] = kr.lo, s.hi[r] = kr.hi;
    if (kr.lo < kr.hi) u.lo = std::min(u.lo, kr.lo), u.hi = std::max(u.hi, kr.hi);
    u.max_lo = std::max(u.max_lo, kr.lo);
    u.min_hi = std::min(u.min_hi, kr.hi);
  }
  if (u.lo >= u.hi) u.lo = u.hi = 0;
  return u;
}

bool has_elementwise(const AttnArgs<float>& a) { return a.allow || a.bias || a.softcap > 0; }

// Soft-capping, masks and bias on the logits st[jj * ldq + r] of keys j0 + jj, in that order
// (the reference: s = c·tanh(s/c) + bias, −inf where masked). Each step is its own lean pass.
void apply_masks(const AttnArgs<float>& a, const Kernels& kn, const TileRows& t, const Scratch& s, int64_t j0,
                 int nk, int ldq, float* st) {
  if (a.softcap > 0) kn.softcap(st, ldq, nk, static_cast<float>(a.softcap));
  // The structural interval: only the keys outside [lo, hi) are touched (the diagonal of causal).
  for (int r = 0; r < t.n; ++r) {
    const int64_t lo = std::clamp<int64_t>(s.lo[r] - j0, 0, nk),
                  hi = std::clamp<int64_t>(s.hi[r] - j0, lo, nk);
    for (int64_t jj = 0; jj < lo; ++jj) st[jj * ldq + r] = kNegInf;
    for (int64_t jj = hi; jj < nk; ++jj) st[jj * ldq + r] = kNegInf;
  }
  if (a.bias) {
    const int64_t c = a.sbias.c;
    // Offsets of every row's bias from row 0's: one gather per key and 16 rows when they fit in int32.
    const float* base = a.bias + t.b * a.sbias.b + t.h[0] * a.sbias.h + t.i[0] * a.sbias.r + j0 * c;
    int32_t off[kMaxRows];
    bool fits = (static_cast<int64_t>(nk) - 1) * std::abs(c) < (int64_t{1} << 30);
    for (int r = 0; r < ldq; ++r) {
      const int64_t o = r < t.n ? (t.h[r] - t.h[0]) * a.sbias.h + (t.i[r] - t.i[0]) * a.sbias.r : 0;
      fits = fits && std::abs(o) < (int64_t{1} << 30);
      off[r] = static_cast<int32_t>(o);
    }
    if (fits) {
      kn.add_rows(st, ldq, nk, base, off, c);
    } else {
      for (int r = 0; r < t.n; ++r) {
        const float* bias = base + off[r];
        for (int jj = 0; jj < nk; ++jj) st[jj * ldq + r] += bias[jj * c];
      }
    }
  }
  if (a.allow) {
    const int64_t c = a.sallow.c;
    for (int r = 0; r < t.n; ++r) {
      const uint8_t* allow = a.allow + t.b * a.sallow.b + t.h[r] * a.sallow.h + t.i[r] * a.sallow.r + j0 * c;
      for (int jj = 0; jj < nk; ++jj)
        if (!allow[jj * c]) st[jj * ldq + r] = kNegInf;
    }
  }
}

// apply_masks for the row path's row-major tile sr[r * lds + jj] (same order of steps).
void apply_masks_rows(const AttnArgs<float>& a, const Kernels& kn, const TileRows& t, const Scratch& s,
                      int64_t j0, int nk, int lds, float* sr) {
  if (a.softcap > 0) kn.softcap(sr, lds, t.n, static_cast<float>(a.softcap));  // whole rows, lds % 16 == 0
  for (int r = 0; r < t.n; ++r) {
    float* row = sr + static_cast<int64_t>(r) * lds;
    const int64_t lo = std::clamp<int64_t>(s.lo[r] - j0, 0, nk),
                  hi = std::clamp<int64_t>(s.hi[r] - j0, lo, nk);
    std::fill(row, row + lo, kNegInf);
    std::fill(row + hi, row + nk, kNegInf);
    if (a.bias) {
      const int64_t c = a.sbias.c;
      const float* bias = a.bias + t.b * a.sbias.b + t.h[r] * a.sbias.h + t.i[r] * a.sbias.r + j0 * c;
      for (int jj = 0; jj < nk; ++jj) row[jj] += bias[jj * c];
    }
    if (a.allow) {
      const int64_t c = a.sallow.c;
      const uint8_t* allow = a.allow + t.b * a.sallow.b + t.h[r] * a.sallow.h + t.i[r] * a.sallow.r + j0 * c;
      for (int jj = 0; jj < nk; ++jj)
        if (!allow[jj * c]) row[jj] = kNegInf;
    }
  }
}

// How far a logit may pass its row's running maximum and still be exponentiated against it by
// Kernels::scores_exp: P <= e^8 ~ 3e3, far from fp32 overflow even summed over 2^31 keys.
constexpr float kExpHeadroom = 8.f;

// Every row's running maximum is finite (after a NaN or infinite logit, or a first tile that the plain
// softmax took, a row may have none: its tiles are left to the plain softmax).
bool finite_max(const float* m, int ldq) {
  bool ok = true;
  for (int r = 0; r < ldq; ++r) ok &= std::abs(m[r]) <= std::numeric_limits<float>::max();
  return ok;
}

uint64_t dropout_row_key(uint64_t seed, int64_t b, int64_t h, int64_t i) {
  uint64_t x = mix64(seed ^ 0x9e3779b97f4a7c15ull);
  x = mix64(x ^ static_cast<uint64_t>(b));
  x = mix64(x ^ static_cast<uint64_t>(h));
  return mix64(x ^ static_cast<uint64_t>(i));
}

// Runs the online softmax of tile `t` over keys [kb, ke); leaves m, l and the
// unnormalised O in the scratch. Q must already be packed.
// vpack (bf16 inputs, may be null): the values of this tile's (b, hk) already in pairs along keys, pair jp
// = keys (2jp, 2jp + 1) (the layout of Kernels::pack_v_bf16 over all Lk keys).
void run_tile(const AttnArgs<float>& a, const Kernels& kn, const Geometry& g, const TileRows& t,
              const Union& u, int64_t kb, int64_t ke, Scratch& s, const uint32_t* vpack) {
  const int ldq = static_cast<int>(round_up(t.n, kRowPad));
  for (int r = 0; r < ldq; ++r) s.m[r] = kNegInf, s.l[r] = 0.f;
  for (int64_t x = 0; x < static_cast<int64_t>(t.n) * g.ldo; ++x) s.o[x] = 0.f;
  const bool elementwise = has_elementwise(a);
  const bool dropout = a.dropout_p > 0;
  const float scale = static_cast<float>(a.scale);
  const float* kbase = a.bf16 ? nullptr : a.k + t.b * a.sk.b + t.hk * a.sk.h;
  const float* vbase = a.bf16 ? nullptr : a.v + t.b * a.sv.b + t.hk * a.sv.h;
  const uint16_t* kbase16 = a.bf16 ? a.k16 + t.b * a.sk.b + t.hk * a.sk.h : nullptr;
  const uint16_t* vbase16 = a.bf16 ? a.v16 + t.b * a.sv.b + t.hk * a.sv.h : nullptr;
  if (use_rows(a, kn, t)) {
    s.prefetch_share(1);
    // Row path: S row-major, one row of keys per query row; P·V row by row (ldq = 1 views a P row as a
    // one-row column tile).
    for (int64_t j0 = kb; j0 < ke; j0 += g.Bcr) {
      const int nk = static_cast<int>(std::min<int64_t>(g.Bcr, ke - j0));
      float* sr = s.sr.get();
      kn.scores_rows(s.qr.get(), g.ldo, t.n, kbase + j0 * a.sk.r, a.sk.r, nk, static_cast<int>(a.D), scale,
                     sr, g.lds);
      const bool inside = j0 >= u.max_lo && j0 + nk <= u.min_hi;
      if (!inside || elementwise) apply_masks_rows(a, kn, t, s, j0, nk, g.lds, sr);
      kn.softmax_rows(sr, g.lds, t.n, nk, s.m.get(), s.l.get(), s.alpha.get());
      for (int r = 0; r < t.n; ++r) {
        float* p = sr + static_cast<int64_t>(r) * g.lds;
        if (dropout)
          fwd::dropout_portable(p, 1, nk, s.drop_key + r, j0, dropout_threshold(a.dropout_p),
                                static_cast<float>(1.0 / (1.0 - a.dropout_p)));
        kn.pv(p, 1, vbase + j0 * a.sv.r, a.sv.r, nk, 1, static_cast<int>(a.D),
              s.o.get() + static_cast<int64_t>(r) * g.ldo, g.ldo, s.alpha.get() + r, nullptr);
      }
    }
    return;
  }
  for (int64_t j0 = kb; j0 < ke; j0 += g.Bc) {
    const int nk = static_cast<int>(std::min<int64_t>(g.Bc, ke - j0));
    const int64_t tiles_left = ceil_div(ke - j0, g.Bc);  // three shares per key tile, between the kernels
    s.prefetch_share(3 * tiles_left);
    const bool inside = j0 >= u.max_lo && j0 + nk <= u.min_hi;
    // Tiles crossing some row's upper key bound (the causal diagonal): per 16-row vector and per
    // row, the keys past the bound are masked, so their scores and P·V terms are skipped.
    const int* vlim = nullptr;
    const int* rlim = nullptr;
    if (j0 + nk > u.min_hi) {
      bool some = false;
      for (int v = 0; v < ldq / 16; ++v) s.vlim[v] = 0;
      for (int r = 0; r < t.n; ++r) {
        s.rlim[r] = static_cast<int>(std::clamp<int64_t>(s.hi[r] - j0, 0, nk));
        s.vlim[r / 16] = std::max(s.vlim[r / 16], s.rlim[r]);
      }
      for (int v = 0; v < ldq / 16; ++v) some = some || s.vlim[v] < nk;
      if (some) vlim = s.vlim, rlim = s.rlim;
    }
    // fp32 tiles without masks, the range's first (m all −inf: the kernel seeds the maxima from the tile's
    // first block of keys) or once every row has a finite running maximum: P straight from the scores
    // microkernel against those maxima (Kernels::scores_exp), unless some logit passes its row's maximum by
    // more than kExpHeadroom (then the tile is redone below, scores then softmax).
    // bf16 without dropout: the same with P written as bf16 pairs (Kernels::scores_exp_pairs).
    bool fused = false;
    const bool fusable = inside && !elementwise && !vlim && (j0 == kb || finite_max(s.m.get(), ldq));
    if (a.bf16 && !dropout && kn.scores_exp_pairs && fusable)
      fused = kn.scores_exp_pairs(as_u32(s.qt), ldq, kbase16 + j0 * a.sk.r, a.sk.r, nk, static_cast<int>(a.D),
                                  scale, s.m.get(), s.l.get(), s.alpha.get(), kExpHeadroom, as_u32(s.pb));
    if (!a.bf16 && kn.scores_exp && fusable) {
      const int64_t j1 = j0 + nk < ke ? j0 + nk : kb;
      const fwd::RowStream pf[2] = {
          {kbase + j1 * a.sk.r, a.sk.r, static_cast<int>(std::min<int64_t>(g.Bc, ke - j1))},
          {vbase + j0 * a.sv.r, a.sv.r, nk}};
      fused = kn.scores_exp(s.qt.get(), ldq, kbase + j0 * a.sk.r, a.sk.r, nk, static_cast<int>(a.D),
                            s.st.get(), pf, s.m.get(), s.l.get(), s.alpha.get(), kExpHeadroom);
    }
    if (fused)
      s.prefetch_share(3 * tiles_left - 1);
    else if (a.bf16)
      kn.scores_bf16(as_u32(s.qt), ldq, kbase16 + j0 * a.sk.r, a.sk.r, nk, static_cast<int>(a.D), scale,
                     s.st.get(), vlim);
    else {
      // While the scores read this tile's keys, fetch the next key tile's keys (the first tile of the range
      // after the last: the next query tile of this head most often reads it next) and this tile's values:
      // when one head's K and V exceed L2 they come from L3 or memory, and the hardware prefetchers alone
      // left the kernels waiting (N = 8192, D = 128, 1 thread: 83-87 -> 95-99 GFLOP/s).
      const int64_t j1 = j0 + nk < ke ? j0 + nk : kb;
      const fwd::RowStream pf[2] = {
          {kbase + j1 * a.sk.r, a.sk.r, static_cast<int>(std::min<int64_t>(g.Bc, ke - j1))},
          {vbase + j0 * a.sv.r, a.sv.r, nk}};
      kn.scores(s.qt.get(), ldq, kbase + j0 * a.sk.r, a.sk.r, nk, static_cast<int>(a.D), 1.f, s.st.get(),
                vlim, pf);  // the scale is in qt (pack_q)
    }
    // bf16 without dropout: P goes straight to bf16 pairs, pv_bf16 reads them (p = null).
    const bool pairs = a.bf16 && !dropout && kn.softmax_pairs;
    if (!fused) {
      if (!inside || elementwise) apply_masks(a, kn, t, s, j0, nk, ldq, s.st.get());
      s.prefetch_share(3 * tiles_left - 1);
      if (pairs)
        kn.softmax_pairs(s.st.get(), ldq, nk, s.m.get(), s.l.get(), s.alpha.get(), as_u32(s.pb));
      else
        kn.softmax(s.st.get(), ldq, nk, s.m.get(), s.l.get(), s.alpha.get());
    }
    // Dropout after the statistics update, so l stays pre-dropout.
    if (dropout)
      kn.dropout(s.st.get(), ldq, nk, s.drop_key, j0, dropout_threshold(a.dropout_p),
                 static_cast<float>(1.0 / (1.0 - a.dropout_p)));
    s.prefetch_share(3 * tiles_left - 2);
    if (a.bf16) {
      // The pre-packed pairs serve when the tile's pairs are theirs: an even first key, and an even count
      // unless the tile ends at Lk (the last pair is then padded with 0 in both).
      const uint32_t* vp = as_u32(s.vp);
      if (vpack && j0 % 2 == 0 && (nk % 2 == 0 || j0 + nk == a.Lk))
        vp = vpack + j0 / 2 * g.ldo;
      else
        kn.pack_v_bf16(vbase16 + j0 * a.sv.r, a.sv.r, nk, static_cast<int>(a.D), g.ldo, as_u32(s.vp));
      kn.pv_bf16(pairs || fused ? nullptr : s.st.get(), ldq, vp, nk, t.n, static_cast<int>(a.D), s.o.get(),
                 g.ldo, s.alpha.get(), rlim, as_u32(s.pb));
    } else {
      kn.pv(s.st.get(), ldq, vbase + j0 * a.sv.r, a.sv.r, nk, t.n, static_cast<int>(a.D), s.o.get(), g.ldo,
            s.alpha.get(), rlim);
    }
  }
}

// out = O / l, lse = m + log l (0 and −inf for a fully masked row; NaN when a
// logit was NaN: l is then NaN and the row stays NaN, as in the reference).
void finalize(const AttnArgs<float>& a, const TileRows& t, const Geometry& g, const Scratch& s,
              AttnOut<float>& o) {
  for (int r = 0; r < t.n; ++r) {
    const int64_t row = (t.b * a.H + t.h[r]) * a.Lq + t.i[r];
    float* out = o.out_row(t.b, t.h[r], t.i[r], a.H, a.Lq, a.D);
    const float l = s.l[r];
    const float inv = l == 0.f ? 0.f : 1.f / l;  // NaN l: NaN row
    const float* orow = s.o.get() + static_cast<int64_t>(r) * g.ldo;
    for (int64_t d = 0; d < a.D; ++d) out[d] = orow[d] * inv;
    o.lse[row] = l == 0.f ? kNegInf : s.m[r] + std::log(l);
  }
}

// How query rows are grouped into tiles. Normally a tile holds up to Br
// consecutive rows of one head. With GQA and short queries (decode), the rows
// of all query heads of one kv head share tiles, so K and V are read once per
// group and the SIMD lanes are filled.
struct Tiling {
  bool pack_group = false;
  int64_t rows_per_seq = 0;  // rows enumerated per (b, seq): seq = kv head if packed, else query head
  int64_t seqs_per_b = 0;
  int64_t tiles_per_seq = 0;
  int64_t num_tiles = 0;
  int Br = 0;

  Tiling(const AttnArgs<float>& a, int Br_) : Br(Br_) {
    pack_group = a.group() > 1 && a.Lq < Br;
    rows_per_seq = pack_group ? a.group() * a.Lq : a.Lq;
    seqs_per_b = pack_group ? a.Hkv : a.H;
    tiles_per_seq = ceil_div(rows_per_seq, Br);
    num_tiles = a.B * seqs_per_b * tiles_per_seq;
  }

  void rows(const AttnArgs<float>& a, int64_t tile, TileRows& t) const {
    t.b = tile / (seqs_per_b * tiles_per_seq);
    const int64_t rem = tile % (seqs_per_b * tiles_per_seq);
    const int64_t seq = rem / tiles_per_seq;
    const int64_t x0 = (rem % tiles_per_seq) * Br;
    const int64_t x1 = std::min(rows_per_seq, x0 + Br);
    t.n = static_cast<int>(x1 - x0);
    t.hk = pack_group ? seq : seq / a.group();
    for (int r = 0; r < t.n; ++r) {
      const int64_t x = x0 + r;
      t.h[r] = pack_group ? seq * a.group() + x / a.Lq : seq;
      t.i[r] = pack_group ? x % a.Lq : x;
    }
  }
};

// Plans the loads, into L2, of what the next work item reads first and this one writes last: the query rows
// of tile `next` (-1: none) and, when `out` is set, this tile's output rows. Both are touched once per
// tile, so without this every tile begins and ends with cache misses to memory (the keys and values are
// re-read tile after tile and stay cached). run_tile issues them a share per key tile.
void plan_prefetch(const AttnArgs<float>& a, const AttnOut<float>& o, const Tiling& tiling, const TileRows& t,
                   int64_t next, bool out, Scratch& s) {
  constexpr int64_t kLine = 64;
  s.pf.clear();
  s.pf_next = 0;
  if (out)
    for (int r = 0; r < t.n; ++r) {
      const char* p = reinterpret_cast<const char*>(o.out_row(t.b, t.h[r], t.i[r], a.H, a.Lq, a.D));
      for (int64_t x = 0; x < a.D * static_cast<int64_t>(sizeof(float)); x += kLine)
        s.pf.push_back({p + x, true});
    }
  if (next < 0) return;
  TileRows nt;
  tiling.rows(a, next, nt);
  const int64_t esize = a.bf16 ? 2 : 4;
  for (int r = 0; r < nt.n; ++r) {
    const int64_t off = nt.b * a.sq.b + nt.h[r] * a.sq.h + nt.i[r] * a.sq.r;
    const char* p =
        a.bf16 ? reinterpret_cast<const char*>(a.q16 + off) : reinterpret_cast<const char*>(a.q + off);
    for (int64_t x = 0; x < a.D * esize; x += kLine) s.pf.push_back({p + x, false});
  }
}

const Kernels& select_kernels() {
  switch (active_isa()) {
    case Isa::avx512:
      return fwd::kernels_avx512();
    case Isa::avx2:
      return fwd::kernels_avx2();
    case Isa::scalar:
      break;
  }
  return fwd::kernels_scalar();
}

std::vector<Scratch> make_scratch(int threads, const AttnArgs<float>& a, const Kernels& kn,
                                  const Geometry& g) {
  std::vector<Scratch> sc(threads);
  for (Scratch& s : sc) {
    s.qt = aligned_floats(a.D * g.Br);
    s.st = aligned_floats(static_cast<int64_t>(g.Bc) * g.Br);
    s.o = aligned_floats(static_cast<int64_t>(g.Br) * g.ldo);
    s.m = aligned_floats(g.Br);
    s.l = aligned_floats(g.Br);
    s.alpha = aligned_floats(g.Br);
    if (a.bf16) {
      s.vp = aligned_floats(static_cast<int64_t>(g.Bc + 1) / 2 * g.ldo);
      s.pb = aligned_floats(static_cast<int64_t>(g.Bc + 1) / 2 * g.Br);
    }
    if (kn.scores_rows) {
      s.qr = aligned_floats(static_cast<int64_t>(kn.row_max) * g.ldo);
      s.sr = aligned_floats(static_cast<int64_t>(kn.row_max) * g.lds);
      // Padding lanes of S rows stay finite (soft-capping runs over whole rows).
      std::fill(s.sr.get(), s.sr.get() + static_cast<int64_t>(kn.row_max) * g.lds, 0.f);
    }
  }
  return sc;
}

// Split-KV: a query tile's key range is cut into this many chunks when there
// are too few tiles to keep every thread busy (decode: Lq = 1, long Lk).
constexpr int64_t kMinSplitKeys = 256;
int64_t choose_splits(int64_t num_tiles, int64_t Lk, int threads) {
  if (threads <= 1 || num_tiles >= 2 * threads) return 1;
  const int64_t by_keys = std::max<int64_t>(1, Lk / kMinSplitKeys);
  return std::min(by_keys, ceil_div(4 * threads, num_tiles));
}

// Second pass for AttnOut::weights: exp(S − lse) for the requested rows only,
// re-derived tile by tile.
void capture_weights(const AttnArgs<float>& a, AttnOut<float>& o, const Kernels& kn, const Geometry& g,
                     std::vector<Scratch>& scratch) {
  const int64_t nb = static_cast<int64_t>(o.cap_b.size()), nh = static_cast<int64_t>(o.cap_h.size()),
                nr = static_cast<int64_t>(o.cap_i.size());
  if (nb * nh * nr == 0) return;
  const int64_t tiles_per_head = ceil_div(nr, g.Br);
  parallel_for(nb * nh * tiles_per_head, 1, [&](int64_t begin, int64_t end, int tid) {
    Scratch& s = scratch[tid];
    TileRows t;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t ib = item / (nh * tiles_per_head), ih = (item / tiles_per_head) % nh;
      const int64_t r0 = (item % tiles_per_head) * g.Br;
      t.b = o.cap_b[ib];
      const int64_t h = o.cap_h[ih];
      t.hk = h / a.group();
      t.n = static_cast<int>(std::min<int64_t>(g.Br, nr - r0));
      for (int r = 0; r < t.n; ++r) t.h[r] = h, t.i[r] = o.cap_i[r0 + r];
      const int ldq = static_cast<int>(round_up(t.n, kRowPad));
      pack_q(a, kn, t, ldq, s.qt.get());
      const Union u = row_ranges(a, t, s);
      const float* kbase = a.k + t.b * a.sk.b + t.hk * a.sk.h;
      float* w0 = o.weights + ((ib * nh + ih) * nr + r0) * a.Lk;
      for (int r = 0; r < t.n; ++r) {  // zeros outside the union of allowed keys
        float* w = w0 + r * a.Lk;
        std::fill(w, w + u.lo, 0.f);
        std::fill(w + u.hi, w + a.Lk, 0.f);
      }
      for (int64_t j0 = u.lo; j0 < u.hi; j0 += g.Bc) {
        const int nk = static_cast<int>(std::min<int64_t>(g.Bc, u.hi - j0));
        kn.scores(s.qt.get(), ldq, kbase + j0 * a.sk.r, a.sk.r, nk, static_cast<int>(a.D), 1.f, s.st.get(),
                  nullptr, nullptr);  // the scale is in qt (pack_q)
        apply_masks(a, kn, t, s, j0, nk, ldq, s.st.get());
        for (int r = 0; r < t.n; ++r) {
          const float lse = o.lse[(t.b * a.H + h) * a.Lq + t.i[r]];
          float* w = w0 + r * a.Lk + j0;
          for (int jj = 0; jj < nk; ++jj) w[jj] = lse == kNegInf ? 0.f : std::exp(s.st[jj * ldq + r] - lse);
        }
      }
    }
  });
}

}  // namespace

bool fused_bf16_available() {
  __builtin_cpu_init();
  return select_kernels().scores_bf16 != nullptr && __builtin_cpu_supports("avx512bf16");
}

void attention_forward(const AttnArgs<float>& a, AttnOut<float>& o) {
  ATTN_CHECK(a.D > 0 && a.Hkv > 0 && a.H % a.Hkv == 0,
             "fused attention: expected D > 0 and Hkv dividing H; got D = ", a.D, ", H = ", a.H,
             ", Hkv = ", a.Hkv);
  ATTN_CHECK(a.Lq * a.D == 0 || a.sq.c == 1, "fused attention: q must have unit stride in D; got ", a.sq.c);
  ATTN_CHECK(a.Lk * a.D == 0 || (a.sk.c == 1 && a.sv.c == 1),
             "fused attention: k and v must have unit stride in D; got ", a.sk.c, " and ", a.sv.c);
  if (a.B * a.H * a.Lq == 0) return;
  const Kernels& kn = select_kernels();
  ATTN_CHECK(!a.bf16 || (kn.scores_bf16 && a.q16 && a.k16 && a.v16 && !o.weights),
             "fused attention: bf16 inputs need the AVX512_BF16 kernels and no weight capture; got isa ",
             kn.isa, ", capture ", o.weights != nullptr);
  const int Bcr = a.Lq == 1 && a.group() == 1 ? std::max(kn.block_keys, kRowStreamKeys) : kn.block_keys;
  const Geometry g{query_rows(a, kn), kn.block_keys, static_cast<int>(round_up(a.D, 16)), Bcr,
                   static_cast<int>(round_up(Bcr, 16))};
  const Tiling tiling(a, g.Br);
  const int threads = num_threads();
  std::vector<Scratch> scratch = make_scratch(threads, a, kn, g);

  const int64_t nsplit = choose_splits(tiling.num_tiles, a.Lk, threads);
  // Split-KV partials: per (tile, split) and row, m, l and the unnormalised O.
  const int64_t part_row = a.D + 2;
  std::vector<float> partial;
  if (nsplit > 1) partial.resize(static_cast<std::size_t>(tiling.num_tiles * nsplit * g.Br * part_row));

  // bf16 inputs: when several query tiles read the same values, pair them along keys once here rather
  // than once per tile and key tile (Kernels::pack_v_bf16; as much memory as V).
  const int64_t vpairs = (a.Lk + 1) / 2;
  const int64_t v_readers = tiling.tiles_per_seq * (tiling.pack_group ? 1 : a.group());
  AlignedBuf vpack;
  if (a.bf16 && v_readers > 1 && a.Lk > 0) {
    vpack = aligned_floats(a.B * a.Hkv * vpairs * g.ldo);
    constexpr int64_t kChunkPairs = 256;
    const int64_t chunks = ceil_div(vpairs, kChunkPairs);
    parallel_for(a.B * a.Hkv * chunks, 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t seq = item / chunks, c = item % chunks;
        const int64_t b = seq / a.Hkv, hk = seq % a.Hkv;
        const int64_t j0 = 2 * c * kChunkPairs;
        const int nk = static_cast<int>(std::min<int64_t>(2 * kChunkPairs, a.Lk - j0));
        kn.pack_v_bf16(a.v16 + b * a.sv.b + hk * a.sv.h + j0 * a.sv.r, a.sv.r, nk, static_cast<int>(a.D),
                       g.ldo, as_u32(vpack) + (seq * vpairs + j0 / 2) * g.ldo);
      }
    });
  }
  const int64_t total = tiling.num_tiles * nsplit;
  parallel_for(total, 1, [&](int64_t begin, int64_t end, int tid) {
    Scratch& s = scratch[tid];
    TileRows t;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t tile = item / nsplit, split = item % nsplit;
      tiling.rows(a, tile, t);
      const int ldq = static_cast<int>(round_up(t.n, kRowPad));
      const Union u = row_ranges(a, t, s);
      if (a.dropout_p > 0)
        for (int r = 0; r < ldq; ++r)  // padding rows get any valid key; their P is never used
          s.drop_key[r] =
              dropout_row_key(a.dropout_seed, t.b, t.h[std::min(r, t.n - 1)], t.i[std::min(r, t.n - 1)]);
      int64_t kb = u.lo, ke = u.hi;
      if (nsplit > 1) {
        const int64_t chunk = round_up(ceil_div(u.hi - u.lo, nsplit), g.Bc);
        kb = std::min(u.hi, u.lo + split * chunk);
        ke = std::min(u.hi, kb + chunk);
      }
      if (kb < ke) {
        if (use_rows(a, kn, t))
          pack_q_rows(a, t, g.ldo, s.qr.get());
        else if (a.bf16)
          pack_q_bf16(a, t, ldq, as_u32(s.qt));
        else
          pack_q(a, kn, t, ldq, s.qt.get());
      }
      // Work items are handed out one at a time; with `threads` threads this one's next is most often
      // `threads` items ahead.
      const int64_t next = item + threads;
      plan_prefetch(a, o, tiling, t, next < total && next / nsplit != tile ? next / nsplit : -1, nsplit == 1,
                    s);
      run_tile(a, kn, g, t, u, kb, ke, s,
               vpack ? as_u32(vpack) + (t.b * a.Hkv + t.hk) * vpairs * g.ldo : nullptr);
      if (nsplit == 1) {
        finalize(a, t, g, s, o);
        continue;
      }
      float* p = partial.data() + item * g.Br * part_row;
      for (int r = 0; r < t.n; ++r, p += part_row) {
        p[0] = s.m[r], p[1] = s.l[r];
        std::memcpy(p + 2, s.o.get() + static_cast<int64_t>(r) * g.ldo, sizeof(float) * a.D);
      }
    }
  });

  if (nsplit > 1) {
    // Combine the partials of each row: M = max m_s, L = sum l_s e^(m_s − M), O = sum O_s e^(m_s − M) / L.
    parallel_for(tiling.num_tiles, 1, [&](int64_t begin, int64_t end, int) {
      TileRows t;
      for (int64_t tile = begin; tile < end; ++tile) {
        tiling.rows(a, tile, t);
        for (int r = 0; r < t.n; ++r) {
          const int64_t row = (t.b * a.H + t.h[r]) * a.Lq + t.i[r];
          auto part = [&](int64_t sp) {
            return partial.data() + ((tile * nsplit + sp) * g.Br + r) * part_row;
          };
          float M = kNegInf;
          bool nan = false;  // a NaN logit in any split makes the row NaN, as in the reference
          for (int64_t sp = 0; sp < nsplit; ++sp) {
            M = std::max(M, part(sp)[0]);
            nan |= std::isnan(part(sp)[0]) || std::isnan(part(sp)[1]);
          }
          float* out = o.out_row(t.b, t.h[r], t.i[r], a.H, a.Lq, a.D);
          if (nan) {
            std::fill(out, out + a.D, std::numeric_limits<float>::quiet_NaN());
            o.lse[row] = std::numeric_limits<float>::quiet_NaN();
            continue;
          }
          std::fill(out, out + a.D, 0.f);
          if (M == kNegInf) {
            o.lse[row] = kNegInf;
            continue;
          }
          float L = 0;
          for (int64_t sp = 0; sp < nsplit; ++sp) {
            const float* p = part(sp);
            if (p[1] == 0.f) continue;
            const float c = std::exp(p[0] - M);
            L += p[1] * c;
            for (int64_t d = 0; d < a.D; ++d) out[d] += c * p[2 + d];
          }
          const float inv = 1.f / L;
          for (int64_t d = 0; d < a.D; ++d) out[d] *= inv;
          o.lse[row] = M + std::log(L);
        }
      }
    });
  }

  if (o.weights) capture_weights(a, o, kn, g, scratch);
}

// ---- scalar kernels: the portable fallback, plain loops ---------------------
namespace fwd {
namespace {

void scores_scalar(const float* qt, int ldq, const float* k, int64_t skr, int nk, int D, float scale,
                   float* st, const int* /*lim: computes every entry*/,
                   const RowStream* /*pf: no prefetch*/) {
  for (int j = 0; j < nk; ++j) {
    float* s = st + static_cast<int64_t>(j) * ldq;
    const float* kr = k + j * skr;
    for (int r = 0; r < ldq; ++r) s[r] = 0.f;
    for (int d = 0; d < D; ++d) {
      const float kd = kr[d];
      const float* q = qt + static_cast<int64_t>(d) * ldq;
      for (int r = 0; r < ldq; ++r) s[r] += q[r] * kd;
    }
    for (int r = 0; r < ldq; ++r) s[r] *= scale;
  }
}

void softmax_scalar(float* st, int ldq, int nk, float* m, float* l, float* alpha) {
  for (int r = 0; r < ldq; ++r) {
    float mx = m[r];
    for (int j = 0; j < nk; ++j) mx = std::max(mx, st[static_cast<int64_t>(j) * ldq + r]);
    const float ms = mx == kNegInf ? 0.f : mx;
    const float al = std::exp(m[r] - ms);
    float sum = 0.f;
    for (int j = 0; j < nk; ++j) {
      float& x = st[static_cast<int64_t>(j) * ldq + r];
      x = std::exp(x - ms);
      sum += x;
    }
    l[r] = l[r] * al + sum;
    m[r] = mx;
    alpha[r] = al;
  }
}

void softcap_scalar(float* st, int ldq, int nk, float cap) {
  for (int64_t x = 0; x < static_cast<int64_t>(nk) * ldq; ++x) st[x] = cap * std::tanh(st[x] / cap);
}

void add_rows_scalar(float* st, int ldq, int nk, const float* base, const int32_t* off, int64_t c) {
  for (int j = 0; j < nk; ++j)
    for (int r = 0; r < ldq; ++r) st[static_cast<int64_t>(j) * ldq + r] += base[off[r] + j * c];
}

void pv_scalar(const float* p, int ldq, const float* v, int64_t svr, int nk, int n, int D, float* o, int ldo,
               const float* alpha, const int* /*lim: zero P is skipped anyway*/) {
  for (int r = 0; r < n; ++r) {
    float* orow = o + static_cast<int64_t>(r) * ldo;
    for (int d = 0; d < D; ++d) orow[d] *= alpha[r];
    for (int j = 0; j < nk; ++j) {
      const float pj = p[static_cast<int64_t>(j) * ldq + r];
      if (pj == 0.f) continue;
      const float* vr = v + j * svr;
      for (int d = 0; d < D; ++d) orow[d] += pj * vr[d];
    }
  }
}

void scores_rows_scalar(const float* qr, int ldo, int n, const float* k, int64_t skr, int nk, int D,
                        float scale, float* sr, int lds) {
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < nk; ++j) {
      const float* q = qr + static_cast<int64_t>(r) * ldo;
      const float* kr = k + j * skr;
      float acc = 0.f;
      for (int d = 0; d < D; ++d) acc += q[d] * kr[d];
      sr[static_cast<int64_t>(r) * lds + j] = acc * scale;
    }
}

void softmax_rows_scalar(float* sr, int lds, int n, int nk, float* m, float* l, float* alpha) {
  // Row r of the row-major tile is a column-layout tile with a single row (ldq = 1).
  for (int r = 0; r < n; ++r)
    softmax_scalar(sr + static_cast<int64_t>(r) * lds, 1, nk, m + r, l + r, alpha + r);
}

}  // namespace

void pack_qt_portable(const float* const* rows, int n, int D, float scale, float* qt, int ldq) {
  for (int r = 0; r < n; ++r)
    for (int d = 0; d < D; ++d) qt[static_cast<int64_t>(d) * ldq + r] = scale * rows[r][d];
  for (int d = 0; d < D; ++d)
    for (int r = n; r < ldq; ++r) qt[static_cast<int64_t>(d) * ldq + r] = 0.f;
}

void dropout_portable(float* p, int ldq, int nk, const uint64_t* row_key, int64_t j0, uint32_t threshold,
                      float inv_keep) {
  for (int j = 0; j < nk; ++j)
    for (int r = 0; r < ldq; ++r) {
      float& x = p[static_cast<int64_t>(j) * ldq + r];
      const uint32_t h = static_cast<uint32_t>(mix64(row_key[r] ^ static_cast<uint64_t>(j0 + j)) >> 32);
      x = h >= threshold ? x * inv_keep : 0.f;
    }
}

const Kernels& kernels_scalar() {
  static const Kernels k{"scalar",
                         32,
                         64,
                         scores_scalar,
                         softmax_scalar,
                         pv_scalar,
                         softcap_scalar,
                         add_rows_scalar,
                         dropout_portable,
                         4,
                         scores_rows_scalar,
                         softmax_rows_scalar,
                         nullptr,
                         nullptr,
                         pack_qt_portable,
                         nullptr,
                         nullptr,
                         nullptr,
                         nullptr};
  return k;
}

}  // namespace fwd
}  // namespace attn::kernels::cpu
