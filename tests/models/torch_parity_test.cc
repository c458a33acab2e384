// The Transformer models against the same models written in plain PyTorch
// (python/reference/transformer_fixtures.py): the same weights are loaded by
// name, then every named intermediate (embeddings, each layer's output, final
// norm, logits) is compared in forward order and the first one that diverges
// is reported by name with its max error; then the loss and every parameter
// gradient.
#include <attn/core/autograd.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/models/transformer.h>
#include <attn/ops/basic.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "testing/tolerances.h"

namespace attn {
namespace {

using models::TransformerConfig;
using testing::all_close;

const char* kFixture = "tests/models/data/transformer_torch.safetensors";

struct Fixture {
  io::SafeTensorsFile file;
  std::string name;
  Tensor in(const std::string& n, DType t = DType::i64) const { return file.load(name + "/in/" + n, t); }
  std::vector<int64_t> lengths(const std::string& n) const {
    std::vector<int64_t> out;
    for (double v : in(n).to_vector()) out.push_back(static_cast<int64_t>(v));
    return out;
  }
};

// Max |a - e| (for the divergence report).
double max_abs_error(const Tensor& a, const Tensor& e) {
  auto x = a.to_vector(), y = e.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

class TorchParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchParity, LayerByLayerThenLossAndGradients) {
  Fixture fx{io::SafeTensorsFile::open(testing::source_path(kFixture)), GetParam()};
  const auto& meta = fx.file.metadata();
  const TransformerConfig config = TransformerConfig::from_json(json::parse(meta.at(fx.name + "/config")));
  std::map<std::string, Tensor> params;
  const std::string ppre = fx.name + "/param/";
  for (const auto& n : fx.file.names())
    if (n.rfind(ppre, 0) == 0) params[n.substr(ppre.size())] = fx.file.load(n);

  std::unique_ptr<nn::Module> model;
  nn::Trace trace;
  models::ModelOutput out;
  if (fx.name == "encdec") {
    auto m = std::make_unique<models::EncoderDecoder>(config);
    m->load_parameters(params);
    m->eval();
    out = m->forward(fx.in("src"), fx.lengths("src_lengths"), fx.in("tgt_in"), fx.in("targets"), &trace);
    model = std::move(m);
  } else if (fx.name == "classifier") {
    auto m = std::make_unique<models::EncoderClassifier>(config);
    m->load_parameters(params);
    m->eval();
    out = m->forward(fx.in("ids"), fx.lengths("lengths"), fx.in("labels"), false, &trace);
    model = std::move(m);
  } else {
    auto m = std::make_unique<models::DecoderLM>(config);
    m->load_parameters(params);
    m->eval();
    out = m->forward(fx.in("ids"), fx.in("targets"), nullptr, &trace);
    model = std::move(m);
  }

  // Intermediates, in forward order: stop at the first divergence.
  const json::Value names = json::parse(meta.at(fx.name + "/trace"));
  ASSERT_EQ(trace.size(), names.size()) << "the engine recorded a different number of intermediates";
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const std::string& n = names.at(i).as_string();
    ASSERT_EQ(trace[i].first, n) << "intermediate " << i << " has another name";
    const Tensor expected = fx.file.load(fx.name + "/trace/" + n);
    auto ok = all_close(trace[i].second, expected, testing::tol::kTorchParity);
    ASSERT_TRUE(ok) << "first divergence at '" << n << "' (max abs error "
                    << max_abs_error(trace[i].second, expected) << "): " << ok.message();
  }

