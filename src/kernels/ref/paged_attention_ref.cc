// The double oracle of the paged attention.
#include "kernels/ref/paged_attention_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace attn::kernels::ref {

void paged_attention(const PagedAttnArgs& a) {
  const int64_t G = a.H / a.Hkv, D = a.D;
  std::vector<double> sc, o(static_cast<std::size_t>(D));
  for (int64_t si = 0; si < a.n_seqs; ++si) {
    const PagedSeqArgs& s = a.seqs[si];
    for (int64_t r = 0; r < s.queries; ++r) {
      int64_t lo, hi;
      paged_row_range(a, s, r, &lo, &hi);
      for (int64_t h = a.g0 * G; h < (a.g1 ? a.g1 : a.Hkv) * G; ++h) {
        const int64_t g = h / G, row = (s.row0 + r) * a.H + h;
        const float* q = a.q + row * D;
        sc.assign(static_cast<std::size_t>(std::max<int64_t>(hi - lo + 1, 0)), 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = lo; j <= hi; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += static_cast<double>(q[d]) * paged_kv_value(a, s, false, g, j, d);
          double x = dot * a.scale;
          if (a.softcap > 0) x = a.softcap * std::tanh(x / a.softcap);
          sc[static_cast<std::size_t>(j - lo)] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = lo; j <= hi; ++j)
          for (int64_t d = 0; d < D; ++d)
            o[static_cast<std::size_t>(d)] +=
                sc[static_cast<std::size_t>(j - lo)] * paged_kv_value(a, s, true, g, j, d);
        for (int64_t d = 0; d < D; ++d)
          a.out[row * D + d] = sum > 0 ? static_cast<float>(o[static_cast<std::size_t>(d)] / sum) : 0.0f;
        if (a.lse)
          a.lse[row] =
              sum > 0 ? static_cast<float>(mx + std::log(sum)) : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

}  // namespace attn::kernels::ref
