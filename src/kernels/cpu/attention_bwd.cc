// Fused CPU attention backward (FlashAttention-2 style): probabilities are
// recomputed tile by tile from the saved log-sum-exp; no Lq × Lk buffer.
//
// Work decomposition. One work item is (b, kv head, a contiguous range of key
// tiles). For each key tile the item keeps dK and dV accumulators in scratch,
// loops over the query heads of the GQA group and over the query tiles that
// can see the tile (causal/window/length intervals; others are skipped), and
// adds each tile's dS·K into dQ.
//
// Why this decomposition: the two-pass alternative (dK/dV by key tiles, then
// dQ by query tiles) recomputes S, P and dP, i.e. 7 instead of 5 tile matmuls
// plus a second exp per element (chosen by this operation count; the tile
// matmuls are ~80% of the time). Here a dQ row is written only by items of its
// own (b, kv head), and dK/dV rows only by items of their own key tile, so
// when there are enough (b, kv head) units for the threads every item covers
// the whole unit and writes dQ, dK and dV directly, with no extra memory and
// no synchronisation.
//
// When B·Hkv is too small to keep the threads busy, each unit is split in one
// of two ways, whichever needs less extra memory:
//  * by key range: split s > 0 accumulates dQ into its own zeroed dQ-sized
//    buffer; the key ranges are balanced by the number of query rows that see
//    them (causal, window, lengths);
//  * by query heads of the GQA group (MQA/GQA with large groups): split s > 0
//    accumulates dK and dV into their own zeroed buffers.
// The buffers are summed in split order afterwards. Every sum therefore has a
// fixed order for a fixed thread count: results are bit-identical from run to
// run, whatever thread picks which item.
//
// Extra memory: O(tile) scratch per thread (thread-local, kept for the next
// call), B·H·Lq floats for rowsum(dO ∘ O), and, when splitting, (splits − 1)
// ≤ threads − 1 buffers capped at 48 MiB in all (see choose_plan).
// Lq = Lk = 65536, H = 1, D = 64 on 2 threads: 16 MiB.
#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/cpu/attention_bwd_tile.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {
namespace {

using TileFn = void (*)(const BwdTile&);
using PackKvFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t, float*, float*);

// ---- instruction set --------------------------------------------------------

// The instruction set comes from kernels/cpu/isa.h (detected once, lowered by
// ATTN_ISA or force_isa). The backward has no AVX2 kernel, so avx2 runs the
// scalar tile.
TileFn choose_tile_fn() {
  const Isa isa = active_isa();
  return isa == Isa::avx512 ? &bwd_tile_avx512 : isa == Isa::avx2 ? &bwd_tile_avx2 : &bwd_tile_scalar;
}
PackKvFn choose_pack_kv_fn() {
  const Isa isa = active_isa();
  return isa == Isa::avx512 ? &bwd_pack_kv_avx512
         : isa == Isa::avx2 ? &bwd_pack_kv_avx2
                            : &bwd_pack_kv_scalar;
}

// ---- scratch ----------------------------------------------------------------

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;

