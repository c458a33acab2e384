// The runtime's decoder (models/runtime/decoder.h) on one tiny random checkpoint per architecture,
// against transformers (python/reference/make_decoder_arch_files.py wrote the GGUF files and the
// reference outputs): logits at every position and every layer's attention weights of the F32 files,
// greedy tokens through the scheduler, the Q8_0 files within the rounding of 8-bit weights, batch
// invariance (a sequence gets the same logits, bit for bit, whoever shares its steps), and the
// loader's errors.
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/runtime/decoder.h>
#include <attn/models/runtime/scheduler.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "testing/testing.h"

namespace attn::models::runtime {
namespace {

const std::vector<std::string> kArchs = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"};

std::string data(const std::string& name) {
  return testing::source_path("tests/models/data/decoders/" + name);
}

struct Reference {
  std::vector<int32_t> ids, greedy;
  std::vector<float> logits;                   // [N, V]
  std::vector<std::vector<float>> attentions;  // per layer [H, N, N]
};

Reference reference(const std::string& arch) {
  const json::Value v = json::parse(io::read_file(data(arch + ".json"), "reference"));
  Reference r;
  for (std::size_t i = 0; i < v.at("ids").size(); ++i)
    r.ids.push_back(static_cast<int32_t>(v.at("ids").at(i).as_int64()));
  for (std::size_t i = 0; i < v.at("greedy").size(); ++i)
    r.greedy.push_back(static_cast<int32_t>(v.at("greedy").at(i).as_int64()));
  const json::Value& lg = v.at("logits");
  for (std::size_t i = 0; i < lg.size(); ++i)
    for (std::size_t j = 0; j < lg.at(i).size(); ++j)
      r.logits.push_back(static_cast<float>(lg.at(i).at(j).as_double()));
  const json::Value& at = v.at("attentions");
  for (std::size_t l = 0; l < at.size(); ++l) {
    std::vector<float> w;
    for (std::size_t h = 0; h < at.at(l).size(); ++h)
      for (std::size_t i = 0; i < at.at(l).at(h).size(); ++i)
        for (std::size_t j = 0; j < at.at(l).at(h).at(i).size(); ++j)
          w.push_back(static_cast<float>(at.at(l).at(h).at(i).at(j).as_double()));
    r.attentions.push_back(std::move(w));
  }
  return r;
}

// max |a − b| / (1 + max |b|)
double rel_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0, mag = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
  }
  return d / (1 + mag);
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  return d;
}

std::unique_ptr<Decoder> load(const io::GgufFile& f, bool q8 = true) {
  DecoderOptions o;
  o.activations_8bit = q8;
  return Decoder::load(f, o);
}

TEST(DecoderArch, F32LogitsAndAttentionEqualTransformers) {
  for (const std::string& arch : kArchs) {
    SCOPED_TRACE(arch);
    const Reference ref = reference(arch);
    const io::GgufFile f = io::GgufFile::open(data(arch + ".gguf"));
    auto d = load(f);
    EXPECT_LT(rel_diff(d->logits_all(ref.ids), ref.logits), 2e-5);
    std::vector<float> last;
    const auto att = d->attention_weights(ref.ids, &last);
    ASSERT_EQ(att.size(), ref.attentions.size());
    for (std::size_t l = 0; l < att.size(); ++l)
      EXPECT_LT(max_abs_diff(att[l], ref.attentions[l]), 1e-5) << "layer " << l;
    const int64_t V = d->config().vocab, N = static_cast<int64_t>(ref.ids.size());
    EXPECT_LT(rel_diff(last, std::span<const float>(ref.logits).subspan((N - 1) * V, V)), 2e-5);
  }
}

TEST(DecoderArch, GreedyTokensThroughTheSchedulerEqualTransformers) {
  for (const std::string& arch : kArchs) {
    SCOPED_TRACE(arch);
    const Reference ref = reference(arch);
    const io::GgufFile f = io::GgufFile::open(data(arch + ".gguf"));
    auto d = load(f);
    GenerateOptions g;
    g.max_new_tokens = static_cast<int64_t>(ref.greedy.size());
    const auto out = generate_batch(*d, {ref.ids}, g);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].ids, ref.greedy);
  }
}

