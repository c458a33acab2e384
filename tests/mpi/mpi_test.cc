// Data-parallel training over MPI (include/attn/train/comm.h, trainer.h, fit.h):
// tests/mpi/worker/mpi_worker.cc and `attn train lm` under
// `mpirun --allow-run-as-root --oversubscribe -np N`. Skipped with a message
// when attn was built without MPI (ATTN_MPI=OFF) or mpirun is missing.
//
// Tolerances: 2 ranks sum the gradient of each half batch (weighted by its
// tokens) where one rank sums the whole batch's at once, so the f32 gradients
// differ in their rounding (about 1e-7 relative); AdamW divides by sqrt(v) and
// carries that into the weights. Tiny model, 10 updates at lr 1e-2: the weights
// agree to 2e-5 (measured 1.3e-7) and the losses to 1e-5. The character LM (6
// updates): see TrainLmOnTwoRanksMatchesOneRank for why a few weights differ more.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attn/io/safetensors.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

#if defined(ATTN_MPI_WORKER) && defined(ATTN_MPIEXEC)
constexpr const char* kWorker = ATTN_MPI_WORKER;
constexpr const char* kMpiexec = ATTN_MPIEXEC;
#else
constexpr const char* kWorker = "";
constexpr const char* kMpiexec = "";
#endif

#define SKIP_WITHOUT_MPI()                                                               \
  if (std::string(kWorker).empty() || std::string(kMpiexec).empty())                     \
  GTEST_SKIP() << "attn was built without MPI (ATTN_MPI=OFF, or no MPI found): install " \
                  "openmpi-bin and libopenmpi-dev (scripts/install-deps.sh) and reconfigure"

struct Job {
  int status = -1;
  std::string output;  // stdout and stderr
};

Job shell(const std::string& cmd) {
  Job r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// mpirun with the flags a root user on a small machine needs; every run has a time limit.
std::string mpirun(int np) {
  return "timeout 120 " + std::string(kMpiexec) + " --allow-run-as-root --oversubscribe --bind-to none -np " +
         std::to_string(np) + " ";
}

struct Line {
  long long step = 0;
  double loss = 0, weight = 0;
  std::string hash;
};

std::vector<Line> read_log(const std::string& path) {
  std::vector<Line> out;
  std::ifstream f(path);
  Line l;
  while (f >> l.step >> l.loss >> l.weight >> l.hash) out.push_back(l);
  return out;
}

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("attn_mpi_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string sub(const std::string& name) {
    fs::create_directories(dir_ / name);
    return (dir_ / name).string();
  }
  Job worker(int np, const std::string& out, const std::string& args) {
    return shell(mpirun(np) + kWorker + " --out " + out + " " + args);
  }
  fs::path dir_;
};

// |a - b| over the model weights of two checkpoints: the largest, the root mean square, and the
// fraction of weights that differ by more than 1e-5.
struct WeightDiff {
  double max = 0, rms = 0, over = 0;
};

WeightDiff weight_diff(const std::string& a, const std::string& b) {
  const io::SafeTensorsFile fa = io::SafeTensorsFile::open(a), fb = io::SafeTensorsFile::open(b);
  WeightDiff d;
  double n = 0, sq = 0, over = 0;
  for (const std::string& name : fa.names()) {
    if (name.rfind("model.", 0) != 0) continue;
    const std::vector<double> x = fa.load(name).to_vector(), y = fb.load(name).to_vector();
    EXPECT_EQ(x.size(), y.size()) << name;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      const double e = std::abs(x[i] - y[i]);
      d.max = std::max(d.max, e);
      sq += e * e;
      over += e > 1e-5;
      ++n;
    }
  }
  EXPECT_GT(n, 0);
  d.rms = n > 0 ? std::sqrt(sq / n) : 0;
  d.over = n > 0 ? over / n : 0;
  std::printf("weights %s vs %s: max |diff| %.3g, rms %.3g, %.4f%% over 1e-5\n",
              fs::path(a).filename().c_str(), fs::path(b).filename().c_str(), d.max, d.rms, 100 * d.over);
  return d;
}
double max_weight_diff(const std::string& a, const std::string& b) { return weight_diff(a, b).max; }

