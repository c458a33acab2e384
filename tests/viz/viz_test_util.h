// Helpers of the tests of src/viz: exports written as JSON text by hand (so the
// reader is tested against text it did not write), an exact comparison of two
// exports, a synthetic worked example for the demos, and temporary paths.
#pragma once

#include <attn/viz/export.h>
#include <attn/viz/view.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace attn::viz::testing {

namespace fs = std::filesystem;

inline fs::path temp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) / ("attn_viz_" + std::to_string(::getpid()) + "_" + name);
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

using WeightFn = std::function<double(int l, int h, int i, int j)>;

inline std::string layers_json(int L, int H, int rows, int cols, const WeightFn& w) {
  std::string s = "[";
  for (int l = 0; l < L; ++l) {
    s += l ? ",[[" : "[[";
    for (int h = 0; h < H; ++h) {
      s += h ? ",[" : "[";
      for (int i = 0; i < rows; ++i) {
        s += i ? ",[" : "[";
        for (int j = 0; j < cols; ++j) {
          if (j) s += ',';
          s += num(w(l, h, i, j));
        }
        s += "]";
      }
      s += "]";
    }
    s += "]]";
  }
  return s + "]";
}

inline std::string tokens_json(const std::vector<std::string>& t) {
  std::string s = "[";
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i) s += ',';
    s += quoted(t[i]);
  }
  return s + "]";
}

inline std::string self_export(const std::vector<std::string>& tokens, int L, int H, const WeightFn& w) {
  const int n = static_cast<int>(tokens.size());
  return "{\"tokens\":" + tokens_json(tokens) + ",\"attention\":" + layers_json(L, H, n, n, w) + "}";
}

inline double uniform3(int, int, int, int) { return 1.0 / 3; }

// Every field of two exports, weights compared exactly.
inline void expect_same_export(const Export& a, const Export& b) {
  EXPECT_EQ(a.encoder_decoder, b.encoder_decoder);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.layer_names, b.layer_names);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.encoder_tokens, b.encoder_tokens);
  EXPECT_EQ(a.decoder_tokens, b.decoder_tokens);
  ASSERT_EQ(a.sets.size(), b.sets.size());
  for (std::size_t s = 0; s < a.sets.size(); ++s) {
    const AttentionSet &x = a.sets[s], &y = b.sets[s];
    EXPECT_EQ(x.key, y.key);
    EXPECT_EQ(x.label, y.label);
    EXPECT_EQ(x.row_tokens, y.row_tokens);
    EXPECT_EQ(x.col_tokens, y.col_tokens);
    ASSERT_EQ(x.layers.size(), y.layers.size()) << x.key;
    for (std::size_t l = 0; l < x.layers.size(); ++l) {
      EXPECT_EQ(x.layers[l].heads, y.layers[l].heads);
      EXPECT_EQ(x.layers[l].rows, y.layers[l].rows);
      EXPECT_EQ(x.layers[l].cols, y.layers[l].cols);
      EXPECT_TRUE(x.layers[l].w == y.layers[l].w) << x.key << " layer " << l << ": weights differ";
    }
  }
  ASSERT_EQ(a.attribution.has_value(), b.attribution.has_value());
  if (a.attribution) {
    const Attribution &x = *a.attribution, &y = *b.attribution;
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.target, y.target);
    EXPECT_EQ(x.baseline, y.baseline);
    EXPECT_EQ(x.steps, y.steps);
    EXPECT_EQ(x.has_completeness, y.has_completeness);
    EXPECT_EQ(x.completeness_error, y.completeness_error);
    EXPECT_TRUE(x.methods == y.methods);
  }
}

// What every producer's export must satisfy: save_export writes JSON that the one
// reader accepts and that gives back exactly the export that was written.
inline void expect_round_trip(const Export& e) {
  const fs::path p = temp_path("round_trip.json");
  save_export(p.string(), e);
  std::ifstream f(p, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text, export_json(e) + "\n");
  const Export back = parse_export(text);
  expect_same_export(back, e);
  EXPECT_EQ(export_json(back), export_json(e));
  fs::remove(p);
}

// A worked example shaped like `attn explain`'s (7 words, d_model 8), with
// deterministic values: not explain's numbers (those are checked through the
// binary in tests/cli), but the same shapes and the same rules.
inline DemoExample synthetic_example() {
  DemoExample ex;
  ex.words = {"今天", "下雨", "，", "我", "没", "带", "伞"};
  ex.gloss = "It rained today, and I did not bring an umbrella.";
  ex.d_model = 8;
  for (int i = 0; i < 7; ++i)
    for (int d = 0; d < 8; ++d) ex.x.push_back(((i * 5 + d * 3) % 11 - 5) / 5.0);
  auto proj = [](int salt) {
    std::vector<double> w;
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) w.push_back(((r * 7 + c * salt + salt) % 9 - 4) / 6.0);
    return w;
  };
  ex.wq = proj(2);
  ex.wk = proj(3);
  ex.wv = proj(4);
  ex.wo = proj(5);
  return ex;
}

inline DemoTranslation synthetic_translation() {
  DemoTranslation t;
  t.source = synthetic_example();
  for (std::size_t i = 0; i < t.target.size(); ++i)
    for (int d = 0; d < 8; ++d) t.target_x.push_back(((static_cast<int>(i) * 3 + d * 7) % 13 - 6) / 6.0);
  return t;
}

}  // namespace attn::viz::testing
