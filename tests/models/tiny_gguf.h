// A minimal GGUF v3 writer for the loaders' bad-file tests (decoder_bad_test.cc):
// f32 tensors only, a one-layer llama file (tiny()), and a scratch folder per process and test.
#pragma once

#include <attn/core/tensor.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace attn::models::tiny_gguf {

// ---- a minimal GGUF v3 writer (f32 tensors only) ----
using Value = std::variant<uint32_t, float, std::string, std::vector<std::string>>;

struct TinyTensor {
  std::string name;
  Shape shape;  // row-major, outermost first
};

struct TinyFile {
  std::vector<std::pair<std::string, Value>> kv;
  std::vector<TinyTensor> tensors;

  void set(const std::string& k, Value v) {
    for (auto& e : kv)
      if (e.first == k) {
        e.second = std::move(v);
        return;
      }
    kv.emplace_back(k, std::move(v));
  }
  void erase(const std::string& k) {
    std::erase_if(kv, [&](const auto& e) { return e.first == k; });
  }
  TinyTensor* tensor(const std::string& n) {
    for (auto& t : tensors)
      if (t.name == n) return &t;
    return nullptr;
  }
  std::string bytes() const {
    std::string o;
    auto u32 = [&](uint32_t v) { o.append(reinterpret_cast<const char*>(&v), 4); };
    auto u64 = [&](uint64_t v) { o.append(reinterpret_cast<const char*>(&v), 8); };
    auto str = [&](const std::string& s) {
      u64(s.size());
      o += s;
    };
    o += "GGUF";
    u32(3);
    u64(tensors.size());
    u64(kv.size());
    for (const auto& [k, v] : kv) {
      str(k);
      if (auto* p = std::get_if<uint32_t>(&v)) {
        u32(4);
        u32(*p);
      } else if (auto* f = std::get_if<float>(&v)) {
        u32(6);
        o.append(reinterpret_cast<const char*>(f), 4);
      } else if (auto* s = std::get_if<std::string>(&v)) {
        u32(8);
        str(*s);
      } else {
        const auto& a = std::get<std::vector<std::string>>(v);
        u32(9);
        u32(8);
        u64(a.size());
        for (const auto& s : a) str(s);
      }
    }
    uint64_t off = 0;
    std::vector<uint64_t> offs;
    for (const auto& t : tensors) {
      str(t.name);
      u32(static_cast<uint32_t>(t.shape.size()));
      for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) u64(*it);
      u32(0);  // F32
      u64(off);
      offs.push_back(off);
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      off += (n * 4 + 31) / 32 * 32;
    }
    while (o.size() % 32) o += '\0';
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      int64_t n = 1;
      for (int64_t d : tensors[i].shape) n *= d;
      for (int64_t j = 0; j < n; ++j) {
        const float v = tensors[i].name.find("norm") != std::string::npos ? 1.0f : u(rng);
        o.append(reinterpret_cast<const char*>(&v), 4);
      }
      while (o.size() % 32) o += '\0';
    }
    return o;
  }
};

// One layer, C = 32, H = 2, Hkv = 1, D = 16, F = 64, V = 6, context 8.
inline TinyFile tiny() {
  TinyFile f;
  f.set("general.architecture", std::string("llama"));
  f.set("llama.context_length", 8u);
  f.set("llama.embedding_length", 32u);
  f.set("llama.block_count", 1u);
  f.set("llama.feed_forward_length", 64u);
  f.set("llama.attention.head_count", 2u);
  f.set("llama.attention.head_count_kv", 1u);
  f.set("llama.rope.freq_base", 10000.0f);
  f.set("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  f.set("tokenizer.ggml.model", std::string("gpt2"));
  f.set("tokenizer.ggml.tokens", std::vector<std::string>{"a", "b", "c", "d", "e", "f"});
  f.set("tokenizer.ggml.merges", std::vector<std::string>{});
  f.set("tokenizer.chat_template",
        std::string("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"));
  f.tensors = {{"token_embd.weight", {6, 32}},         {"output_norm.weight", {32}},
               {"blk.0.attn_norm.weight", {32}},       {"blk.0.attn_q.weight", {32, 32}},
               {"blk.0.attn_k.weight", {16, 32}},      {"blk.0.attn_v.weight", {16, 32}},
               {"blk.0.attn_output.weight", {32, 32}}, {"blk.0.ffn_norm.weight", {32}},
               {"blk.0.ffn_gate.weight", {64, 32}},    {"blk.0.ffn_up.weight", {64, 32}},
               {"blk.0.ffn_down.weight", {32, 64}}};
  return f;
}

// A folder of its own per process and per test (pid + counter), so that runs in parallel (ctest -j,
// two build trees) never write over each other's files; removed with everything in it when the
// test ends.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("attn_llama_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `bytes` to <dir>/attn_llama_<name>.gguf and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (path_ / ("attn_llama_" + name + ".gguf")).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace attn::models::tiny_gguf