void expect_same_curve(const std::vector<Line>& one, const std::vector<Line>& two, std::size_t from = 0) {
  ASSERT_GE(one.size(), from + two.size());
  for (std::size_t i = 0; i < two.size(); ++i) {
    const Line &a = one[from + i], &b = two[i];
    EXPECT_EQ(a.step, b.step);
    EXPECT_NEAR(a.loss, b.loss, 1e-5) << "step " << a.step;
    EXPECT_EQ(a.weight, b.weight) << "step " << a.step << ": tokens of the global batch";
  }
}

TEST_F(Mpi, TwoRanksHalfBatchMatchOneRankFullBatch) {
  SKIP_WITHOUT_MPI();
  const std::string one = sub("one"), two = sub("two");
  const std::string args = " --batch 8 --steps 10 --clip 0.5 --check-params --save ";
  const Job r1 = worker(1, one, args + one + "/final.attn");
  ASSERT_EQ(r1.status, 0) << r1.output;
  const Job r2 = worker(2, two, args + two + "/final.attn");
  ASSERT_EQ(r2.status, 0) << r2.output;
  const std::vector<Line> a = read_log(one + "/rank0.txt"), b = read_log(two + "/rank0.txt");
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), 10u);
  expect_same_curve(a, b);
  EXPECT_NE(a.front().hash, a.back().hash) << "the updates must change the weights";
  EXPECT_EQ(read_log(two + "/rank1.txt").size(), 10u) << "the second rank must have trained too";
  const double d = max_weight_diff(one + "/final.attn", two + "/final.attn");
  EXPECT_LT(d, 2e-5);
  std::printf("max |w(2 ranks) - w(1 rank)| after 10 updates: %.3g\n", d);
  // Only rank 0 writes the checkpoint: the folder holds no other file of the trainer.
  EXPECT_FALSE(fs::exists(two + "/final.attn.tmp"));
}

TEST_F(Mpi, ParametersIdenticalOnEveryRankAfterEveryStep) {
  SKIP_WITHOUT_MPI();
  const std::string out = sub("run");
  // A whole epoch: the last batch has 4 rows, and with 3 ranks one rank gets 1 row.
  const Job r = worker(3, out, "--batch 8 --epochs 1 --check-params");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<Line> l0 = read_log(out + "/rank0.txt"), l1 = read_log(out + "/rank1.txt"),
                          l2 = read_log(out + "/rank2.txt");
  ASSERT_EQ(l0.size(), 8u) << "60 rows in batches of 8: 8 updates";
  ASSERT_EQ(l1.size(), l0.size());
  ASSERT_EQ(l2.size(), l0.size());
  for (std::size_t i = 0; i < l0.size(); ++i) {
    EXPECT_EQ(l0[i].hash, l1[i].hash) << "step " << l0[i].step;
    EXPECT_EQ(l0[i].hash, l2[i].hash) << "step " << l0[i].step;
    EXPECT_EQ(l0[i].loss, l1[i].loss);
  }
}

TEST_F(Mpi, AccumulationAndClippingMatchOneRank) {
  SKIP_WITHOUT_MPI();
  const std::string one = sub("one"), two = sub("two");
  // A small clip norm: every update is clipped, on the reduced gradient.
  const std::string args = " --batch 12 --accum 2 --steps 6 --clip 0.05 --save ";
  const Job r1 = worker(1, one, args + one + "/final.attn");
  ASSERT_EQ(r1.status, 0) << r1.output;
  const Job r2 = worker(2, two, args + two + "/final.attn");
  ASSERT_EQ(r2.status, 0) << r2.output;
  expect_same_curve(read_log(one + "/rank0.txt"), read_log(two + "/rank0.txt"));
  EXPECT_LT(max_weight_diff(one + "/final.attn", two + "/final.attn"), 2e-5);
}