TEST(DecoderArch, QuantizedAndHalfWeightsStayNearTransformers) {
  for (const std::string& arch : kArchs) {
    SCOPED_TRACE(arch);
    const Reference ref = reference(arch);
    const io::GgufFile f = io::GgufFile::open(data(arch + "_q8_0.gguf"));
    // Q8_0 weights (each within half a step of max|w| / 127 per block of 32), with 8-bit activations
    // where the CPU runs them and with f32 ones: the random weights are large (std 0.15), so the
    // rounding moves the logits by a few percent of their range.
    const double q8 = rel_diff(load(f)->logits_all(ref.ids), ref.logits);
    const double f32 = rel_diff(load(f, false)->logits_all(ref.ids), ref.logits);
    // Seen on these files: at most 0.084 and 0.055; a wrong layout or config is off by far more (~1).
    EXPECT_LT(q8, 0.15);
    EXPECT_LT(f32, 0.1);
  }
  const Reference ref = reference("qwen2");
  const io::GgufFile f = io::GgufFile::open(data("qwen2_f16.gguf"));
  EXPECT_LT(rel_diff(load(f)->logits_all(ref.ids), ref.logits), 2e-3);
}

PagedKvCache make_cache(const Decoder& d, int64_t positions, int64_t block,
                        ops::KvDtype dtype = ops::KvDtype::f32) {
  KvCacheConfig k = d.kv_layout();
  k.block_tokens = block;
  k.dtype = dtype;
  k.pool_bytes = (positions + block) * k.layers * ops::kv_position_bytes(dtype, k.kv_heads, k.head_dim);
  return PagedKvCache(k);
}

// Logits of the last token of `prompt` after it ran in chunks of `chunk`, beside `other` (another
// sequence whose rows share every step, when given).
std::vector<float> run_chunks(Decoder& d, const std::vector<int32_t>& prompt, int64_t chunk,
                              const std::vector<int32_t>* other, ops::KvDtype dtype = ops::KvDtype::f32) {
  PagedKvCache cache = make_cache(d, 256, 4, dtype);
  const auto a = cache.create();
  const auto b = cache.create();
  std::vector<float> la(static_cast<std::size_t>(d.batch_vocab())), lb(la.size());
  int64_t done = 0, done_b = 0;
  while (done < static_cast<int64_t>(prompt.size())) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(prompt.size()) - done);
    std::vector<BatchEntry> batch;
    if (other && done_b < static_cast<int64_t>(other->size())) {
      const int64_t nb = std::min<int64_t>(chunk + 1, static_cast<int64_t>(other->size()) - done_b);
      EXPECT_TRUE(cache.append(b, other->data() + done_b, nb));
      batch.push_back({b, other->data() + done_b, nb, lb.data(), nullptr});
      done_b += nb;
    }
    EXPECT_TRUE(cache.append(a, prompt.data() + done, n));
    batch.push_back({a, prompt.data() + done, n, la.data(), nullptr});
    done += n;
    d.forward_batch(cache, batch);
  }
  return la;
}

// Quantized (Q8_0) and f32 weights (the F32 files, and Hugging Face folders in f32 and bf16, whose
// products were BLAS's until they moved to the packed row-independent product): the same bits alone or
// beside another sequence.
void expect_rows_independent_of_batch(Decoder& d) {
  const std::vector<int32_t> p = {3, 40, 41, 200, 17, 9, 120, 66, 5, 250, 31};
  const std::vector<int32_t> other = {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  const std::vector<float> alone = run_chunks(d, p, 3, nullptr);
  const std::vector<float> shared = run_chunks(d, p, 3, &other);
  EXPECT_EQ(0, std::memcmp(alone.data(), shared.data(), alone.size() * sizeof(float)));
  // The same prompt in one chunk or in chunks of 3: the same positions and keys, summed the same way.
  const std::vector<float> whole = run_chunks(d, p, 64, nullptr);
  EXPECT_LT(max_abs_diff(whole, alone), 1e-5);
}

TEST(DecoderArch, RowsDoNotDependOnTheirBatch) {
  for (const std::string& arch : kArchs)
    for (const std::string& file : {arch + "_q8_0.gguf", arch + ".gguf"}) {
      SCOPED_TRACE(file);
      const io::GgufFile f = io::GgufFile::open(data(file));
      expect_rows_independent_of_batch(*load(f));
    }
  for (const std::string arch : {"qwen3", "phi3", "gemma3"}) {
    SCOPED_TRACE("hf_" + arch);
    expect_rows_independent_of_batch(*Decoder::load_hf(data("hf_" + arch)));
  }
}

// An 8-bit KV cache (q8: each K and V row within half a step of its own max / 127): the last
// token's logits stay near transformers', the rows stay the same bits alone and beside another
// sequence, and greedy decoding through the scheduler runs on it.
TEST(DecoderArch, Q8KvCacheStaysNearAndRowsStayIndependentOfTheirBatch) {
  const std::vector<int32_t> other = {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  for (const std::string& arch : kArchs) {
    SCOPED_TRACE(arch);
    const Reference ref = reference(arch);
    const io::GgufFile f = io::GgufFile::open(data(arch + ".gguf"));
    auto d = load(f, false);
    const int64_t V = d->config().vocab, N = static_cast<int64_t>(ref.ids.size());
    const std::span<const float> want = std::span<const float>(ref.logits).subspan((N - 1) * V, V);
    const std::vector<float> f32 = run_chunks(*d, ref.ids, 3, nullptr);
    const std::vector<float> q8 = run_chunks(*d, ref.ids, 3, nullptr, ops::KvDtype::q8);
    const std::vector<float> shared = run_chunks(*d, ref.ids, 3, &other, ops::KvDtype::q8);
    // Seen: f32 at most 3e-6, q8 0.005-0.018 (the random weights' K and V are large); a wrong scale
    // or layout is off by ~1.
    EXPECT_LT(rel_diff(f32, want), 2e-5);
    EXPECT_LT(rel_diff(q8, want), 0.05);
    EXPECT_EQ(0, std::memcmp(q8.data(), shared.data(), q8.size() * sizeof(float)));
    GenerateOptions g;
    g.max_new_tokens = static_cast<int64_t>(ref.greedy.size());
    const auto out = generate_batch(*d, {ref.ids}, g, {}, 0, ops::KvDtype::q8);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].ids.size(), ref.greedy.size());  // (seen: every token as transformers')
  }
}

