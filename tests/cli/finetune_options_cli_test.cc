// `attn train classify --encoder` options of the fine-tune's experiments (--cache-dir,
// --label-smoothing, --pool): bad values and flags given without --encoder are clear errors
// before anything is read or trained.
#include <gtest/gtest.h>

#include <string>

#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;
using attn::testing::run_attn;

void expect_error(const std::string& args, const std::string& message) {
  const CliRun r = run_attn(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
}

TEST(FinetuneOptionsCli, BadValuesAndMisplacedFlags) {
  expect_error("train classify --cache-dir runs/cache", "--cache-dir goes with --encoder NAME");
  expect_error("train classify --pool cls", "--pool goes with --encoder NAME");
  expect_error("train classify --frozen-vector", "--frozen-vector goes with --encoder NAME");
  expect_error("train classify --layer-lr-decay 0.8", "--layer-lr-decay goes with --encoder NAME");
  expect_error("train classify --average-from 0.5", "--average-from goes with --encoder NAME");
  expect_error("train classify --encoder e5 --average-from 1", "--average-from must be in [0, 1); got 1");
  expect_error("train classify --encoder e5 --layer-lr-decay 0", "--layer-lr-decay must be in (0, 1]; got 0");
  expect_error("train classify --encoder e5 --layer-lr-decay 1.5",
               "--layer-lr-decay must be in (0, 1]; got 1.5");
  expect_error("train classify --encoder e5 --layer-lr-decay x", "--layer-lr-decay");
  expect_error("train classify --label-smoothing 0.1", "--label-smoothing goes with --encoder NAME");
  expect_error("train classify --encoder e5 --label-smoothing 1",
               "--label-smoothing must be in [0, 1); got 1");
  expect_error("train classify --encoder e5 --label-smoothing x", "--label-smoothing");
  expect_error("train classify --prefix query", "--prefix goes with --encoder NAME");
  expect_error("train classify --encoder e5 --prefix question",
               "--prefix must be query, passage or none; got 'question'");
  expect_error("train classify --encoder e5 --pool max", "--pool must be mean or cls; got 'max'");
  expect_error("train classify --frozen-path nn", "--frozen-path goes with --encoder NAME");
  expect_error("train classify --encoder e5 --frozen-path fast",
               "--frozen-path must be bert or nn; got 'fast'");
  expect_error("train classify --encoder e5 --cache-dir ''", "--cache-dir needs a folder name");
  expect_error("train classify --encoder e5 --train-embeddings --cache-dir c",
               "--cache-dir caches the frozen part; with --train-embeddings nothing is frozen");
}

}  // namespace