Buffer alloc_floats(int64_t n) {
  float* p =
      static_cast<float*>(::operator new[](sizeof(float) * std::max<int64_t>(n, 16), std::align_val_t(64)));
  return Buffer(p);
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// One thread's scratch, carved out of one aligned allocation.
struct Scratch {
  Buffer mem;
  float *kt, *vt, *kp, *dk, *dv, *q, *dout, *dq, *s, *dp, *lse, *di;
  int32_t *lo, *hi;
  uint64_t* drop_row;

  int64_t D = 0;

  Scratch(int64_t D_, int64_t Dp) : D(D_) {
    const int64_t sizes[] = {D * kBwdBc,  D * kBwdBc,  kBwdBc * Dp, kBwdBc * Dp,     kBwdBc * Dp,
                             kBwdBr * Dp, kBwdBr * Dp, kBwdBr * Dp, kBwdBr * kBwdBc, kBwdBr * kBwdBc,
                             kBwdBr,      kBwdBr,      kBwdBr,      kBwdBr,          2 * kBwdBr};
    int64_t total = 0;
    for (int64_t n : sizes) total += round_up(n, 16);
    mem = alloc_floats(total);
    std::memset(mem.get(), 0, sizeof(float) * total);
    float* p = mem.get();
    float** slots[] = {&kt, &vt, &kp, &dk, &dv, &q, &dout, &dq, &s, &dp, &lse, &di};
    int k = 0;
    for (float** slot : slots) {
      *slot = p;
      p += round_up(sizes[k++], 16);
    }
    lo = reinterpret_cast<int32_t*>(p);
    p += round_up(sizes[k++], 16);
    hi = reinterpret_cast<int32_t*>(p);
    p += round_up(sizes[k++], 16);
    drop_row = reinterpret_cast<uint64_t*>(p);
  }
};

// The calling thread's scratch for head size D, kept between calls (a call at L = 64 does ~50 µs of
// work per (b, head): allocating and clearing 160 KiB per thread and call was ~8% of it).
Scratch& thread_scratch(int64_t D, int64_t Dp) {
  thread_local std::unique_ptr<Scratch> s;
  if (!s || s->D != D) s = std::make_unique<Scratch>(D, Dp);
  return *s;
}

// ---- query rows that can see a key tile ---------------------------------------

// The allowed key interval [lo(i), hi(i)) of MaskArgs::range has lo and hi
// nondecreasing in i, so the rows whose interval meets [k0, k1) are one
// contiguous run [first, last).
struct RowSpan {
  int64_t first, last;
};

RowSpan rows_seeing(const MaskArgs& m, int64_t b, int64_t Lq, int64_t k0, int64_t k1) {
  // first row with hi > k0
  int64_t a = 0, z = Lq;
  while (a < z) {
    const int64_t mid = (a + z) / 2;
    if (m.range(b, mid).hi > k0)
      z = mid;
    else
      a = mid + 1;
  }
  const int64_t first = a;
  // first row with lo >= k1
  a = first, z = Lq;
  while (a < z) {
    const int64_t mid = (a + z) / 2;
    if (m.range(b, mid).lo >= k1)
      z = mid;
    else
      a = mid + 1;
  }
  return {first, std::max(first, a)};
}

// ---- splitting the key range ------------------------------------------------

enum class SplitMode { keys, heads };

struct Plan {
  SplitMode mode = SplitMode::keys;
  int64_t splits = 1;
};

// How to split each (b, kv head) unit. Items = units × splits run on
// `threads` threads with dynamic scheduling; with equal units the makespan is
// ceil(items / threads) / splits units of work. For each mode pick the
// smallest splits minimising that, with splits ≤ threads, splits ≤ key tiles
// (keys) or ≤ group size (heads), and the extra buffers ((splits − 1) × the
// split's buffer size) within a budget; then the mode with the shorter
// makespan, or on a tie the smaller buffers.
Plan choose_plan(int64_t units, int64_t threads, int64_t key_tiles, int64_t group, int64_t dq_floats,
                 int64_t dkv_floats) {
  constexpr double kBudgetBytes = 48.0 * 1024 * 1024;
  const double one_span = static_cast<double>((units + threads - 1) / threads);
  Plan best;
  double best_span = one_span, best_bytes = 0;
  for (SplitMode mode : {SplitMode::keys, SplitMode::heads}) {
    const int64_t max_splits = std::min<int64_t>(threads, mode == SplitMode::keys ? key_tiles : group);
    const double buffer_bytes = static_cast<double>(mode == SplitMode::keys ? dq_floats : dkv_floats) * 4;
    for (int64_t s = 2; s <= max_splits; ++s) {
      const double bytes = static_cast<double>(s - 1) * buffer_bytes;
      if (bytes > kBudgetBytes) break;
      const double span = static_cast<double>((units * s + threads - 1) / threads) / s;
      if (span < best_span - 1e-9 || (span < best_span + 1e-9 && best.splits > 1 && bytes < best_bytes)) {
        best = {mode, s};
        best_span = span;
        best_bytes = bytes;
      }
    }
  }
  return best;
}

// ---- packing ----------------------------------------------------------------

void pack_keys(const AttnArgs<float>& a, int64_t b, int64_t hk, int64_t k0, int64_t nk, int64_t Dp,
               PackKvFn pack_kv, Scratch& w) {
  const int64_t D = a.D;
  if (nk < kBwdBc) {  // columns (kt, vt) past nk are read by the tile's S and dP products: zero
    std::fill(w.kt, w.kt + D * kBwdBc, 0.f);
    std::fill(w.vt, w.vt + D * kBwdBc, 0.f);
  }
  const float* k = a.k + b * a.sk.b + hk * a.sk.h + k0 * a.sk.r;  // k: [nk, D], rows sk.r apart
  const float* v = a.v + b * a.sv.b + hk * a.sv.h + k0 * a.sv.r;  // v: [nk, D], rows sv.r apart
  pack_kv(k, a.sk.r, v, a.sv.r, nk, D, w.kt, w.vt);
  // kp's columns D..Dp stay zero from the scratch's allocation (only columns < D are written).
  for (int64_t j = 0; j < nk; ++j) std::memcpy(w.kp + j * Dp, k + j * a.sk.r, sizeof(float) * D);
}

struct Problem {
  const AttnArgs<float>* a;
  const AttnGradArgs<float>* g;
  const float* di;  // di: [B, H, Lq]
  int64_t Dp;
  uint32_t drop_threshold;
  float drop_scale;
  TileFn tile;
  PackKvFn pack_kv;
};

// Processes query rows [i0, i0 + nr) of head h against the packed key tile
// [k0, k0 + nk); adds the tile's dQ into dq_dst ([Lq, D] of head (b, h)) and its
// dK, dV into dk_acc, dv_acc ([nk, Dp] rows Dp apart).
void run_query_tile(const Problem& P, int64_t b, int64_t h, int64_t i0, int64_t nr, int64_t k0, int64_t nk,
                    Scratch& w, float* dq_dst, float* dk_acc, float* dv_acc) {
  const AttnArgs<float>& a = *P.a;
  const AttnGradArgs<float>& g = *P.g;
  const int64_t D = a.D, Dp = P.Dp;
  const float inf = std::numeric_limits<float>::infinity();
  // With D a multiple of 16 the tile reads q and dout rows in place and adds
  // its dQ straight into dq_dst; otherwise it works on zero-padded copies.
  const bool direct = D == Dp;
  const float* q0 = a.q + b * a.sq.b + h * a.sq.h + i0 * a.sq.r;               // q0: [nr, D] rows sq.r apart
  const float* do0 = g.dout + b * g.sdout.b + h * g.sdout.h + i0 * g.sdout.r;  // do0: [nr, D]
  for (int64_t r = 0; r < nr; ++r) {
    const int64_t i = i0 + r;
    if (!direct) {
      const float* qr = q0 + r * a.sq.r;
      const float* dor = do0 + r * g.sdout.r;
      float* qd = w.q + r * Dp;
      float* dd = w.dout + r * Dp;
      for (int64_t d = 0; d < D; ++d) qd[d] = qr[d], dd[d] = dor[d];
    }
    const float l = g.lse[(b * a.H + h) * a.Lq + i];
    w.lse[r] = l == -inf ? inf : l;
    w.di[r] = P.di[(b * a.H + h) * a.Lq + i];
    const KeyRange kr = a.mask.range(b, i);
    const int64_t lo = std::clamp<int64_t>(kr.lo - k0, 0, nk);
    const int64_t hi = std::clamp<int64_t>(kr.hi - k0, lo, nk);
    w.lo[r] = static_cast<int32_t>(lo);
    w.hi[r] = static_cast<int32_t>(hi);
    if (a.dropout_p > 0) {
      // The state of dropout_hash after mixing in seed, b, h and i.
      uint64_t x = mix64(a.dropout_seed ^ 0x9e3779b97f4a7c15ull);
      x = mix64(x ^ static_cast<uint64_t>(b));
      x = mix64(x ^ static_cast<uint64_t>(h));
      w.drop_row[r] = mix64(x ^ static_cast<uint64_t>(i));
    }
  }
  BwdTile t;
  t.D = D, t.Dp = Dp, t.nk = nk, t.nr = nr;
  t.kt = w.kt, t.vt = w.vt, t.kp = w.kp;
  if (direct) {
    t.q = q0, t.q_rs = a.sq.r;
    t.dout = do0, t.dout_rs = g.sdout.r;
    t.dq = dq_dst + i0 * D, t.dq_rs = D, t.dq_add = true;
  } else {
    t.q = w.q, t.q_rs = Dp;
    t.dout = w.dout, t.dout_rs = Dp;
    t.dq = w.dq, t.dq_rs = Dp, t.dq_add = false;
  }
  t.lse = w.lse, t.di = w.di, t.lo = w.lo, t.hi = w.hi;
  if (a.allow) {
    t.allow = a.allow + b * a.sallow.b + h * a.sallow.h + i0 * a.sallow.r + k0 * a.sallow.c;
    t.allow_r = a.sallow.r, t.allow_c = a.sallow.c;
  }
  if (a.bias) {
    t.bias = a.bias + b * a.sbias.b + h * a.sbias.h + i0 * a.sbias.r + k0 * a.sbias.c;
    t.bias_r = a.sbias.r, t.bias_c = a.sbias.c;
  }
  t.scale = static_cast<float>(a.scale);
  t.softcap = static_cast<float>(a.softcap);
  t.dropout = a.dropout_p > 0;
  t.drop_row = w.drop_row;
  t.k0 = k0;
  t.drop_threshold = P.drop_threshold;
  t.drop_scale = P.drop_scale;
  t.s = w.s, t.dp = w.dp, t.dk = dk_acc, t.dv = dv_acc;
  P.tile(t);
  if (direct) return;
  for (int64_t r = 0; r < nr; ++r) {
    float* dst = dq_dst + (i0 + r) * D;
    const float* src = w.dq + r * Dp;
    for (int64_t d = 0; d < D; ++d) dst[d] += src[d];
  }
}

// rowsum(dO ∘ O) per query row; 0 for fully masked rows.
std::vector<float> row_dot_dout_out(const AttnArgs<float>& a, const AttnGradArgs<float>& g) {
  std::vector<float> di(a.B * a.H * a.Lq);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  parallel_for(a.B * a.H, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / a.H, h = bh % a.H;
      for (int64_t i = 0; i < a.Lq; ++i) {
        float s = 0;
        if (g.lse[bh * a.Lq + i] != neg_inf) {
          const float* o = g.out + b * g.sout.b + h * g.sout.h + i * g.sout.r;      // o: [D]
          const float* d = g.dout + b * g.sdout.b + h * g.sdout.h + i * g.sdout.r;  // d: [D]
          // 16 partial sums (lane l takes x = l mod 16), added in lane order, then the tail: the
          // compiler vectorizes the lanes instead of running one chain of D dependent adds.
          float part[16] = {};
          int64_t x = 0;
          for (; x + 16 <= a.D; x += 16)
            for (int l = 0; l < 16; ++l) part[l] += o[x + l] * d[x + l];
          for (float p : part) s += p;
          for (; x < a.D; ++x) s += o[x] * d[x];
        }
        di[bh * a.Lq + i] = s;
      }
    }
  });
  return di;
}

}  // namespace