TEST(DecoderArch, HuggingFaceFoldersEqualTransformers) {
  // The same checkpoints as save_pretrained writes them: one f32 file, f32 in shards with an index, and
  // bf16 weights (the reference ran the f32 model, so within bf16's rounding of the weights).
  for (const auto& [arch, tol] :
       std::vector<std::pair<std::string, double>>{{"qwen3", 2e-5}, {"phi3", 2e-5}, {"gemma3", 0.05}}) {
    SCOPED_TRACE(arch);
    const Reference ref = reference(arch);
    auto d = Decoder::load_hf(data("hf_" + arch));
    EXPECT_EQ(d->config().arch, arch);
    EXPECT_LT(rel_diff(d->logits_all(ref.ids), ref.logits), tol);
    if (arch != "gemma3") {
      const auto att = d->attention_weights(ref.ids);
      for (std::size_t l = 0; l < att.size(); ++l) EXPECT_LT(max_abs_diff(att[l], ref.attentions[l]), 1e-5);
    }
  }
}

TEST(DecoderArch, HuggingFaceFolderErrorsNameTheProblem) {
  const std::string dir = ::testing::TempDir() + "attn_hf_bad_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const auto error_of = [&]() {
    try {
      Decoder::load_hf(dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of().find("config.json"), std::string::npos) << error_of();
  std::filesystem::copy_file(data("hf_qwen3/config.json"), dir + "/config.json");
  EXPECT_NE(error_of().find("neither model.safetensors"), std::string::npos) << error_of();
  // Another checkpoint's weights: wrong shapes, named.
  std::filesystem::copy_file(data("hf_gemma3/model.safetensors"), dir + "/model.safetensors");
  EXPECT_NE(error_of().find("expected shape"), std::string::npos) << error_of();
  {
    std::string cfg = io::read_file(data("hf_qwen3/config.json"), "config");
    cfg.replace(cfg.find("\"qwen3\""), 7, "\"mamba\"");
    io::write_file_atomically(dir + "/config.json", cfg);
  }
  EXPECT_NE(error_of().find("model_type \"mamba\" is not supported"), std::string::npos) << error_of();
  std::filesystem::remove_all(dir);
}

TEST(DecoderArch, LoaderErrorsNameTheProblem) {
  const auto error_of = [](const std::string& path) {
    try {
      const io::GgufFile f = io::GgufFile::open(path);
      Decoder::load(f);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string dir = testing::source_path("tests/models/data/");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir + "gemma3_tiny_bad_shape.gguf", "blk.1.attn_q.weight: expected shape"},
      {dir + "gemma3_tiny_bad_type.gguf", "type Q2_K is not supported"},
      {dir + "gemma3_tiny_missing.gguf", "blk.2.post_ffw_norm.weight: missing"},
      {dir + "gemma3_tiny_bad_window.gguf", "gemma3.attention.sliding_window 128"},
      {testing::source_path("tests/io/data/gguf_tokenizer_tiny.gguf"), "context_length"}};
  for (const auto& [path, want] : cases) {
    const std::string e = error_of(path);
    EXPECT_NE(e.find(want), std::string::npos) << path << ": " << e;
  }
}

}  // namespace
}  // namespace attn::models::runtime
