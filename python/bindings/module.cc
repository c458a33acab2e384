// attn._attn: the compiled half of the Python package (python/attn/ is the
// other). Every function here calls the same library entry points as the CLI
// (include/attn/ops/attention.h, include/attn/tasks/, include/attn/teach/),
// with the GIL released during compute. The Python side (python/attn/_core.py)
// normalises arguments (ranks, dtypes, broadcasting) before calling these.
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>
#include <attn/version.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "convert.h"
#include "team.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace attn::python {
void bind_models(nb::module_& m);
}

namespace {

using attn::python::AnyArray;
using attn::python::ErrorKind;
using attn::python::to_numpy;
using attn::python::to_tensor;
using attn::python::without_gil;

// The options shared by attention and attention_backward, from keyword arguments.
struct Args {
  std::optional<AnyArray> allow, bias;
  bool causal = false;
  std::string align = "top_left";
  std::optional<double> scale;
  std::vector<int64_t> key_lengths;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0, dropout_p = 0;
  uint64_t seed = 0;
  std::string backend = "automatic";
};

attn::AttentionOptions options_from(const Args& a) {
  attn::AttentionOptions o;
  if (a.allow) o.allow = to_tensor(*a.allow, "attn_mask");
  if (a.bias) o.bias = to_tensor(*a.bias, "attn_mask");
  o.causal = a.causal;
  if (a.align == "top_left") {
    o.align = attn::Align::top_left;
  } else if (a.align == "bottom_right") {
    o.align = attn::Align::bottom_right;
  } else {
    throw nb::value_error(("align must be 'top_left' or 'bottom_right'; got '" + a.align + "'").c_str());
  }
  o.scale = a.scale;
  o.key_lengths = a.key_lengths;
  o.window_left = a.window_left;
  o.window_right = a.window_right;
  o.softcap = a.softcap;
  o.dropout_p = a.dropout_p;
  o.dropout_seed = a.seed;
  if (a.backend == "automatic") {
    o.backend = attn::Backend::automatic;
  } else if (a.backend == "reference") {
    o.backend = attn::Backend::reference;
  } else if (a.backend == "fused") {
    o.backend = attn::Backend::fused;
  } else {
    throw nb::value_error(
        ("backend must be 'automatic', 'reference' or 'fused'; got '" + a.backend + "'").c_str());
  }
  return o;
}

Args make_args(std::optional<AnyArray> allow, std::optional<AnyArray> bias, bool causal, std::string align,
               std::optional<double> scale, std::vector<int64_t> key_lengths, int64_t window_left,
               int64_t window_right, double softcap, double dropout_p, uint64_t seed, std::string backend) {
  Args a;
  a.allow = std::move(allow);
  a.bias = std::move(bias);
  a.causal = causal;
  a.align = std::move(align);
  a.scale = scale;
  a.key_lengths = std::move(key_lengths);
  a.window_left = window_left;
  a.window_right = window_right;
  a.softcap = softcap;
  a.dropout_p = dropout_p;
  a.seed = seed;
  a.backend = std::move(backend);
  return a;
}

// A writable float32/float64 array attention_into writes the output into (borrowed; its layout is
// checked by the library).
using OutArray = nb::ndarray<nb::device::cpu>;

attn::Tensor out_tensor(const OutArray& a) {
  const auto dt = a.dtype();
  const bool f32 = dt == nb::dtype<float>(), f64 = dt == nb::dtype<double>();
  if (!f32 && !f64) throw nb::value_error("out: expected a writable float32 or float64 array");
  attn::Shape shape(a.ndim()), strides(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) {
    shape[d] = static_cast<int64_t>(a.shape(d));
    strides[d] = static_cast<int64_t>(a.stride(d));
  }
  auto* keep = new OutArray(a);
  return attn::Tensor::borrow(a.data(), f32 ? attn::DType::f32 : attn::DType::f64, shape, strides, [keep] {
    nb::gil_scoped_acquire gil;
    delete keep;
  });
}

nb::tuple attention(const AnyArray& q, const AnyArray& k, const AnyArray& v, std::optional<AnyArray> allow,
                    std::optional<AnyArray> bias, bool causal, std::string align, std::optional<double> scale,
                    std::vector<int64_t> key_lengths, int64_t window_left, int64_t window_right,
                    double softcap, double dropout_p, uint64_t seed, std::string backend, bool capture,
                    std::vector<int64_t> batches, std::vector<int64_t> heads, std::vector<int64_t> rows,
                    int team_threads, std::optional<OutArray> into) {
  attn::AttentionOptions o = options_from(
      make_args(std::move(allow), std::move(bias), causal, std::move(align), scale, std::move(key_lengths),
                window_left, window_right, softcap, dropout_p, seed, std::move(backend)));
  o.capture.enabled = capture;
  o.capture.batches = std::move(batches);
  o.capture.heads = std::move(heads);
  o.capture.rows = std::move(rows);
  const attn::Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
  const attn::Tensor tout = into ? out_tensor(*into) : attn::Tensor();
  attn::AttentionResult r = without_gil(ErrorKind::value, [&] {
    const attn::TeamScope team(team_threads > 0 ? attn::python::openmp_team() : nullptr, team_threads);
    return tout.defined() ? attn::attention_into(tq, tk, tv, tout, o) : attn::attention(tq, tk, tv, o);
  });
  nb::object w = r.weights.defined() ? to_numpy(r.weights) : nb::none();
  // With `into`, the output is the caller's array: None in its place.
  return nb::make_tuple(tout.defined() ? nb::none() : to_numpy(r.out), to_numpy(r.lse), w);
}

nb::tuple attention_backward(const AnyArray& q, const AnyArray& k, const AnyArray& v, const AnyArray& out,
                             const AnyArray& lse, const AnyArray& dout, std::optional<AnyArray> allow,
                             std::optional<AnyArray> bias, bool causal, std::string align,
                             std::optional<double> scale, std::vector<int64_t> key_lengths,
                             int64_t window_left, int64_t window_right, double softcap, double dropout_p,
                             uint64_t seed, std::string backend, int team_threads) {
  const attn::AttentionOptions o = options_from(
      make_args(std::move(allow), std::move(bias), causal, std::move(align), scale, std::move(key_lengths),
                window_left, window_right, softcap, dropout_p, seed, std::move(backend)));
  const attn::Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
  const attn::Tensor tout = to_tensor(out, "out"), tlse = to_tensor(lse, "lse"),
                     tdout = to_tensor(dout, "dout");
  attn::AttentionGrads g = without_gil(ErrorKind::value, [&] {
    const attn::TeamScope team(team_threads > 0 ? attn::python::openmp_team() : nullptr, team_threads);
    return attn::attention_backward(tq, tk, tv, tout, tlse, tdout, o);
  });
  return nb::make_tuple(to_numpy(g.dq), to_numpy(g.dk), to_numpy(g.dv));
}

// For bench/python_overhead.py: seconds per attn::attention call on these
// inputs, timed in C++ (the same call attn.attention makes, without Python).
double time_attention_cpp(const AnyArray& q, const AnyArray& k, const AnyArray& v, int64_t iterations) {
  const attn::Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
  return without_gil(ErrorKind::value, [&] {
    attn::AttentionOptions o;
    attn::attention(tq, tk, tv, o);  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iterations; ++i) attn::attention(tq, tk, tv, o);
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(iterations);
  });
}

}  // namespace

