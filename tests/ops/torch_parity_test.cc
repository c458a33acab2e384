// Layer 3 of the test plan: the attention operator against PyTorch.
//
// tests/ops/data/attention_torch.safetensors is written by
// python/reference/attention_fixtures.py (torch's scaled_dot_product_attention
// and autograd, fp32 and fp64, seeded). For every case this test runs
// attn::attention and attn::attention_backward on the same inputs with the
// options recorded in the file's metadata and compares out, lse, dq, dk, dv:
//   * fp32 inputs, automatic and reference backends (and strided views), against
//     torch's fp32 results with tol::kTorchParity: both sides round in fp32 but
//     sum in different orders, so they agree to a few fp32 ulps of the values;
//   * fp64 inputs, reference backend, against torch's fp64 results with
//     tol::kTorchParityF64: same math in double, so any difference larger than
//     accumulated double rounding is a semantic difference.
// Fully masked query rows: attn returns out 0, lse −inf and zero gradients by
// design; those rows are excluded from the comparison with torch and checked
// against the design instead (torch's own values there are printed).
// ParityDetectsBrokenSemantics shows that the fixture fails when attn's
// semantics change (flipped causal alignment, dropped mask, wrong scale...).
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/ops/attention.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;

// The cases the generator writes, in its order (checked against the file).
const char* const kCases[] = {
    "plain",          "causal_top_left", "bool_mask",           "float_mask",       "gqa",
    "custom_scale",   "lq_ne_lk",        "causal_bottom_right", "fully_masked_row", "key_lengths",
    "sliding_window", "combined"};

const io::SafeTensorsFile& fixture() {
  static const io::SafeTensorsFile f =
      io::SafeTensorsFile::open(testing::source_path("tests/ops/data/attention_torch.safetensors"));
  return f;
}

json::Value case_meta(const std::string& name) {
  const auto it = fixture().metadata().find("case/" + name);
  ATTN_CHECK(it != fixture().metadata().end(), "fixture has no metadata for case '", name, "'");
  return json::parse(it->second);
}

// attn options equivalent to the torch call of case `name` (masks loaded from the file).
AttentionOptions case_options(const std::string& name, DType dtype) {
  const json::Value attn = case_meta(name).at("attn");
  AttentionOptions o;
  for (const auto& [key, v] : attn.members()) {
    if (key == "scale") {
      o.scale = v.as_double();
    } else if (key == "causal") {
      o.causal = v.as_bool();
    } else if (key == "align") {
      ATTN_CHECK(v.as_string() == "top_left" || v.as_string() == "bottom_right", "case ", name,
                 ": align must be top_left or bottom_right; got ", v.as_string());
      o.align = v.as_string() == "top_left" ? Align::top_left : Align::bottom_right;
    } else if (key == "window_left") {
      o.window_left = v.as_int64();
    } else if (key == "window_right") {
      o.window_right = v.as_int64();
    } else if (key == "key_lengths") {
      for (const json::Value& x : v.items()) o.key_lengths.push_back(x.as_int64());
    } else {
      ATTN_CHECK(false, "case ", name, ": unknown attn option \"", key, "\" in the fixture");
    }
  }
  if (fixture().contains(name + "/allow")) o.allow = fixture().load(name + "/allow", DType::u8);
  if (fixture().contains(name + "/bias")) o.bias = fixture().load(name + "/bias", dtype);
  return o;
}

Tensor load(const std::string& name, DType dtype) { return fixture().load(name, dtype); }

// Same values, strides of a [B, L, H, D] buffer seen as [B, H, L, D].
Tensor strided(const Tensor& t) { return t.permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3}); }

// Rows (b, h, i) of a [B, H, Lq, ...] tensor whose torch fp64 lse is finite /
// −inf, stacked into [n, X] (X = D, or 1 for lse).
Tensor gather_rows(const Tensor& t, const Tensor& lse64, bool masked) {
  const int64_t B = lse64.size(0), H = lse64.size(1), Lq = lse64.size(2);
  const Tensor t4 = t.rank() == 3 ? t.unsqueeze(3) : t;
  const int64_t X = t4.size(3);
  std::vector<double> vals;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i) {
        if (std::isinf(lse64.at({b, h, i})) != masked) continue;
        for (int64_t x = 0; x < X; ++x) vals.push_back(t4.at({b, h, i, x}));
      }
  return Tensor::from<double>(vals, {static_cast<int64_t>(vals.size()) / X, X});
}

struct ParityCase {
  std::string name;
  Backend backend;
  DType dtype;
  bool strided;
};

