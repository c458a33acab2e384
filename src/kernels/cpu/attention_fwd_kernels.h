// Inner kernels of the fused CPU attention forward, one table per instruction
// set (scalar in attention_fwd.cc, AVX-512 in attention_fwd_avx512.cc, AVX2 in
// attention_fwd_avx2.cc). The driver in attention_fwd.cc owns tiling, masks,
// dropout, threads and split-KV; these kernels only do the dense arithmetic of
// one query tile against one key tile.
//
// Layouts (all scratch buffers are 64-byte aligned, owned by the driver):
//   qt  [D, ldq]   the query tile transposed and multiplied by the softmax scale
//                  (pack_qt); ldq = rows rounded up to 16, padding rows are zero
//   st  [nk, ldq]  S transposed: st[j * ldq + r] is the logit of tile row r
//                  against key j; after `softmax` it holds the unnormalised
//                  probabilities P
//   o   [n, ldo]   unnormalised output rows; ldo = D rounded up to 16
//   m, l, alpha [ldq]  running max, running sum, last rescale factor per row
// Row path (tiles of at most `row_max` query rows, e.g. decode without GQA):
//   qr  [n, ldo]   the query rows, row-major, zero-padded to ldo
//   sr  [n, lds]   S row-major: sr[r * lds + j]; lds = Bc rounded up to 16
// Here keys go in the SIMD lanes, so one query row does not waste 15/16 of
// the work as it would with rows in lanes.
// Keys and values are read in place: row j of the key tile is k + j * skr
// (unit stride in D).
#pragma once

#include <algorithm>
#include <cstdint>

namespace attn::kernels::cpu::fwd {

constexpr int kRowPad = 16;  // ldq is a multiple of this for every ISA

// Rows a kernel may fetch into cache while it streams the key tile: rows [0, rows) of D floats at p with
// row stride `stride` (p null or rows 0: none). A hint only: results never depend on it.
struct RowStream {
  const float* p = nullptr;
  int64_t stride = 0;
  int rows = 0;
};

struct Kernels {
  const char* isa;
  int max_rows;    // Br: query rows per tile (multiple of kRowPad, <= kMaxRows / 2)
  int block_keys;  // Bc: keys per key tile

  // st[j * ldq + r] = scale * sum_d qt[d * ldq + r] * k[j * skr + d]   for j < nk, r < ldq.
  // lim (may be null): [ldq / 16] key limits per vector of 16 rows; entries j >= lim[r / 16] are
  // masked anyway and may be left unchanged (the causal diagonal: work above it is skipped).
  // pf (may be null): two RowStreams (the driver passes the next key tile's keys and this tile's values)
  // whose row j the kernel fetches while it first reads key row j (AVX-512 and AVX2; scalar ignores it).
  // qt: [D, ldq]  k: [nk, D] with row stride skr  st: [nk, ldq]
  void (*scores)(const float* qt, int ldq, const float* k, int64_t skr, int nk, int D, float scale, float* st,
                 const int* lim, const RowStream* pf);

  // Online-softmax update for every row r < ldq over keys j < nk:
  //   m' = max(m, max_j st), alpha = exp(m - m'), st = exp(st - m'), l = alpha·l + sum_j st.
  // A row whose m' is still −inf keeps l = 0 and gets P = 0 (never NaN).
  // st: [nk, ldq]  m, l, alpha: [ldq]
  void (*softmax)(float* st, int ldq, int nk, float* m, float* l, float* alpha);

  // o[r * ldo + d] = alpha[r] · o[r * ldo + d] + sum_j p[j * ldq + r] · v[j * svr + d]
  // for r < n, d < D. Lanes D..ldo-1 of o hold unspecified values.
  // lim (may be null): [n] per row, p[j * ldq + r] = 0 for j >= lim[r], so the sum may stop there.
  // p: [nk, ldq]  v: [nk, D] with row stride svr  o: [n, ldo]  alpha: [n]
  void (*pv)(const float* p, int ldq, const float* v, int64_t svr, int nk, int n, int D, float* o, int ldo,
             const float* alpha, const int* lim);

  // st = cap · tanh(st / cap) for every element of the tile (finite inputs).
  // st: [nk, ldq]
  void (*softcap)(float* st, int ldq, int nk, float cap);

