// The padding-mask view of the explainer (StagesRequest::pad, docs/explainer.md): the sentence's row of
// a padded batch — the positions past its length, the scores there set to −∞ before the softmax, and
// the zero weights the attention kernel captured after it — beside the unpadded run's weights.
#include <attn/core/error.h>

#include <algorithm>
#include <cmath>

#include "stages_internal.h"

namespace attn::teach::stages_detail {

json::Value padding_json(const PaddingInputs& p) {
  using json::Value;
  const int64_t N = p.n, L = p.n + p.pad, D = p.q.cols;
  ATTN_CHECK(p.q.rows == L && p.k.rows == L && p.weights.rows == L && p.weights.cols == L &&
                 p.unpadded.rows == N && p.unpadded.cols == N,
             "explain stages: the padded run's buffers do not have ", L, " rows");
  Value j = Value::object();
  j.set("pad", Value::integer(p.pad));
  j.set("n", Value::integer(N));
  j.set("length", Value::integer(L));
  Value lens = Value::array();
  lens.push_back(Value::integer(N));
  lens.push_back(Value::integer(L));
  j.set("batch_lengths", std::move(lens));
  Value toks = Value::array(), other = Value::array();
  for (const std::string& t : p.tokens) toks.push_back(Value::string(t));
  for (const std::string& t : p.other) other.push_back(Value::string(t));
  j.set("tokens", std::move(toks));
  j.set("other", std::move(other));
  // The sentence's real query rows over every key of the padded row.
  Value allow = Value::array(), scaled = Value::array(), masked = Value::array(), w = Value::array(),
        wu = Value::array();
  double diff = 0, pad_max = 0, pad_sum = 0;
  for (int64_t i = 0; i < N; ++i) {
    Value a = Value::array(), s = Value::array(), m = Value::array(), r = Value::array(), u = Value::array();
    for (int64_t c = 0; c < L; ++c) {
      double d = 0;
      for (int64_t e = 0; e < D; ++e) d += p.q(i, e) * p.k(c, e);
      d *= p.scale;
      const bool ok = c < N;
      a.push_back(Value::boolean(ok));
      s.push_back(Value::number(d));
      m.push_back(ok ? Value::number(d) : Value());  // null: −∞
      r.push_back(Value::number(p.weights(i, c)));
      if (ok) {
        u.push_back(Value::number(p.unpadded(i, c)));
        diff = std::max(diff, std::fabs(p.weights(i, c) - p.unpadded(i, c)));
      } else {
        pad_max = std::max(pad_max, std::fabs(p.weights(i, c)));
        pad_sum += p.weights(i, c);
      }
    }
    allow.push_back(std::move(a));
    scaled.push_back(std::move(s));
    masked.push_back(std::move(m));
    w.push_back(std::move(r));
    wu.push_back(std::move(u));
  }
  j.set("allow", std::move(allow));
  j.set("scaled", std::move(scaled));
  j.set("masked", std::move(masked));
  j.set("weights", std::move(w));
  j.set("weights_unpadded", std::move(wu));
  j.set("max_abs_diff_unpadded", Value::number(diff));
  j.set("pad_weight_max", Value::number(pad_max));
  j.set("pad_weight_sum", Value::number(pad_sum));
  return j;
}

}  // namespace attn::teach::stages_detail