NB_MODULE(_attn, m) {
  m.doc() = "attn's compiled module (use the attn package)";
  m.def("version", [] { return std::string(attn::version()); });
  m.def("num_threads", [] { return attn::num_threads(); });
  m.def(
      "set_num_threads",
      [](int n) {
        try {
          attn::set_num_threads(n);
        } catch (const attn::Error& e) {
          attn::python::raise_from(e, ErrorKind::value);
        }
      },
      "n"_a);
  m.def("attention", &attention, "q"_a, "k"_a, "v"_a, "allow"_a.none(), "bias"_a.none(), "causal"_a,
        "align"_a, "scale"_a.none(), "key_lengths"_a, "window_left"_a, "window_right"_a, "softcap"_a,
        "dropout_p"_a, "seed"_a, "backend"_a, "capture"_a, "batches"_a, "heads"_a, "rows"_a,
        "team_threads"_a = 0, "out"_a.none() = nb::none());
  m.def("attention_backward", &attention_backward, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dout"_a,
        "allow"_a.none(), "bias"_a.none(), "causal"_a, "align"_a, "scale"_a.none(), "key_lengths"_a,
        "window_left"_a, "window_right"_a, "softcap"_a, "dropout_p"_a, "seed"_a, "backend"_a,
        "team_threads"_a = 0);
  // team_threads > 0: the call's kernels run as an OpenMP parallel region of that many threads (the
  // runtime torch uses) instead of attn's pool; attn.torch passes torch.get_num_threads().
  m.def("openmp_max_threads", &attn::python::openmp_max_threads);
  m.def("time_attention_cpp", &time_attention_cpp, "q"_a, "k"_a, "v"_a, "iterations"_a);
  attn::python::bind_models(m);
}
