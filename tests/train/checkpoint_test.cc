// Checkpoints: resume bit-identical, atomic under SIGKILL, mismatch listing,
// truncated and corrupt files.
#include <attn/core/autograd.h>
#include <attn/io/safetensors.h>
#include <attn/train/checkpoint.h>
#include <attn/train/trainer.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "testing/tolerances.h"
#include "tiny_model.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::TinyModel;

// A fresh directory per test and process (ctest -j runs tests side by side).
std::string temp_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("attn_train_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

struct Data {
  static constexpr int64_t N = 12, L = 6, kBatch = 2;
  Tensor x = testing::random_uniform({N, L, TinyModel::C}, 900);  // [N, L, C]
  Tensor y = Tensor::empty({N, L}, DType::i64);                   // [N, L]
  Data() {
    for (int64_t i = 0; i < N * L; ++i) y.data<int64_t>()[i] = (i * 7 + i / 5) % TinyModel::V;
  }
};

// One training run driven by the Trainer: data order from epoch_order, a
// random input scale from the RNG state, dropout seeded per step.
struct TrainRun {
  TinyModel model;
  train::AdamW opt;
  train::WarmupCosineSchedule schedule{3e-2, 3, 20, 1e-3};
  train::Trainer trainer;
  const Data& data;

  TrainRun(const Data& d, uint64_t init_seed, uint64_t train_seed)
      : model(init_seed),
        opt(model.params, adamw_options()),
        trainer(opt, schedule, options(), train_seed),
        data(d) {}

  static train::AdamWOptions adamw_options() {
    train::AdamWOptions o;
    o.lr = 0;
    o.weight_decay = 0.05;
    o.no_decay = train::default_no_decay;
    return o;
  }
  static train::TrainerOptions options() {
    train::TrainerOptions o;
    o.accumulation_steps = 2;
    o.clip_norm = 0.5;
    return o;
  }

  train::StepResult step() {
    return trainer.step([&](const train::StepContext& ctx) {
      train::TrainState& s = *ctx.state;
      if ((s.batch_in_epoch + 1) * Data::kBatch > Data::N) {
        ++s.epoch;
        s.batch_in_epoch = 0;
      }
      const std::vector<int64_t> order = train::epoch_order(Data::N, s.rng.seed(), s.epoch);
      const std::vector<int64_t> idx(order.begin() + s.batch_in_epoch * Data::kBatch,
                                     order.begin() + (s.batch_in_epoch + 1) * Data::kBatch);
      ++s.batch_in_epoch;
      const Tensor x = testing::gather_rows(data.x, idx) * (0.9 + 0.2 * s.rng.uniform());
      return model.loss(x, testing::gather_rows(data.y, idx), 0.1, ctx.dropout_seed);
    });
  }
};

void expect_same_bits(const NamedParams& a, const NamedParams& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    ASSERT_EQ(a[i].second.shape(), b[i].second.shape());
    EXPECT_EQ(0, std::memcmp(a[i].second.raw_data(), b[i].second.raw_data(), a[i].second.numel() * 4))
        << a[i].first << " differs";
  }
}

TEST(Resume, KilledAtStepKAndResumedEndsBitIdentical) {
  const Data data;
  const int total = 14, k = 5;
  const std::string dir = temp_dir("resume");
  const std::string path = dir + "/ckpt.safetensors";
  const json::Value config = json::parse(R"({"d_model": 8, "heads": 2, "name": "tiny"})");

  TrainRun full(data, 1, 42);
  std::vector<double> losses;
  for (int t = 0; t < total; ++t) losses.push_back(full.step().loss);
  EXPECT_LT(losses.back(), losses.front());

  {
    TrainRun first(data, 1, 42);
    for (int t = 0; t < k; ++t) EXPECT_EQ(first.step().loss, losses[t]);
    first.trainer.save(path, config);
  }  // "killed": everything of the first run is gone

  TrainRun resumed(data, 777, 9999);  // other weights and seed: the checkpoint must restore them
  const json::Value got_config = resumed.trainer.load(path);
  EXPECT_EQ(got_config, config);
  EXPECT_EQ(resumed.trainer.state().step, k);
  EXPECT_EQ(resumed.opt.steps(), k);
  EXPECT_EQ(resumed.trainer.state().rng.seed(), 42u);
  for (int t = k; t < total; ++t) EXPECT_EQ(resumed.step().loss, losses[t]) << "step " << t + 1;

  expect_same_bits(resumed.model.params, full.model.params);
  expect_same_bits(resumed.opt.state_tensors(), full.opt.state_tensors());
  EXPECT_EQ(resumed.trainer.state().rng, full.trainer.state().rng);
  EXPECT_EQ(resumed.trainer.state().epoch, full.trainer.state().epoch);
  EXPECT_EQ(resumed.trainer.state().batch_in_epoch, full.trainer.state().batch_in_epoch);
  fs::remove_all(dir);
}