  // st[j * ldq + r] += base[off[r] + j * c] for j < nk, r < ldq (adds a bias read row by row).
  // st: [nk, ldq]  off: [ldq]
  void (*add_rows)(float* st, int ldq, int nk, const float* base, const int32_t* off, int64_t c);

  // Dropout with the reference's keep rule (attention_args.h): for j < nk, r < ldq,
  //   h = mix64(row_key[r] ^ (j0 + j)) >> 32;  p = h >= threshold ? p · inv_keep : 0
  // where row_key[r] holds the first four mixing rounds of dropout_hash for row r.
  // p: [nk, ldq]  row_key: [ldq]
  void (*dropout)(float* p, int ldq, int nk, const uint64_t* row_key, int64_t j0, uint32_t threshold,
                  float inv_keep);

  // ---- row path (null when this ISA has none; then every tile takes the column path) ----
  int row_max;  // tiles with at most this many rows take the row path

  // sr[r * lds + j] = scale * sum_d qr[r * ldo + d] * k[j * skr + d]   for r < n, j < nk.
  // Lanes nk..lds-1 of each sr row are left unchanged.
  // qr: [n, ldo] (zero past D)  k: [nk, D] with row stride skr  sr: [n, lds]
  void (*scores_rows)(const float* qr, int ldo, int n, const float* k, int64_t skr, int nk, int D,
                      float scale, float* sr, int lds);

  // The online-softmax update of `softmax` for rows r < n of the row-major sr (keys j < nk):
  // m, l, alpha as there; sr[r * lds + j] becomes P.
  // sr: [n, lds]  m, l, alpha: [n]
  void (*softmax_rows)(float* sr, int lds, int n, int nk, float* m, float* l, float* alpha);

  // ---- bf16 inputs (null when this ISA has none; the front-end then converts to f32) ----
  // A bf16 pair is a uint32_t: the element with the lower index in the low 16 bits.
  // `scores` on bf16 operands (vdpbf16ps: pairs along D): qt2[p * ldq + r] holds the pair
  // (q[r, 2p], q[r, 2p + 1]) (0 past D); k rows are raw bf16 in place. Products are exact,
  // accumulation in fp32. lim as in `scores`.
  // qt2: [ceil(D/2), ldq]  k: [nk, D] bf16 with row stride skr  st: [nk, ldq]
  void (*scores_bf16)(const uint32_t* qt2, int ldq, const uint16_t* k, int64_t skr, int nk, int D,
                      float scale, float* st, const int* lim);

  // `pv` with P rounded to bf16 (round to nearest even) and V packed in pairs along keys:
  // vp[jp * ldo + d] = (v[2jp, d], v[2jp + 1, d]) (0 past nk and D). pb is scratch for P's pairs; p null:
  // pb already holds them (softmax_pairs).
  // p: [nk, ldq]  vp: [ceil(nk/2), ldo]  o: [n, ldo]  alpha: [n]  pb: [ceil(nk/2), ldq]
  void (*pv_bf16)(const float* p, int ldq, const uint32_t* vp, int nk, int n, int D, float* o, int ldo,
                  const float* alpha, const int* lim, uint32_t* pb);

  // The query tile transposed and scaled: qt[d * ldq + r] = scale · rows[r][d] for r < n, d < D, and 0 for
  // the padding rows n <= r < ldq. The driver folds the softmax scale into Q here and calls `scores`
  // with scale = 1, which skips the multiply.
  // rows: [n] pointers to D contiguous floats  qt: [D, ldq]
  void (*pack_qt)(const float* const* rows, int n, int D, float scale, float* qt, int ldq);

  // bf16 inputs (null where pv_bf16 is): value rows [0, nk) in pairs along keys, the layout of pv_bf16's vp:
  // vp[jp * ldo + d] = (v[2jp, d], v[2jp + 1, d]), 0 past nk and for D <= d < ldo.
  // v: [nk, D] bf16 with row stride svr  vp: [ceil(nk/2), ldo]
  void (*pack_v_bf16)(const uint16_t* v, int64_t svr, int nk, int D, int ldo, uint32_t* vp);