std::string param_name(const ParityCase& c) {
  std::string s = c.name;
  s += c.backend == Backend::automatic ? "_auto" : "_ref";
  s += c.dtype == DType::f64 ? "_f64" : "_f32";
  if (c.strided) s += "_strided";
  return s;
}

void PrintTo(const ParityCase& c, std::ostream* os) { *os << param_name(c); }

class TorchParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(TorchParity, ForwardAndBackwardMatchTorch) {
  const ParityCase& c = GetParam();
  const std::string& n = c.name;
  const bool f64 = c.dtype == DType::f64;
  const testing::Tolerance tolerance = f64 ? tol::kTorchParityF64 : tol::kTorchParity;
  const std::string sfx = f64 ? "64" : "";

  Tensor q = load(n + "/q", c.dtype), k = load(n + "/k", c.dtype), v = load(n + "/v", c.dtype);
  Tensor dout = load(n + "/dout", c.dtype);
  if (c.strided) q = strided(q), k = strided(k), v = strided(v), dout = strided(dout);
  AttentionOptions o = case_options(n, c.dtype);
  o.backend = c.backend;
  const AttentionResult r = attention(q, k, v, o);
  const AttentionGrads g = attention_backward(q, k, v, r.out, r.lse, dout, o);

  const Tensor lse64 = load(n + "/lse64", DType::f64);  // −inf marks fully masked rows
  const Tensor t_out = load(n + "/out" + sfx, DType::f64), t_lse = load(n + "/lse" + sfx, DType::f64);
  const Tensor t_dq = load(n + "/dq" + sfx, DType::f64), t_dk = load(n + "/dk" + sfx, DType::f64),
               t_dv = load(n + "/dv" + sfx, DType::f64);

  EXPECT_ALL_CLOSE(gather_rows(r.out, lse64, false), gather_rows(t_out, lse64, false), tolerance) << "out";
  EXPECT_ALL_CLOSE(gather_rows(r.lse, lse64, false), gather_rows(t_lse, lse64, false), tolerance) << "lse";
  EXPECT_ALL_CLOSE(gather_rows(g.dq, lse64, false), gather_rows(t_dq, lse64, false), tolerance) << "dq";

  // Fully masked rows: attn's design, whatever torch gives.
  const int64_t n_masked = case_meta(n).at("fully_masked_rows").as_int64();
  const Tensor masked_out = gather_rows(r.out, lse64, true);
  EXPECT_EQ(masked_out.size(0), n_masked);
  for (double x : masked_out.to_vector()) EXPECT_EQ(x, 0.0) << "out of a fully masked row";
  for (double x : gather_rows(g.dq, lse64, true).to_vector()) EXPECT_EQ(x, 0.0) << "dq of a fully masked row";
  for (double x : gather_rows(r.lse, lse64, true).to_vector())
    EXPECT_EQ(x, -std::numeric_limits<double>::infinity()) << "lse of a fully masked row";