TEST(Resume, SgdMomentumStateRoundTrips) {
  const std::string dir = temp_dir("sgd");
  TinyModel a(3), b(50);
  train::SgdOptions o;
  o.momentum = 0.9;
  train::Sgd oa(a.params, o), ob(b.params, o);
  const Data data;
  auto one_step = [&](TinyModel& m, train::Sgd& opt) {
    opt.zero_grad();
    m.loss(data.x, data.y, 0.0, 0).backward();
    opt.step();
  };
  for (int t = 0; t < 3; ++t) one_step(a, oa);
  train::save_checkpoint(dir + "/c.safetensors", a.params, &oa, nullptr, train::TrainState{});
  train::load_checkpoint(dir + "/c.safetensors", b.params, &ob);
  EXPECT_EQ(ob.steps(), 3);
  for (int t = 0; t < 2; ++t) {
    one_step(a, oa);
    one_step(b, ob);
  }
  expect_same_bits(a.params, b.params);
  expect_same_bits(oa.state_tensors(), ob.state_tensors());
  // an AdamW checkpoint does not load into an SGD optimizer
  train::AdamW adam(a.params, {});
  train::save_checkpoint(dir + "/adam.safetensors", a.params, &adam, nullptr, train::TrainState{});
  EXPECT_THROW(train::load_checkpoint(dir + "/adam.safetensors", b.params, &ob), Error);
  fs::remove_all(dir);
}

// ---- mismatches, truncation, corruption ---------------------------------------------------------

NamedParams named(std::initializer_list<std::pair<const char*, Shape>> spec, uint64_t seed) {
  NamedParams ps;
  for (const auto& [n, s] : spec) ps.emplace_back(n, testing::random_uniform(s, seed++));
  return ps;
}