// ---- the scalar tile --------------------------------------------------------

void bwd_pack_kv_scalar(const float* k, int64_t k_rs, const float* v, int64_t v_rs, int64_t nk, int64_t D,
                        float* kt, float* vt) {
  for (int64_t j = 0; j < nk; ++j)
    for (int64_t d = 0; d < D; ++d) {
      kt[d * kBwdBc + j] = k[j * k_rs + d];
      vt[d * kBwdBc + j] = v[j * v_rs + d];
    }
}

void bwd_tile_scalar(const BwdTile& t) {
  const int64_t D = t.D, Dp = t.Dp, nk = t.nk, nr = t.nr;
  for (int64_t r = 0; r < nr; ++r) {
    float* srow = t.s + r * kBwdBc;
    float* dprow = t.dp + r * kBwdBc;
    for (int64_t j = 0; j < nk; ++j) srow[j] = dprow[j] = 0.f;
    for (int64_t d = 0; d < D; ++d) {
      const float qd = t.q[r * t.q_rs + d], od = t.dout[r * t.dout_rs + d];
      const float* kt = t.kt + d * kBwdBc;
      const float* vt = t.vt + d * kBwdBc;
      for (int64_t j = 0; j < nk; ++j) {
        srow[j] += qd * kt[j];
        dprow[j] += od * vt[j];
      }
    }
    for (int64_t j = 0; j < nk; ++j) {
      float p = 0.f, ds = 0.f;
      bool ok = j >= t.lo[r] && j < t.hi[r];
      if (ok && t.allow) ok = t.allow[r * t.allow_r + j * t.allow_c] != 0;
      if (ok) {
        const float pre = srow[j] * t.scale;
        float x = pre, th = 0.f;
        if (t.softcap > 0) {
          th = std::tanh(pre / t.softcap);
          x = t.softcap * th;
        }
        if (t.bias) x += t.bias[r * t.bias_r + j * t.bias_c];
        p = std::exp(x - t.lse[r]);  // 0 when x = −inf or the row is fully masked (lse = +inf)
        float keep = 1.f;
        if (t.dropout) {
          const uint32_t hsh =
              static_cast<uint32_t>(mix64(t.drop_row[r] ^ static_cast<uint64_t>(t.k0 + j)) >> 32);
          keep = hsh >= t.drop_threshold ? t.drop_scale : 0.f;
        }
        ds = p * (dprow[j] * keep - t.di[r]);
        if (t.softcap > 0) ds *= 1.f - th * th;
        ds *= t.scale;
        p *= keep;
      }
      srow[j] = p;
      dprow[j] = ds;
    }
  }
  // dv += P'ᵀ dout, dk += dSᵀ q
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t j = 0; j < nk; ++j) {
      const float p = t.s[r * kBwdBc + j], ds = t.dp[r * kBwdBc + j];
      if (p == 0.f && ds == 0.f) continue;
      float* dv = t.dv + j * Dp;
      float* dk = t.dk + j * Dp;
      const float* o = t.dout + r * t.dout_rs;
      const float* q = t.q + r * t.q_rs;
      for (int64_t d = 0; d < D; ++d) {
        dv[d] += p * o[d];
        dk[d] += ds * q[d];
      }
    }
  // dq (+)= dS k
  for (int64_t r = 0; r < nr; ++r) {
    float* dq = t.dq + r * t.dq_rs;
    if (!t.dq_add)
      for (int64_t d = 0; d < D; ++d) dq[d] = 0.f;
    for (int64_t j = 0; j < nk; ++j) {
      const float ds = t.dp[r * kBwdBc + j];
      if (ds == 0.f) continue;
      const float* k = t.kp + j * Dp;
      for (int64_t d = 0; d < D; ++d) dq[d] += ds * k[d];
    }
  }
}