  ASSERT_TRUE(out.loss.defined());
  EXPECT_ALL_CLOSE(out.loss, fx.file.load(fx.name + "/loss"), testing::tol::kTorchParity);
  out.loss.backward();
  const auto named = model->named_parameters();
  EXPECT_EQ(named.size(), params.size());
  for (const auto& [n, p] : named) {
    ASSERT_TRUE(p.grad().defined()) << n << " got no gradient";
    const Tensor expected = fx.file.load(fx.name + "/grad/" + n);
    EXPECT_TRUE(all_close(p.grad(), expected, testing::tol::kTorchParity))
        << "gradient of '" << n << "' (max abs error " << max_abs_error(p.grad(), expected) << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchParity, ::testing::Values("encdec", "classifier", "lm"),
                         [](const auto& info) { return info.param; });

// One EncoderLayer / DecoderLayer alone, loss = sum(out · dout): output,
// parameter gradients and the gradients of the inputs (x, memory).
class LayerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerParity, OutputAndGradients) {
  Fixture fx{io::SafeTensorsFile::open(testing::source_path(kFixture)), GetParam()};
  const TransformerConfig config =
      TransformerConfig::from_json(json::parse(fx.file.metadata().at(fx.name + "/config")));
  std::map<std::string, Tensor> params;
  const std::string ppre = fx.name + "/param/";
  for (const auto& n : fx.file.names())
    if (n.rfind(ppre, 0) == 0) params[n.substr(ppre.size())] = fx.file.load(n);
  nn::InitRng rng(1);
  Tensor x = fx.in("x", DType::f32).set_requires_grad(true);
  Tensor out, memory;
  std::unique_ptr<nn::Module> layer;
  if (fx.name == "encoder_layer") {
    auto l = std::make_unique<nn::EncoderLayer>(config.layer_config(), rng, 0);
    l->load_parameters(params);
    l->eval();
    nn::AttentionCall call;
    call.key_lengths = fx.lengths("lengths");
    out = l->forward(x, call);
    layer = std::move(l);
  } else {
    auto l = std::make_unique<nn::DecoderLayer>(config.layer_config(), true, rng, 0);
    l->load_parameters(params);
    l->eval();
    memory = fx.in("memory", DType::f32).set_requires_grad(true);
    nn::AttentionCall call;
    call.memory_lengths = fx.lengths("memory_lengths");
    out = l->forward(x, memory, call);
    layer = std::move(l);
  }
  ASSERT_TRUE(all_close(out, fx.file.load(fx.name + "/trace/out"), testing::tol::kTorchParity));
  sum(out * fx.in("dout", DType::f32)).backward();
  for (const auto& [n, p] : layer->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_TRUE(all_close(p.grad(), fx.file.load(fx.name + "/grad/" + n), testing::tol::kTorchParity)) << n;
  }
  EXPECT_ALL_CLOSE(x.grad(), fx.file.load(fx.name + "/grad_in/x"), testing::tol::kTorchParity);
  if (memory.defined()) {
    EXPECT_ALL_CLOSE(memory.grad(), fx.file.load(fx.name + "/grad_in/memory"), testing::tol::kTorchParity);
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerParity, ::testing::Values("encoder_layer", "decoder_layer"),
                         [](const auto& info) { return info.param; });

// A broken weight must be caught, and named, by the layer-by-layer check.
TEST(TorchParityHarness, PerturbedWeightDivergesAtItsLayer) {
  Fixture fx{io::SafeTensorsFile::open(testing::source_path(kFixture)), "encdec"};
  const TransformerConfig config =
      TransformerConfig::from_json(json::parse(fx.file.metadata().at("encdec/config")));
  std::map<std::string, Tensor> params;
  for (const auto& n : fx.file.names())
    if (n.rfind("encdec/param/", 0) == 0) params[n.substr(13)] = fx.file.load(n);
  Tensor w = params.at("encoder.layers.1.ffn.w2.weight");
  w.set({0, 0}, w.at({0, 0}) + 0.05);
  models::EncoderDecoder m(config);
  m.load_parameters(params);
  m.eval();
  nn::Trace trace;
  NoGradGuard no_grad;
  m.forward(fx.in("src"), fx.lengths("src_lengths"), fx.in("tgt_in"), Tensor(), &trace);
  std::string first;
  for (const auto& [n, t] : trace)
    if (!all_close(t, fx.file.load("encdec/trace/" + n), testing::tol::kTorchParity)) {
      first = n;
      break;
    }
  EXPECT_EQ(first, "encoder.layers.1");
}

}  // namespace
}  // namespace attn