TEST_F(Mpi, ResumeFromOneRankOnTwoRanksContinuesTheRun) {
  SKIP_WITHOUT_MPI();
  const std::string full = sub("full"), first = sub("first"), second = sub("second");
  const Job r = worker(1, full, "--batch 8 --steps 8 --save " + full + "/final.attn");
  ASSERT_EQ(r.status, 0) << r.output;
  const Job a = worker(1, first, "--batch 8 --steps 4 --save " + first + "/step4.attn");
  ASSERT_EQ(a.status, 0) << a.output;
  const Job b = worker(2, second,
                       "--batch 8 --steps 8 --check-params --resume " + first + "/step4.attn --save " +
                           second + "/final.attn");
  ASSERT_EQ(b.status, 0) << b.output;
  const std::vector<Line> l = read_log(second + "/rank0.txt");
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l.front().step, 5);
  expect_same_curve(read_log(full + "/rank0.txt"), l, 4);
  EXPECT_LT(max_weight_diff(full + "/final.attn", second + "/final.attn"), 2e-5);
  // And back: the 2-rank checkpoint resumes on one rank.
  const std::string third = sub("third");
  const Job c = worker(1, third, "--batch 8 --steps 9 --resume " + second + "/final.attn");
  ASSERT_EQ(c.status, 0) << c.output;
  ASSERT_EQ(read_log(third + "/rank0.txt").size(), 1u);
}

TEST_F(Mpi, AKilledRankEndsTheJobAndLeavesNoHalfWrittenCheckpoint) {
  SKIP_WITHOUT_MPI();
  const std::string out = sub("run");
  const Job r = worker(
      2, out, "--batch 8 --steps 50 --save " + out + "/ckpt.attn --save-at 2 --die-rank 1 --die-step 3");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the job must end, not hang: " << r.output;
  EXPECT_NE(r.output.find("signal 9"), std::string::npos) << r.output;
  // The checkpoint of step 2 is whole (it loads and checks), and nothing else was left.
  ASSERT_TRUE(fs::exists(out + "/ckpt.attn"));
  EXPECT_NO_THROW(io::SafeTensorsFile::open(out + "/ckpt.attn"));
  const std::string resumed = sub("resumed");
  const Job c = worker(1, resumed, "--batch 8 --steps 3 --resume " + out + "/ckpt.attn");
  EXPECT_EQ(c.status, 0) << c.output;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string n = e.path().filename().string();
    EXPECT_TRUE(n == "ckpt.attn" || n.rfind("rank", 0) == 0) << "left behind: " << n;
  }
}

TEST_F(Mpi, MismatchedConfigsAreRefusedAtStart) {
  SKIP_WITHOUT_MPI();
  const std::string out = sub("run");
  const Job r = worker(2, out, "--batch 8 --steps 3 --salt-rank 1");
  EXPECT_EQ(r.status != 0, true) << r.output;
  EXPECT_NE(r.output.find("ranks disagree on"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("config (rank 1 differs from rank 0)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("data (rank"), std::string::npos) << "only the config differs: " << r.output;
  EXPECT_FALSE(fs::exists(out + "/rank0.txt")) << "no update may run";
}

TEST_F(Mpi, ARankThatRunsOutOfDataEndsTheEpochForAll) {
  SKIP_WITHOUT_MPI();
  const std::string out = sub("run");
  const Job r = worker(2, out, "--batch 8 --epochs 2 --short-rank 1 --check-params");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_log(out + "/rank0.txt").size(), 14u) << "7 of 8 batches in each of 2 epochs";
  EXPECT_EQ(read_log(out + "/rank1.txt").size(), 14u);
}

// ---- the command: mpirun -np N attn train lm ---------------------------------------------------

std::string write_poems(const fs::path& dir, const std::string& name, int reps) {
  const std::string path = (dir / name).string();
  std::ofstream f(path, std::ios::binary);
  for (int i = 0; i < reps; ++i)
    f << "床前明月光，疑是地上霜。举头望明月，低头思故乡。\n春眠不觉晓，处处闻啼鸟。\n";
  return path;
}

std::vector<std::string> step_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("step ", 0) == 0) lines.push_back(l.substr(0, l.find("  lr")));  // "step 3/6  loss 3.7747"
  return lines;
}

TEST_F(Mpi, TrainLmOnTwoRanksMatchesOneRank) {
  SKIP_WITHOUT_MPI();
  const std::string data = write_poems(dir_, "poems.txt", 40);
  const std::string args = std::string(ATTN_CLI_PATH) + " train lm --data " + data +
                           " --steps 6 --seq-len 16 --batch 8 --log-every 1 --min-freq 1 --eval-windows 4"
                           " --dropout 0 --out ";
  const Job one = shell(mpirun(1) + args + (dir_ / "one.attn").string());
  ASSERT_EQ(one.status, 0) << one.output;
  const Job two = shell(mpirun(2) + args + (dir_ / "two.attn").string());
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("data parallel: 2 ranks (mpi)"), std::string::npos) << two.output;
  const std::vector<std::string> a = step_lines(one.output), b = step_lines(two.output);
  ASSERT_EQ(a.size(), 6u) << one.output;
  EXPECT_EQ(a, b) << "rank 0 alone prints, and the losses (4 decimals) agree";
  // AdamW moves a weight by about lr whatever its gradient's size, so where a gradient is near 0
  // the summation order can flip its sign and move that weight by up to 2 lr (here 4e-3) the
  // other way: measured 0.06% of the weights differ by more than 1e-5 (max 3e-4), rms 2e-6.
  const WeightDiff d = weight_diff((dir_ / "one.attn").string(), (dir_ / "two.attn").string());
  EXPECT_LT(d.rms, 1e-5);
  EXPECT_LT(d.over, 0.01);
  EXPECT_LT(d.max, 1e-2);
}

