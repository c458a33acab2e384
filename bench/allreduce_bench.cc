// The gradient all-reduce of data-parallel training on its own (include/attn/train/comm.h):
// MPI_Allreduce (sum, f32, in place) through the MPI communicator for message sizes from 4 KB to
// 32 MB, best of --reps calls after a warm-up, as time and bus bandwidth (2·(N−1)/N · bytes / time,
// what a ring all-reduce moves per rank, at the best time); the median shows the machine's noise. 8 MB is the
// tiny translator's gradient (2.0 M parameters).
//
//   mpirun -np 2 build/release/bench/allreduce_bench [--reps 20] [--max-mb 32]
//
// Built always; without MPI (ATTN_MPI=OFF) it says so and exits 0.
#include <attn/train/comm.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if ATTN_HAVE_MPI
#include <attn/train/mpi.h>
#endif

int main(int argc, char** argv) {
#if !ATTN_HAVE_MPI
  (void)argc, (void)argv;
  std::printf("allreduce_bench: attn was built without MPI (ATTN_MPI=OFF); nothing to measure\n");
  return 0;
#else
  auto comm = attn::train::mpi_communicator(&argc, &argv);
  int reps = 20;
  double max_mb = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--max-mb")) max_mb = std::atof(argv[i + 1]);
  }
  const int n = comm->size();
  if (comm->rank() == 0)
    std::printf("all-reduce (sum, f32, in place) over %d ranks (%s), %d calls\n%12s %12s %12s %14s\n", n,
                comm->name().c_str(), reps, "bytes", "best ms", "median ms", "bus GB/s");
  for (std::size_t bytes = 4096; bytes <= static_cast<std::size_t>(max_mb * 1048576); bytes *= 4) {
    std::vector<float> buf(bytes / sizeof(float), 1.0f);
    comm->allreduce_sum(buf.data(), buf.size());  // warm-up
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
      comm->barrier();
      const auto t0 = std::chrono::steady_clock::now();
      comm->allreduce_sum(buf.data(), buf.size());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      comm->allreduce_sum(&s, 1);  // the mean over the ranks of this call
      times.push_back(s / n);
    }
    std::sort(times.begin(), times.end());
    const double best = times.front(), median = times[times.size() / 2];
    if (comm->rank() == 0)
      std::printf("%12zu %12.3f %12.3f %14.2f\n", bytes, 1e3 * best, 1e3 * median,
                  2.0 * (n - 1) / n * static_cast<double>(bytes) / best / 1e9);
  }
  return 0;
#endif
}