  // dk and dv sum over all query rows. A fully masked row contributes nothing in
  // attn; torch versions that give NaN there would poison these sums.
  bool torch_finite = true;
  for (const Tensor* t : {&t_dk, &t_dv})
    for (double x : t->to_vector()) torch_finite = torch_finite && std::isfinite(x);
  if (torch_finite) {
    EXPECT_ALL_CLOSE(g.dk, t_dk, tolerance) << "dk";
    EXPECT_ALL_CLOSE(g.dv, t_dv, tolerance) << "dv";
  } else {
    ADD_FAILURE() << "torch's dk/dv for case " << n
                  << " contain NaN/Inf; regenerate the fixture with a torch "
                  << "that gives finite gradients for fully masked rows, or compare dk/dv without those rows";
  }
  if (n_masked > 0 && !f64 && c.backend == Backend::reference && !c.strided) {
    std::cout << "[   NOTE   ] torch " << fixture().metadata().at("torch_version")
              << " at the fully masked rows of '" << n << "': out";
    for (double x : gather_rows(t_out, lse64, true).to_vector()) std::cout << " " << x;
    std::cout << " (attn: 0 by design)\n";
  }
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> out;
  for (const char* n : kCases) {
    out.push_back({n, Backend::automatic, DType::f32, false});
    out.push_back({n, Backend::reference, DType::f32, false});
    out.push_back({n, Backend::reference, DType::f64, false});
    out.push_back({n, Backend::automatic, DType::f32, true});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixture, TorchParity, ::testing::ValuesIn(parity_cases()),
                         [](const auto& info) { return param_name(info.param); });

TEST(TorchParityFixture, HoldsExactlyTheListedCases) {
  const json::Value cases = json::parse(fixture().metadata().at("cases"));
  ASSERT_EQ(cases.size(), std::size(kCases)) << json::dump(cases);
  for (std::size_t i = 0; i < std::size(kCases); ++i) EXPECT_EQ(cases.at(i).as_string(), kCases[i]);
  EXPECT_FALSE(fixture().metadata().at("torch_version").empty());
  for (const char* n : kCases)
    for (const char* t :
         {"q", "k", "v", "dout", "out", "dq", "dk", "dv", "lse", "out64", "dq64", "dk64", "dv64", "lse64"})
      EXPECT_TRUE(fixture().contains(std::string(n) + "/" + t)) << n << "/" << t;
  // The fully masked case really has one, and no other case does.
  for (const char* n : kCases)
    EXPECT_EQ(case_meta(n).at("fully_masked_rows").as_int64(), std::string(n) == "fully_masked_row" ? 1 : 0)
        << n;
}

// The fixture must catch broken semantics: each mutation of the options
// changes attn's output away from torch's.
struct Mutation {
  std::string name;
  std::string fixture_case;
  std::function<void(AttentionOptions&)> mutate;
};

void PrintTo(const Mutation& m, std::ostream* os) { *os << m.name; }

class ParityDetectsBrokenSemantics : public ::testing::TestWithParam<Mutation> {};

TEST_P(ParityDetectsBrokenSemantics, MutatedOptionsFailTheComparison) {
  const Mutation& m = GetParam();
  const std::string& n = m.fixture_case;
  const Tensor q = load(n + "/q", DType::f32), k = load(n + "/k", DType::f32), v = load(n + "/v", DType::f32);
  const Tensor t_out = load(n + "/out", DType::f64), lse64 = load(n + "/lse64", DType::f64);
  AttentionOptions o = case_options(n, DType::f32);
  // Unmutated, it passes...
  ASSERT_TRUE(testing::all_close(gather_rows(attention(q, k, v, o).out, lse64, false),
                                 gather_rows(t_out, lse64, false), tol::kTorchParity));
  // ...mutated, it fails.
  m.mutate(o);
  AttentionResult r;
  try {
    r = attention(q, k, v, o);
  } catch (const Error& e) {
    FAIL() << "mutation made the call invalid instead of wrong: " << e.what();
  }
  EXPECT_FALSE(testing::all_close(gather_rows(r.out, lse64, false), gather_rows(t_out, lse64, false),
                                  tol::kTorchParity));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, ParityDetectsBrokenSemantics,
    ::testing::Values(
        Mutation{"CausalTopLeftFlippedToBottomRight", "causal_top_left",
                 [](AttentionOptions& o) { o.align = Align::bottom_right; }},
        Mutation{"CausalBottomRightFlippedToTopLeft", "causal_bottom_right",
                 [](AttentionOptions& o) { o.align = Align::top_left; }},
        Mutation{"CombinedFlippedToTopLeft", "combined",
                 [](AttentionOptions& o) { o.align = Align::top_left; }},
        Mutation{"CausalDropped", "causal_top_left", [](AttentionOptions& o) { o.causal = false; }},
        Mutation{"AllowMaskDropped", "bool_mask", [](AttentionOptions& o) { o.allow = Tensor(); }},
        Mutation{"AllowMaskInverted", "bool_mask",
                 [](AttentionOptions& o) {
                   Tensor inv = o.allow.clone();
                   uint8_t* p = inv.data<uint8_t>();
                   for (int64_t i = 0; i < inv.numel(); ++i) p[i] = p[i] ? 0 : 1;
                   o.allow = inv;
                 }},
        Mutation{"BiasDropped", "float_mask", [](AttentionOptions& o) { o.bias = Tensor(); }},
        Mutation{"BiasNegated", "float_mask",
                 [](AttentionOptions& o) {
                   Tensor neg = o.bias.clone();
                   float* p = neg.data<float>();
                   for (int64_t i = 0; i < neg.numel(); ++i) p[i] = std::isinf(p[i]) ? p[i] : -p[i];
                   o.bias = neg;
                 }},
        Mutation{"DefaultScaleInsteadOfCustom", "custom_scale", [](AttentionOptions& o) { o.scale.reset(); }},
        Mutation{"ScaleOffByOnePercent", "plain",
                 [](AttentionOptions& o) { o.scale = 1.01 / std::sqrt(8.0); }},
        Mutation{"KeyLengthsDropped", "key_lengths", [](AttentionOptions& o) { o.key_lengths.clear(); }},
        Mutation{"KeyLengthOffByOne", "key_lengths", [](AttentionOptions& o) { o.key_lengths[1] += 1; }},
        Mutation{"WindowSidesSwapped", "sliding_window",
                 [](AttentionOptions& o) { std::swap(o.window_left, o.window_right); }}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace attn
