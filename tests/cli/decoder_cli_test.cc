// Smoke tests of the commands on the runtime's decoder (models/text_decoder.h) with the tiny random
// checkpoints of tests/models/data/decoders: attn generate (raw and --chat) prints the library's greedy
// continuation, attn attention --export writes every layer with the sliding layers named, an
// unsupported file is refused.
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/text_decoder.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

using testing::run_attn;

std::string file(const std::string& name) {
  return testing::source_path("tests/models/data/decoders/" + name);
}

TEST(DecoderCli, GenerateEqualsTheLibrarysGreedyContinuation) {
  for (const std::string arch : {"qwen3", "phi3", "llama"}) {
    SCOPED_TRACE(arch);
    const std::string path = file(arch + "_q8_0.gguf");
    const auto r = run_attn("generate --model '" + path + "' --max-new 6 'hello world'");
    ASSERT_EQ(r.status, 0) << r.err;
    models::TextDecoder m = models::TextDecoder::load(path, {64});
    models::TextOptions t;
    t.max_new_tokens = 6;
    const models::TextReply want = models::decoder_generate_text(m, m.encode_text("hello world"), t);
    EXPECT_EQ(r.out, want.text + "\n");
    const auto c =
        run_attn("generate --model '" + path + "' --chat --system 'be brief' --max-new 4 --stats 'hi'");
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_NE(c.err.find("[" + m.config().arch + ": prompt"), std::string::npos) << c.err;
  }
}

// attn chat --stats prints what the conversation's cache holds after each turn (it printed 0.0 MiB;
// this model's cache is a few KiB).
TEST(DecoderCli, ChatStatsShowTheConversationsCache) {
  const auto r =
      run_attn("chat --model '" + file("qwen3_q8_0.gguf") + "' --max-new 4 --stats", "hi\nhow are you\n");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<double> kib;
  for (std::size_t at = r.err.find("KV cache "); at != std::string::npos;
       at = r.err.find("KV cache ", at + 1))
    kib.push_back(std::stod(r.err.substr(at + 9)));
  ASSERT_EQ(kib.size(), 2u) << r.err;
  EXPECT_GT(kib[0], 0.0) << r.err;
  EXPECT_GE(kib[1], kib[0]) << r.err;  // the second turn keeps the first in the cache
  EXPECT_NE(r.err.find(" KiB;"), std::string::npos) << r.err;
}

TEST(DecoderCli, AHuggingFaceFolderGeneratesAsItsGgufDoes) {
  // The same weights and vocabulary as qwen3.gguf, as save_pretrained and tokenizers write them.
  const auto folder = run_attn("generate --model '" + file("hf_qwen3") + "' --max-new 6 'hello world'");
  ASSERT_EQ(folder.status, 0) << folder.err;
  const auto gguf = run_attn("generate --model '" + file("qwen3.gguf") + "' --max-new 6 'hello world'");
  ASSERT_EQ(gguf.status, 0) << gguf.err;
  EXPECT_EQ(folder.out, gguf.out);
  const auto chat = run_attn("generate --model '" + file("hf_phi3") + "' --chat --max-new 4 --stats 'hi'");
  ASSERT_EQ(chat.status, 0) << chat.err;
  EXPECT_NE(chat.err.find("[phi3: prompt"), std::string::npos) << chat.err;
  const auto att = run_attn("attention --model '" + file("hf_qwen3") + "' 'hello world'");
  EXPECT_EQ(att.status, 0) << att.err;
}

TEST(DecoderCli, QuantizeAtLoadEqualsTheLibrarysQuantizedDecoder) {
  for (const std::string q : {"q8_0", "q4_0"}) {
    SCOPED_TRACE(q);
    const auto r = run_attn("generate --model '" + file("hf_qwen3") + "' --quantize " + q +
                            " --max-new 6 --stats 'hello world'");
    ASSERT_EQ(r.status, 0) << r.err;
    models::TextDecoderOptions o;
    o.max_context = 64;
    o.quantize = models::runtime::parse_load_quant(q);
    models::TextDecoder m = models::TextDecoder::load(file("hf_qwen3"), o);
    models::TextOptions t;
    t.max_new_tokens = 6;
    EXPECT_EQ(r.out, models::decoder_generate_text(m, m.encode_text("hello world"), t).text + "\n");
    EXPECT_NE(r.err.find("MiB (" + q + ")]"), std::string::npos) << r.err;
  }
  const auto bad = run_attn("generate --model '" + file("hf_qwen3") + "' --quantize q3 'hello'");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("none, q8_0, q4_0"), std::string::npos) << bad.err;
}

TEST(DecoderCli, AttentionExportNamesTheSlidingLayers) {
  const std::string out = ::testing::TempDir() + "attn_decoder_cli_" + std::to_string(::getpid()) + ".json";
  const auto r =
      run_attn("attention --model '" + file("gemma2.gguf") + "' 'hello world' --export '" + out + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json::Value e = json::parse(io::read_file(out, "export"));
  const std::string names = json::dump(e.at("layer_names"));
  EXPECT_NE(names.find("layer 0 (sliding, window 4)"), std::string::npos) << names;
  EXPECT_NE(names.find("layer 1 (global)"), std::string::npos) << names;
  EXPECT_EQ(e.at("attention").size(), 3u);
  std::remove(out.c_str());
}

TEST(DecoderCli, AnUnsupportedWeightTypeIsRefusedByName) {
  const auto r = run_attn("generate --model '" +
                          testing::source_path("tests/models/data/gemma3_tiny_bad_type.gguf") + "' 'ab'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("Q2_K"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace attn