// ---- the driver -------------------------------------------------------------

void attention_backward(const AttnArgs<float>& a, const AttnGradArgs<float>& g) {
  const int64_t B = a.B, H = a.H, Hkv = a.Hkv, Lq = a.Lq, Lk = a.Lk, D = a.D, G = a.group();
  if (B * H * Lq * Lk * D == 0) return;  // outputs are already zero
  const int64_t Dp = round_up(D, 16);
  const std::vector<float> di = row_dot_dout_out(a, g);

  Problem P{&a, &g, di.data(), Dp, 0, 1.f, choose_tile_fn(), choose_pack_kv_fn()};
  if (a.dropout_p > 0) {
    P.drop_threshold = dropout_threshold(a.dropout_p);
    P.drop_scale = static_cast<float>(1.0 / (1.0 - a.dropout_p));
  }

  const int64_t key_tiles = (Lk + kBwdBc - 1) / kBwdBc;
  const int64_t units = B * Hkv;
  const int threads = num_threads();
  const int64_t dq_floats = B * H * Lq * D, dkv_floats = B * Hkv * Lk * D;
  const Plan plan = choose_plan(units, threads, key_tiles, G, dq_floats, 2 * dkv_floats);
  const int64_t splits = plan.splits;
  const bool by_keys = plan.mode == SplitMode::keys;

  // Key-tile ranges per split, per batch (the work profile depends on b
  // through key_lengths): equal shares of the query rows that see them.
  std::vector<int64_t> bounds(B * (splits + 1), 0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t* bd = &bounds[b * (splits + 1)];
    for (int64_t s = 1; s <= splits; ++s) bd[s] = key_tiles;
    if (!by_keys || splits == 1) continue;
    std::vector<double> cum(key_tiles + 1, 0.0);
    for (int64_t kt = 0; kt < key_tiles; ++kt) {
      const int64_t k0 = kt * kBwdBc, k1 = std::min(Lk, k0 + kBwdBc);
      const RowSpan rs = rows_seeing(a.mask, b, Lq, k0, k1);
      cum[kt + 1] = cum[kt] + static_cast<double>(rs.last - rs.first) + 1.0;
    }
    for (int64_t s = 1; s < splits; ++s) {
      const double target = cum[key_tiles] * static_cast<double>(s) / static_cast<double>(splits);
      int64_t kt = bd[s - 1];
      while (kt < key_tiles && cum[kt] < target) ++kt;
      bd[s] = kt;
    }
  }

  // Zeroed partial buffers of splits 1..splits−1: dq [B, H, Lq, D] (keys) or
  // dk and dv [B, Hkv, Lk, D] (heads).
  const int64_t extra_floats = by_keys ? dq_floats : dkv_floats;
  std::vector<Buffer> extra;
  for (int64_t s = 1; s < splits; ++s)
    for (int n = 0; n < (by_keys ? 1 : 2); ++n) {
      extra.push_back(alloc_floats(extra_floats));
      float* p = extra.back().get();
      parallel_for(extra_floats, 1 << 16, [&](int64_t begin, int64_t end, int) {
        std::memset(p + begin, 0, sizeof(float) * (end - begin));
      });
    }

  parallel_for(units * splits, 1, [&](int64_t begin, int64_t end, int) {
    Scratch& w = thread_scratch(D, Dp);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t u = item / splits, s = item % splits;
      const int64_t b = u / Hkv, hk = u % Hkv;
      // Outputs of this item: dq_all [B, H, Lq, D], dk_all and dv_all [B, Hkv, Lk, D].
      float* dq_all = g.dq;
      float* dk_all = g.dk;
      float* dv_all = g.dv;
      int64_t h_begin = hk * G, h_end = (hk + 1) * G;
      if (s > 0 && by_keys) dq_all = extra[s - 1].get();
      if (s > 0 && !by_keys) dk_all = extra[2 * (s - 1)].get(), dv_all = extra[2 * (s - 1) + 1].get();
      if (!by_keys) h_begin = hk * G + s * G / splits, h_end = hk * G + (s + 1) * G / splits;
      const int64_t* bd = &bounds[b * (splits + 1)];
      for (int64_t kt = bd[by_keys ? s : 0]; kt < bd[by_keys ? s + 1 : splits]; ++kt) {
        const int64_t k0 = kt * kBwdBc, nk = std::min(kBwdBc, Lk - k0);
        const RowSpan rs = rows_seeing(a.mask, b, Lq, k0, k0 + nk);
        if (rs.first >= rs.last) continue;  // dK, dV rows stay zero
        pack_keys(a, b, hk, k0, nk, Dp, P.pack_kv, w);
        // The tile's dK and dV rows: with D a multiple of 16 the tiles add straight into the outputs
        // (zero on entry, and written by this item alone), else into scratch copied out afterwards.
        const int64_t row0 = (b * Hkv + hk) * Lk + k0;
        float* dk_acc = D == Dp ? dk_all + row0 * D : w.dk;
        float* dv_acc = D == Dp ? dv_all + row0 * D : w.dv;
        if (D != Dp) {
          std::fill(w.dk, w.dk + kBwdBc * Dp, 0.f);
          std::fill(w.dv, w.dv + kBwdBc * Dp, 0.f);
        }
        for (int64_t h = h_begin; h < h_end; ++h) {
          float* dq_head = dq_all + (b * H + h) * Lq * D;  // dq_head: [Lq, D]
          for (int64_t i0 = rs.first; i0 < rs.last; i0 += kBwdBr)
            run_query_tile(P, b, h, i0, std::min(kBwdBr, rs.last - i0), k0, nk, w, dq_head, dk_acc, dv_acc);
        }
        if (D != Dp)
          for (int64_t j = 0; j < nk; ++j) {
            std::memcpy(dk_all + (row0 + j) * D, w.dk + j * Dp, sizeof(float) * D);
            std::memcpy(dv_all + (row0 + j) * D, w.dv + j * Dp, sizeof(float) * D);
          }
      }
    }
  });

  // Deterministic reduction of the split partials, in split order.
  if (splits > 1) {
    const int64_t per_split = by_keys ? 1 : 2;
    float* dst[2] = {by_keys ? g.dq : g.dk, g.dv};
    for (int64_t n = 0; n < per_split; ++n)
      parallel_for(extra_floats, 1 << 14, [&](int64_t begin, int64_t end, int) {
        for (int64_t s = 1; s < splits; ++s) {
          const float* src = extra[per_split * (s - 1) + n].get();
          for (int64_t x = begin; x < end; ++x) dst[n][x] += src[x];
        }
      });
  }
}

}  // namespace attn::kernels::cpu