TEST(Checkpoint, ListsEveryMismatchInOneError) {
  const std::string dir = temp_dir("mismatch");
  const std::string path = dir + "/c.safetensors";
  train::save_checkpoint(path, named({{"w", {2, 3}}, {"b", {3}}, {"extra", {1}}}, 1), nullptr, nullptr, {});
  const NamedParams live = named({{"w", {3, 2}}, {"b", {3}}, {"gone", {4}}}, 9);
  const std::vector<double> before = live[1].second.to_vector();
  try {
    train::load_checkpoint(path, live, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("3 problems"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing 'model.gone'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected 'model.extra'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("wrong shape for 'model.w': file has [2, 3], expected [3, 2]"), std::string::npos)
        << msg;
  }
  EXPECT_EQ(live[1].second.to_vector(), before) << "a failed load must not modify the model";
  fs::remove_all(dir);
}

TEST(Checkpoint, MetadataRoundTrips) {
  const std::string dir = temp_dir("meta");
  const std::string path = dir + "/c.safetensors";
  const NamedParams ps = named({{"a.w", {4, 4}}}, 1);
  train::TrainState st;
  st.step = 123;
  st.epoch = 4;
  st.batch_in_epoch = 7;
  st.skipped_steps = 2;
  st.rng.restore(0xfedcba9876543210ull, 99);
  const train::NoamSchedule noam(64, 400, 2.0);
  const json::Value cfg = json::parse(R"({"layers": [1, 2, {"x": null}], "act": "gelu"})");
  train::save_checkpoint(path, ps, nullptr, &noam, st, cfg);
  const NamedParams into = named({{"a.w", {4, 4}}}, 50);
  const train::LoadedCheckpoint c = train::load_checkpoint(path, into, nullptr);
  EXPECT_EQ(c.state.step, 123);
  EXPECT_EQ(c.state.epoch, 4);
  EXPECT_EQ(c.state.batch_in_epoch, 7);
  EXPECT_EQ(c.state.skipped_steps, 2);
  EXPECT_EQ(c.state.rng, st.rng);
  EXPECT_EQ(c.model_config, cfg);
  EXPECT_EQ(train::schedule_from_json(c.schedule)->lr(77), noam.lr(77));
  expect_same_bits(into, ps);
  fs::remove_all(dir);
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(Checkpoint, TruncatedOrCorruptFilesAreErrors) {
  const std::string dir = temp_dir("corrupt");
  const std::string good = dir + "/good.safetensors", bad = dir + "/bad.safetensors";
  TinyModel m(1);
  train::AdamW opt(m.params, {});
  train::save_checkpoint(good, m.params, &opt, nullptr, {});
  const std::string bytes = read_all(good);
  const uint64_t header = io::SafeTensorsFile::open(good).header_size();
  TinyModel live(2);
  train::AdamW live_opt(live.params, {});
  const std::vector<double> before = live.params[0].second.to_vector();
  // truncated anywhere: header length, header, data section, last byte
  for (std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{8 + header / 2},
                        std::size_t{8 + header + 3}, bytes.size() / 2, bytes.size() - 1}) {
    write_all(bad, bytes.substr(0, n));
    EXPECT_THROW(train::load_checkpoint(bad, live.params, &live_opt), Error) << "truncated to " << n;
  }
  // a flipped bit in the data section: caught by the checksum and named
  for (std::size_t off :
       {std::size_t{8 + header}, bytes.size() - 1, 8 + header + (bytes.size() - 8 - header) / 2}) {
    std::string c = bytes;
    c[off] = static_cast<char>(c[off] ^ 0x10);
    write_all(bad, c);
    try {
      train::load_checkpoint(bad, live.params, &live_opt);
      ADD_FAILURE() << "no error for a flipped bit at " << off;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is corrupt"), std::string::npos) << e.what();
    }
  }
  // garbage in the header: an error, never a crash
  for (std::size_t off = 8; off < 8 + header; off += 37) {
    std::string c = bytes;
    c[off] = '#';
    write_all(bad, c);
    EXPECT_THROW(train::load_checkpoint(bad, live.params, &live_opt), Error) << "header byte " << off;
  }
  // a plain safetensors file (no checkpoint metadata)
  io::save_safetensors(bad, {{"model.attn.wq", Tensor::zeros({8, 8})}});
  EXPECT_THROW(train::load_checkpoint(bad, live.params, nullptr), Error);
  EXPECT_EQ(live.params[0].second.to_vector(), before);
  EXPECT_EQ(live_opt.steps(), 0);
  train::load_checkpoint(good, live.params, &live_opt);  // the good one still loads
  expect_same_bits(live.params, m.params);
  fs::remove_all(dir);
}

// ---- SIGKILL during a save ----------------------------------------------------------------------

constexpr const char* kChildEnv = "ATTN_TRAIN_KILL_CHILD_DIR";
constexpr int64_t kBig = 1 << 21;  // elements per tensor: saves take a while

NamedParams big_params(float value) {
  NamedParams ps;
  for (const char* n : {"a", "b", "c", "d"}) ps.emplace_back(n, Tensor::full({kBig}, value));
  return ps;
}

// Runs only as the child process of the test below: saves checkpoints of
// value 2 over the parent's in a loop until killed.
TEST(CheckpointKill, ChildWriter) {
  const char* dir = std::getenv(kChildEnv);
  if (!dir) GTEST_SKIP() << "runs only as the child of CheckpointKill.PreviousCheckpointSurvives";
  train::TrainState st;
  st.step = 2;
  const NamedParams ps = big_params(2.0f);
  for (int i = 0; i < 1000; ++i)
    train::save_checkpoint(std::string(dir) + "/ckpt.safetensors", ps, nullptr, nullptr, st);
}

TEST(CheckpointKill, PreviousCheckpointSurvives) {
  const std::string dir = temp_dir("kill");
  const std::string path = dir + "/ckpt.safetensors";
  train::TrainState st;
  st.step = 1;
  train::save_checkpoint(path, big_params(1.0f), nullptr, nullptr, st);

  const std::string env = std::string(kChildEnv) + "=" + dir;
  const std::string filter = "--gtest_filter=CheckpointKill.ChildWriter";
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, const_cast<char*>(filter.c_str()), nullptr};
  char* envp[] = {const_cast<char*>(env.c_str()), nullptr};
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    execve(exe, argv, envp);
    _exit(127);
  }
  // Wait until a save is in progress (its temporary file exists), then kill.
  bool saw_temp = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!saw_temp && std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().rfind("ckpt.safetensors.tmp.", 0) == 0) saw_temp = true;
    if (!saw_temp) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  EXPECT_TRUE(saw_temp) << "never saw a save in progress";

  // The checkpoint is either the parent's (step 1, all 1) or a complete one of the child (step 2, all 2).
  NamedParams live = big_params(0.0f);
  const train::LoadedCheckpoint c = train::load_checkpoint(path, live, nullptr);
  ASSERT_TRUE(c.state.step == 1 || c.state.step == 2) << c.state.step;
  for (const auto& [n, t] : live) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < kBig; i += 4099) ASSERT_EQ(p[i], static_cast<float>(c.state.step)) << n;
    ASSERT_EQ(p[kBig - 1], static_cast<float>(c.state.step)) << n;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attn
