// Inference-only ops (include/attn/ops/inference.h): validation, then one kernel call.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/encoder_kernels.h"
#include "kernels/cpu/group_decode_attention.h"
#include "kernels/cpu/logits.h"

namespace attn::ops {

namespace {
bool decode_fits(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int64_t>& key_lengths) {
  if (!q.defined() || !k.defined() || !v.defined() || q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return false;
  if (q.dtype() != DType::f32 || k.dtype() != DType::f32 || v.dtype() != DType::f32) return false;
  if (q.stride(3) != 1 || k.stride(3) != 1 || v.stride(3) != 1) return false;
  const int64_t B = q.size(0), H = q.size(1), D = q.size(3), Hkv = k.size(1), L = k.size(2);
  if (q.size(2) != 1 || k.shape() != v.shape() || k.size(0) != B || k.size(3) != D || L < 1 || Hkv < 1 ||
      H % Hkv != 0)
    return false;
  if (!key_lengths.empty()) {
    if (static_cast<int64_t>(key_lengths.size()) != B) return false;
    for (int64_t len : key_lengths)
      if (len < 1 || len > L) return false;
  }
  return true;
}
}  // namespace

bool decode_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                              const std::vector<int64_t>& key_lengths) {
  return decode_fits(q, k, v, key_lengths);
}

Tensor decode_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        const std::vector<int64_t>& key_lengths) {
  if (!decode_fits(q, k, v, key_lengths)) {
    ATTN_CHECK(q.defined() && k.defined() && v.defined(), "decode_attention: q, k and v must be defined");
    ATTN_CHECK(q.rank() == 4 && q.size(2) == 1, "decode_attention: q must be [B, H, 1, D]; got ", q.str());
    ATTN_CHECK(k.rank() == 4 && k.shape() == v.shape() && k.size(0) == q.size(0) && k.size(3) == q.size(3) &&
                   k.size(2) >= 1,
               "decode_attention: k and v must be [", q.size(0), ", Hkv, L >= 1, ", q.size(3), "]; got k ",
               k.str(), ", v ", v.str());
    ATTN_CHECK(q.size(1) % k.size(1) == 0, "decode_attention: H (", q.size(1),
               ") must be a multiple of Hkv (", k.size(1), ")");
    ATTN_CHECK(q.dtype() == DType::f32 && k.dtype() == DType::f32 && v.dtype() == DType::f32,
               "decode_attention: q, k and v must be f32; got ", dtype_name(q.dtype()), ", ",
               dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
    ATTN_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1,
               "decode_attention: q, k and v need unit stride along D; got strides ", q.stride(3), ", ",
               k.stride(3), ", ", v.stride(3));
    ATTN_CHECK(static_cast<int64_t>(key_lengths.size()) == q.size(0), "decode_attention: expected ",
               q.size(0), " key lengths (one per batch row); got ", key_lengths.size());
    for (std::size_t b = 0; b < key_lengths.size(); ++b)
      ATTN_CHECK(key_lengths[b] >= 1 && key_lengths[b] <= k.size(2), "decode_attention: key_lengths[", b,
                 "] must be in [1, ", k.size(2), "]; got ", key_lengths[b]);
  }
  const int64_t B = q.size(0), H = q.size(1), D = q.size(3), L = k.size(2);
  Tensor o = Tensor::empty({B, 1, H * D});
  kernels::cpu::DecodeAttnArgs a;
  a.q = q.data<float>(), a.k = k.data<float>(), a.v = v.data<float>(), a.o = o.data<float>();
  a.lengths = key_lengths.empty() ? nullptr : key_lengths.data();
  a.B = B, a.H = H, a.Hkv = k.size(1), a.L = L, a.D = D;
  a.sqb = q.stride(0), a.sqh = q.stride(1);
  a.skb = k.stride(0), a.skh = k.stride(1), a.skl = k.stride(2);
  a.svb = v.stride(0), a.svh = v.stride(1), a.svl = v.stride(2);
  a.sob = H * D, a.soh = D;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  kernels::cpu::decode_attention(a);
  return o;
}