TEST_F(Mpi, TrainLmResumedOnTwoRanksContinuesTheOneRankRun) {
  SKIP_WITHOUT_MPI();
  const std::string data = write_poems(dir_, "poems.txt", 40), ckpt = (dir_ / "ckpt.attn").string();
  const std::string args = std::string(ATTN_CLI_PATH) + " train lm --data " + data +
                           " --steps 6 --seq-len 16 --batch 8 --log-every 1 --min-freq 1 --eval-windows 4"
                           " --dropout 0 --out ";
  // One rank: 6 steps, a checkpoint after step 4 (the only multiple of 4).
  const Job one = shell(mpirun(1) + args + (dir_ / "one.attn").string() + " --checkpoint " + ckpt +
                        " --checkpoint-every 4");
  ASSERT_EQ(one.status, 0) << one.output;
  const Job two = shell(mpirun(2) + args + (dir_ / "two.attn").string() + " --resume " + ckpt);
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("resumed " + ckpt + " at step 4"), std::string::npos) << two.output;
  const std::vector<std::string> a = step_lines(one.output), b = step_lines(two.output);
  ASSERT_EQ(a.size(), 6u) << one.output;
  ASSERT_EQ(b.size(), 2u) << two.output;
  EXPECT_EQ(b[0], a[4]);
  EXPECT_EQ(b[1], a[5]);
  // Another seed is another run: refused, naming what differs.
  const Job other = shell(mpirun(2) + args + (dir_ / "x.attn").string() + " --seed 2 --resume " + ckpt);
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.output.find("the checkpoint was written for another config"), std::string::npos)
      << other.output;
}

TEST_F(Mpi, TrainLmRefusesRanksWithDifferentData) {
  SKIP_WITHOUT_MPI();
  const std::string a = write_poems(dir_, "a.txt", 40), b = write_poems(dir_, "b.txt", 41);
  const std::string cmd = std::string(ATTN_CLI_PATH) +
                          " train lm --steps 2 --seq-len 16 --batch 8 --min-freq 1 --eval-windows 4 --out " +
                          (dir_ / "m.attn").string() + " --data ";
  // Two programs in one job (mpirun's "A : B"): rank 1 reads another file.
  const Job r =
      shell("timeout 120 " + std::string(kMpiexec) +
            " --allow-run-as-root --oversubscribe --bind-to none -np 1 " + cmd + a + " : -np 1 " + cmd + b);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ranks disagree on"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the text of the data file"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "m.attn"));
}

}  // namespace
}  // namespace attn
