// Bad input to the attention operator: every case throws attn::Error whose
// message names what was expected and what was found. Never a crash, never
// silent garbage.
#include <attn/ops/attention.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

using testing::random_uniform;

struct ErrorCase {
  const char* name;
  std::function<void()> call;
  std::vector<std::string> must_mention;  // substrings of the message
};

Tensor Q() { return random_uniform({2, 4, 5, 8}, 1); }
Tensor K() { return random_uniform({2, 2, 6, 8}, 2); }

std::vector<ErrorCase> cases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<ErrorCase> cs;
  cs.push_back({"q_rank",
                [] {
                  attention(random_uniform({4, 5, 8}, 1), K(), K());
                },
                {"rank 4", "got rank 3", "[4, 5, 8]"}});
  cs.push_back({"k_v_shapes_differ",
                [] {
                  attention(Q(), K(), random_uniform({2, 2, 7, 8}, 3));
                },
                {"same shape", "[2, 2, 6, 8]", "[2, 2, 7, 8]"}});
  cs.push_back({"batch_mismatch",
                [] {
                  attention(Q(), random_uniform({3, 2, 6, 8}, 2), random_uniform({3, 2, 6, 8}, 3));
                },
                {"B = 2", "got 3"}});
  cs.push_back({"head_size_mismatch",
                [] {
                  attention(Q(), random_uniform({2, 2, 6, 7}, 2), random_uniform({2, 2, 6, 7}, 3));
                },
                {"D = 8", "got 7"}});
  cs.push_back({"hkv_not_dividing",
                [] {
                  attention(Q(), random_uniform({2, 3, 6, 8}, 2), random_uniform({2, 3, 6, 8}, 3));
                },
                {"divide", "H = 4", "Hkv = 3"}});
  cs.push_back({"d_zero",
                [] {
                  attention(random_uniform({1, 1, 2, 0}, 1), random_uniform({1, 1, 3, 0}, 2),
                            random_uniform({1, 1, 3, 0}, 3));
                },
                {"D must be > 0"}});
  cs.push_back(
      {"dtype_mismatch", [] { attention(Q(), K().to(DType::f64), K()); }, {"one dtype", "f32", "f64"}});
  cs.push_back({"int_dtype",
                [] { attention(Q().to(DType::i32), K().to(DType::i32), K().to(DType::i32)); },
                {"f32, bf16 or f64", "i32"}});
  cs.push_back({"nan_scale",
                [nan] {
                  AttentionOptions o;
                  o.scale = nan;
                  attention(Q(), K(), K(), o);
                },
                {"scale", "nan"}});
  cs.push_back({"inf_scale",
                [] {
                  AttentionOptions o;
                  o.scale = INFINITY;
                  attention(Q(), K(), K(), o);
                },
                {"scale", "inf"}});
  cs.push_back({"negative_softcap",
                [] {
                  AttentionOptions o;
                  o.softcap = -1;
                  attention(Q(), K(), K(), o);
                },
                {"softcap", "-1"}});
  cs.push_back({"dropout_one",
                [] {
                  AttentionOptions o;
                  o.dropout_p = 1.0;
                  attention(Q(), K(), K(), o);
                },
                {"dropout_p", "[0, 1)", "got 1"}});
  cs.push_back({"dropout_nan",
                [nan] {
                  AttentionOptions o;
                  o.dropout_p = nan;
                  attention(Q(), K(), K(), o);
                },
                {"dropout_p", "nan"}});
  cs.push_back({"window_below_minus_one",
                [] {
                  AttentionOptions o;
                  o.window_left = -2;
                  attention(Q(), K(), K(), o);
                },
                {"window", "-2"}});
  cs.push_back({"lengths_count",
                [] {
                  AttentionOptions o;
                  o.key_lengths = {6};
                  attention(Q(), K(), K(), o);
                },
                {"key_lengths", "B = 2", "got 1"}});
  cs.push_back({"length_above_lk",
                [] {
                  AttentionOptions o;
                  o.key_lengths = {6, 7};
                  attention(Q(), K(), K(), o);
                },
                {"key_lengths[1]", "[0, Lk = 6]", "got 7"}});
  cs.push_back({"length_negative",
                [] {
                  AttentionOptions o;
                  o.key_lengths = {-1, 3};
                  attention(Q(), K(), K(), o);
                },
                {"key_lengths[0]", "got -1"}});
  cs.push_back({"allow_not_broadcasting",
                [] {
                  AttentionOptions o;
                  o.allow = Tensor::full({5, 5}, 1, DType::u8);
                  attention(Q(), K(), K(), o);
                },
                {"allow", "[5, 5]", "[2, 4, 5, 6]"}});
  cs.push_back({"allow_wrong_dtype",
                [] {
                  AttentionOptions o;
                  o.allow = Tensor::full({5, 6}, 1);
                  attention(Q(), K(), K(), o);
                },
                {"allow", "u8", "f32"}});
  cs.push_back({"bias_not_broadcasting",
                [] {
                  AttentionOptions o;
                  o.bias = Tensor::zeros({3, 5, 6});
                  attention(Q(), K(), K(), o);
                },
                {"bias", "[3, 5, 6]", "[2, 4, 5, 6]"}});
  cs.push_back({"bias_rank_5",
                [] {
                  AttentionOptions o;
                  o.bias = Tensor::zeros({1, 2, 4, 5, 6});
                  attention(Q(), K(), K(), o);
                },
                {"bias", "rank <= 4"}});
  cs.push_back({"capture_head_out_of_range",
                [] {
                  AttentionOptions o;
                  o.capture.enabled = true;
                  o.capture.heads = {4};
                  attention(Q(), K(), K(), o);
                },
                {"capture head", "[0, 4)", "got 4"}});
  cs.push_back({"fused_backend_f64",
                [] {
                  AttentionOptions o;
                  o.backend = Backend::fused;
                  Tensor q = Q().to(DType::f64), k = K().to(DType::f64);
                  attention(q, k, k, o);
                },
                {"fused", "f64"}});
  cs.push_back({"backward_lse_shape",
                [] {
                  Tensor q = Q(), k = K();
                  AttentionResult r = attention(q, k, k);
                  attention_backward(q, k, k, r.out, Tensor::zeros({2, 4, 4}), r.out);
                },
                {"lse", "[2, 4, 5]", "[2, 4, 4]"}});
  cs.push_back({"backward_dout_shape",
                [] {
                  Tensor q = Q(), k = K();
                  AttentionResult r = attention(q, k, k);
                  attention_backward(q, k, k, r.out, r.lse, Tensor::zeros({2, 4, 5, 7}));
                },
                {"dout", "[2, 4, 5, 8]", "[2, 4, 5, 7]"}});
  cs.push_back({"backward_missing_out",
                [] {
                  Tensor q = Q(), k = K();
                  AttentionResult r = attention(q, k, k);
                  attention_backward(q, k, k, Tensor(), r.lse, r.out);
                },
                {"out", "undefined"}});
  return cs;
}

class AttentionErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(AttentionErrors, ThrowsWithExpectedAndActual) {
  const ErrorCase& c = GetParam();
  try {
    c.call();
    FAIL() << c.name << ": expected attn::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& part : c.must_mention)
      EXPECT_NE(msg.find(part), std::string::npos) << c.name << ": message lacks '" << part << "': " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionErrors, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(AttentionErrors, EmptyKeysGiveFullyMaskedRowsNotAnError) {
  // Lk = 0 is legal: every row is fully masked (output 0, lse -inf).
  Tensor q = random_uniform({1, 1, 3, 4}, 1);
  Tensor k = Tensor::zeros({1, 1, 0, 4});
  AttentionResult r = attention(q, k, k);
  for (double x : r.out.to_vector()) EXPECT_EQ(x, 0.0);
  for (double x : r.lse.to_vector()) EXPECT_EQ(x, -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace attn