namespace {
void check_group_args(const char* op, const void* q, int64_t G, const void* k, const void* v, int64_t ldk,
                      int64_t Lk, int64_t D, const float* scratch, const float* out) {
  ATTN_CHECK(q != nullptr && k != nullptr && v != nullptr && scratch != nullptr && out != nullptr, op,
             ": q, k, v, scratch and out must be non-null");
  ATTN_CHECK(G >= 1 && Lk >= 1 && D >= 1, op, ": G, Lk and D must be >= 1; got G ", G, ", Lk ", Lk, ", D ",
             D);
  ATTN_CHECK(ldk >= D, op, ": the key/value row stride ldk must be >= D = ", D, "; got ", ldk);
}
}  // namespace

void group_decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                            int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  check_group_args("group_decode_attention", q, G, k, v, ldk, Lk, D, scratch, out);
  kernels::cpu::group_decode_attention(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}

void group_decode_attention_f16(const float* q, int64_t G, const uint16_t* k, const uint16_t* v, int64_t ldk,
                                int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  check_group_args("group_decode_attention_f16", q, G, k, v, ldk, Lk, D, scratch, out);
  kernels::cpu::group_decode_attention_f16(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}

void store_f16(const float* x, int64_t n, uint16_t* out) {
  ATTN_CHECK(n >= 0 && (n == 0 || (x != nullptr && out != nullptr)),
             "store_f16: n must be >= 0 with non-null x and out; got n ", n);
  kernels::cpu::f32_to_f16(x, n, out);
}

bool encoder_attention_fast(int64_t D) { return kernels::cpu::encoder_attention_fast(D); }

void encoder_attention(const Tensor& qkv, const std::vector<int64_t>& lengths, const Tensor& ctx, float scale,
                       int64_t queries) {
  ATTN_CHECK(qkv.defined() && qkv.rank() == 5 && qkv.size(2) == 3 && qkv.dtype() == DType::f32 &&
                 qkv.is_contiguous(),
             "encoder_attention: qkv must be a contiguous f32 [B, L, 3, H, D]; got ",
             qkv.defined() ? qkv.str() : "none");
  const int64_t B = qkv.size(0), L = qkv.size(1), H = qkv.size(3), D = qkv.size(4);
  ATTN_CHECK(ctx.defined() && ctx.dtype() == DType::f32 && ctx.is_contiguous() && ctx.rank() == 4 &&
                 ctx.size(0) == B && ctx.size(1) == L && ctx.size(2) == H && ctx.size(3) == D,
             "encoder_attention: ctx must be a contiguous f32 [", B, ", ", L, ", ", H, ", ", D, "]; got ",
             ctx.defined() ? ctx.str() : "none");
  ATTN_CHECK(static_cast<int64_t>(lengths.size()) == B, "encoder_attention: expected ", B,
             " lengths (one per sequence); got ", lengths.size());
  for (std::size_t b = 0; b < lengths.size(); ++b)
    ATTN_CHECK(lengths[b] >= 1 && lengths[b] <= L, "encoder_attention: lengths[", b, "] must be in [1, ", L,
               "]; got ", lengths[b]);
  ATTN_CHECK(kernels::cpu::encoder_attention_fast(D), "encoder_attention: no vectorised body for head size ",
             D,
             " on this CPU (needs AVX-512 and D a multiple of 16, or AVX2 and D a multiple of 8); use "
             "attn::attention");
  ATTN_CHECK(queries == -1 || (queries >= 1 && queries <= L), "encoder_attention: queries must be in [1, ", L,
             "] (or -1 for all); got ", queries);
  kernels::cpu::encoder_attention(qkv.data<float>(), lengths.data(), ctx.data<float>(), B, L, H, D, scale,
                                  queries);
}

Tensor encoder_self_attention(const Tensor& qkv, const std::vector<int64_t>& lengths, const Tensor& ctx,
                              double scale, bool capture, int64_t queries) {
  ATTN_CHECK(qkv.defined() && qkv.rank() == 5 && qkv.size(2) == 3 && qkv.dtype() == DType::f32 &&
                 qkv.is_contiguous(),
             "encoder_self_attention: qkv must be a contiguous f32 [B, L, 3, H, D]; got ",
             qkv.defined() ? qkv.str() : "none");
  const int64_t B = qkv.size(0), L = qkv.size(1), H = qkv.size(3), D = qkv.size(4);
  ATTN_CHECK(queries == -1 || (queries >= 1 && queries <= L),
             "encoder_self_attention: queries must be in [1, ", L, "] (or -1 for all); got ", queries);
  const int64_t Lq = queries < 0 ? L : queries;
  if (!capture && encoder_attention_fast(D)) {
    encoder_attention(qkv, lengths, ctx, static_cast<float>(scale), queries);
    return {};
  }
  ATTN_CHECK(ctx.defined() && ctx.dtype() == DType::f32 && ctx.is_contiguous() && ctx.rank() == 4 &&
                 ctx.size(0) == B && ctx.size(1) == L && ctx.size(2) == H && ctx.size(3) == D,
             "encoder_self_attention: ctx must be a contiguous f32 [", B, ", ", L, ", ", H, ", ", D,
             "]; got ", ctx.defined() ? ctx.str() : "none");
  // q, k, v: [B, H, L, D] strided views of qkv; attn::attention checks the lengths.
  AttentionOptions o;
  o.key_lengths = lengths;
  o.capture.enabled = capture;
  o.scale = scale;
  const AttentionResult r =
      attention(qkv.select(2, 0).permute({0, 2, 1, 3}).slice(2, 0, Lq),
                qkv.select(2, 1).permute({0, 2, 1, 3}), qkv.select(2, 2).permute({0, 2, 1, 3}),
                o);  // r.out: [B, H, Lq, D]
  const float* op = r.out.data<float>();
  float* cp = ctx.data<float>();
  parallel_for(B * H, 4, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H;
      for (int64_t l = 0; l < Lq; ++l)
        std::memcpy(cp + ((b * L + l) * H + h) * D, op + ((b * H + h) * Lq + l) * D,
                    static_cast<std::size_t>(D) * sizeof(float));
    }
  });
  return capture ? r.weights : Tensor();
}