  // bf16 inputs without dropout (null where pv_bf16 is): `softmax` with P written as pv_bf16's pairs
  // pb[jp * ldq + r] = (bf16 P[2jp, r], bf16 P[2jp + 1, r]) (0 past nk) instead of into st, which is only
  // read; pv_bf16 then takes p = null. Same m, l, alpha and pairs as softmax followed by pv_bf16.
  // st: [nk, ldq]  m, l, alpha: [ldq]  pb: [ceil(nk/2), ldq]
  void (*softmax_pairs)(const float* st, int ldq, int nk, float* m, float* l, float* alpha, uint32_t* pb);

  // fp32 (null where the ISA has none: the driver then calls scores and softmax): `scores` with scale 1 and
  // no limits, fused with the online-softmax update against the running maxima m as they are (all finite):
  //   st[j * ldq + r] = P = exp(x), x = sum_d qt[d * ldq + r] · k[j * skr + d] − m[r],
  //   l[r] += sum_j P, alpha[r] = 1, m unchanged,
  // valid while every x <= tau (P <= e^tau: the shift need not be the exact maximum, since out = O / l and
  // lse = m + log l do not depend on it). m all −inf (the first tile: no key seen yet, l and O zero): each
  // row's m is first set to the largest of its logits over the tile's first block of keys (6 or 8), and
  // the rest of the tile is taken against it the same way. Returns false, leaving m, l and alpha as on entry
  // and st unspecified, when some x > tau or is NaN (a new maximum by more than tau, a NaN or infinite
  // logit): the caller then runs scores and softmax on the tile. Saves softmax's separate max and exp
  // passes over S.
  // qt: [D, ldq]  k: [nk, D] with row stride skr  st: [nk, ldq]  m, l, alpha: [ldq]  pf: as in `scores`
  bool (*scores_exp)(const float* qt, int ldq, const float* k, int64_t skr, int nk, int D, float* st,
                     const RowStream* pf, float* m, float* l, float* alpha, float tau);

  // bf16 without dropout (null where the ISA has none): scores_bf16 (no limits) fused the same way, with P
  // written as pv_bf16's pairs pb[jp * ldq + r] (0 past nk), as softmax_pairs writes them; st is not used.
  // Same result contract and fallback as scores_exp.
  // qt2: [ceil(D/2), ldq]  k: [nk, D] bf16 with row stride skr  m, l, alpha: [ldq]  pb: [ceil(nk/2), ldq]
  bool (*scores_exp_pairs)(const uint32_t* qt2, int ldq, const uint16_t* k, int64_t skr, int nk, int D,
                           float scale, float* m, float* l, float* alpha, float tau, uint32_t* pb);
};

namespace {  // internal linkage: each ISA's file has its own copy (no weak symbols across ISA objects)

// Rows j0 .. j0 + KB - 1 of the two prefetch streams of Kernels::scores (pf, may be null), as row pointers;
// the scores kernels call fetch(d) every 16 columns of D while they read their block of KB keys.
template <int KB>
struct BlockPrefetch {
  const float* row[2][KB];
  int n[2] = {0, 0};
  BlockPrefetch(const RowStream* pf, int j0) {
    if (!pf) return;
    for (int s = 0; s < 2; ++s) {
      n[s] = pf[s].p ? std::clamp(pf[s].rows - j0, 0, KB) : 0;
      for (int j = 0; j < n[s]; ++j) row[s][j] = pf[s].p + static_cast<int64_t>(j0 + j) * pf[s].stride;
    }
  }
  // The cache line at column d (a multiple of 16) of every row.
  void fetch(int d) const {
    for (int s = 0; s < 2; ++s)
      for (int j = 0; j < n[s]; ++j) __builtin_prefetch(row[s][j] + d, 0, 3);
  }
};

}  // namespace

constexpr int kMaxRows = 128;  // twice max_rows for long keys (attention_fwd.cc, query_rows)

// The plain-C++ dropout kernel, shared by tables without a faster one (AVX2 has no 64-bit multiply).
void dropout_portable(float* p, int ldq, int nk, const uint64_t* row_key, int64_t j0, uint32_t threshold,
                      float inv_keep);

// The plain-C++ pack_qt, shared by tables without a faster one.
void pack_qt_portable(const float* const* rows, int n, int D, float scale, float* qt, int ldq);

const Kernels& kernels_scalar();
const Kernels& kernels_avx2();
const Kernels& kernels_avx512();

}  // namespace attn::kernels::cpu::fwd
