// Smoke tests of `attn train lm` and `attn generate --model FILE`: the built
// binary on a small fortune-format file. What the recipe computes is tested in
// tests/tasks/lm_test.cc; here: exit codes, the key output, the prompt parsing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace attn {
namespace {

using testing::run_attn;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "attn_lm_cli_" + std::to_string(::getpid()) + "_" + name;
}

class LmCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new std::string(temp_path("poems.txt"));
    model_ = new std::string(temp_path("lm.attn"));
    {
      std::ofstream f(*data_, std::ios::binary);
      for (int rep = 0; rep < 12; ++rep)
        f << "\x1b[32m《静夜思》\x1b[m\n床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n%\n"
          << "春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。\n%\n";
    }
    train_ = new testing::CliRun(run_attn("train lm --data " + *data_ + " --out " + *model_ +
                                          " --steps 20 --seq-len 32 --batch 8 --eval-windows 4"
                                          " --val-fraction 0.1 --log-every 10 --min-freq 1"));
  }
  static void TearDownTestSuite() {
    std::remove(data_->c_str());
    std::remove(model_->c_str());
    delete data_, delete model_, delete train_;
  }
  static std::string* data_;
  static std::string* model_;
  static testing::CliRun* train_;
};
std::string* LmCli::data_ = nullptr;
std::string* LmCli::model_ = nullptr;
testing::CliRun* LmCli::train_ = nullptr;

TEST_F(LmCli, TrainLmSmoke) {
  ASSERT_EQ(train_->status, 0) << train_->err;
  EXPECT_NE(train_->err.find("fortune format"), std::string::npos) << train_->err;
  EXPECT_NE(train_->err.find("step 20/20"), std::string::npos) << train_->err;
  EXPECT_NE(train_->err.find("held-out after 20 steps"), std::string::npos) << train_->err;
  EXPECT_NE(train_->err.find("wrote " + *model_), std::string::npos) << train_->err;
  const testing::CliRun r = run_attn("train lm --steps 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--data FILE is required"), std::string::npos) << r.err;
}

TEST_F(LmCli, GenerateModelSmoke) {
  ASSERT_EQ(train_->status, 0) << train_->err;
  const std::string cmd = "generate --model " + *model_ + " 床前 --max-new 20 --seed 1";
  const testing::CliRun a = run_attn(cmd);
  const testing::CliRun b = run_attn(cmd);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind("床前", 0), 0u) << a.out;  // the prompt, then the continuation
  EXPECT_NE(a.err.find("characters, "), std::string::npos) << a.err;
  const testing::CliRun bm = run_attn("generate --model " + *model_ + " 春眠 --beam 3 --max-new 10");
  EXPECT_EQ(bm.status, 0) << bm.err;
  EXPECT_EQ(bm.out.rfind("春眠", 0), 0u);
  const testing::CliRun two = run_attn("generate --model " + *model_ + " one two");
  EXPECT_EQ(two.status, 1);
  EXPECT_NE(two.err.find("expected one prompt"), std::string::npos) << two.err;
  const testing::CliRun gb = run_attn("generate --model " + *model_ + " x --greedy --beam 2");
  EXPECT_NE(gb.err.find("--greedy and --beam exclude each other"), std::string::npos) << gb.err;
}

}  // namespace
}  // namespace attn