namespace {
void check_rows(const char* op, const void* x, int64_t rows, int64_t C) {
  ATTN_CHECK(rows >= 0 && C >= 1, op, ": rows must be >= 0 and C >= 1; got rows ", rows, ", C ", C);
  ATTN_CHECK(rows == 0 || x != nullptr, op, ": the input must be non-null");
}
}  // namespace

void bias_gelu(float* x, const float* bias, int64_t rows, int64_t C) {
  check_rows("bias_gelu", x, rows, C);
  kernels::cpu::bias_gelu(x, bias, rows, C);
}

void residual_layer_norm(float* h, const float* y, const float* bias, const float* w, const float* b,
                         int64_t rows, int64_t C, float eps) {
  check_rows("residual_layer_norm", h, rows, C);
  ATTN_CHECK(w != nullptr && b != nullptr,
             "residual_layer_norm: the norm's weight and bias must be non-null");
  ATTN_CHECK(eps >= 0, "residual_layer_norm: eps must be >= 0; got ", eps);
  kernels::cpu::residual_layer_norm(h, y, bias, w, b, rows, C, eps);
}

double row_logsumexp(const float* x, int64_t V) {
  ATTN_CHECK(x != nullptr && V >= 1, "row_logsumexp: expected a non-null row of V >= 1 logits; got V ", V);
  return kernels::cpu::row_logsumexp(x, V);
}

ArgmaxLse row_argmax_logsumexp(const float* x, int64_t V) {
  ATTN_CHECK(x != nullptr && V >= 1, "row_argmax_logsumexp: expected a non-null row of V >= 1 logits; got V ",
             V);
  const kernels::cpu::ArgmaxLse r = kernels::cpu::row_argmax_logsumexp(x, V);
  return {r.token, r.lse};
}

}  // namespace attn::ops
