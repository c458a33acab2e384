// The attention-export format (docs/viewer.md): strict reading with messages
// that say where and what, compact writing, and the builders from captured weights.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/viz/export.h>

#include <algorithm>
#include <cmath>

namespace attn::viz {
namespace {

// The shortest decimal that reads back as `v`; "0" for both zeros and "null" for
// NaN and infinities, which the reader then refuses naming the layer, head and row.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == 0) return "0";
  std::string out;
  json::write_number(out, v);
  return out;
}

void write_json_string(std::string& out, const std::string& s) { json::write_string(out, s); }

std::string quoted_token(const std::vector<std::string>& tokens, int64_t i) {
  return "'" + tokens[static_cast<std::size_t>(i)] + "'";
}

std::vector<std::string> read_tokens(const json::Value& root, const std::string& key) {
  const json::Value* v = root.find(key);
  ATTN_CHECK(v != nullptr, "export: missing \"", key, "\" (an array of token strings)");
  ATTN_CHECK(v->is_array(), "export: \"", key, "\" must be an array of strings; got ",
             json::type_name(v->type()));
  ATTN_CHECK(v->size() > 0, "export: \"", key, "\" is empty; expected at least one token");
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json::Value& t = v->at(i);
    ATTN_CHECK(t.is_string(), "export: ", key, "[", i, "] must be a string; got ", json::type_name(t.type()));
    tokens.push_back(t.as_string());
  }
  return tokens;
}

// Reads root[key] as layers of [1, H, rows, cols] and checks every weight.
AttentionSet read_set(const json::Value& root, const std::string& key, const std::string& label,
                      const std::vector<std::string>& row_tokens, const std::vector<std::string>& col_tokens,
                      const std::string& row_name, const std::string& col_name) {
  AttentionSet s;
  s.key = key;
  s.label = label;
  s.row_tokens = row_tokens;
  s.col_tokens = col_tokens;
  const json::Value* v = root.find(key);
  ATTN_CHECK(v != nullptr, "export: missing \"", key, "\" (a list of layers, each [1, H, N, N])");
  ATTN_CHECK(v->is_array(), "export: \"", key, "\" must be an array of layers; got ",
             json::type_name(v->type()));
  ATTN_CHECK(v->size() > 0, "export: \"", key, "\" has no layers; expected at least one");
  const auto rows = static_cast<int64_t>(row_tokens.size());
  const auto cols = static_cast<int64_t>(col_tokens.size());
  for (std::size_t l = 0; l < v->size(); ++l) {
    const json::Value& lv = v->at(l);
    const std::string where = key + " layer " + std::to_string(l);
    ATTN_CHECK(lv.is_array(), "export: ", where, " must be a [1, H, ", rows, ", ", cols, "] array; got ",
               json::type_name(lv.type()));
    ATTN_CHECK(lv.size() == 1, "export: ", where, ": expected batch size 1 (shape [1, H, ", rows, ", ", cols,
               "]); got ", lv.size(), " batch entries");
    const json::Value& hv = lv.at(std::size_t{0});
    ATTN_CHECK(hv.is_array() && hv.size() > 0, "export: ", where,
               ": expected a non-empty array of heads; got ",
               hv.is_array() ? "an empty array" : json::type_name(hv.type()));
    Layer layer;
    layer.heads = static_cast<int64_t>(hv.size());
    layer.rows = rows;
    layer.cols = cols;
    if (!s.layers.empty())
      ATTN_CHECK(layer.heads == s.layers.front().heads, "export: ", where, " has ", layer.heads,
                 " heads; expected ", s.layers.front().heads, " like layer 0");
    // No reserve(heads * rows * cols) up front: a few bytes of "heads" and
    // tokens would make that gigabytes before a single weight is checked.
    for (int64_t h = 0; h < layer.heads; ++h) {
      const std::string wh = where + ", head " + std::to_string(h);
      const json::Value& m = hv.at(static_cast<std::size_t>(h));
      ATTN_CHECK(m.is_array(), "export: ", wh, ": expected a [", rows, ", ", cols, "] matrix; got ",
                 json::type_name(m.type()));
      ATTN_CHECK(static_cast<int64_t>(m.size()) == rows, "export: ", wh, ": expected ", rows,
                 " rows (one per ", row_name, " token); got ", m.size());
      for (int64_t i = 0; i < rows; ++i) {
        const json::Value& r = m.at(static_cast<std::size_t>(i));
        const std::string wr =
            wh + ", row " + std::to_string(i) + " (" + row_name + " " + quoted_token(row_tokens, i) + ")";
        ATTN_CHECK(r.is_array(), "export: ", wr, ": expected an array of ", cols, " weights; got ",
                   json::type_name(r.type()));
        ATTN_CHECK(static_cast<int64_t>(r.size()) == cols, "export: ", wr, ": expected ", cols,
                   " columns (one per ", col_name, " token); got ", r.size());
        double sum = 0;
        for (int64_t j = 0; j < cols; ++j) {
          const json::Value& x = r.at(static_cast<std::size_t>(j));
          ATTN_CHECK(x.is_number(), "export: ", wr, ", column ", j, ": expected a number; got ",
                     json::type_name(x.type()), x.is_null() ? " (NaN or infinity written as null?)" : "");
          const double w = x.as_double();
          ATTN_CHECK(w >= 0, "export: ", wr, ", column ", j, ": weight ", w, " is negative; expected >= 0");
          sum += w;
          layer.w.push_back(w);
        }
        ATTN_CHECK(sum == 0 || std::fabs(sum - 1) <= kRowSumTolerance, "export: ", wr, ": weights sum to ",
                   json_number(sum), "; expected 1 within ", kRowSumTolerance,
                   " (or 0 for a fully masked row)");
      }
    }
    s.layers.push_back(std::move(layer));
  }
  return s;
}

std::string optional_string(const json::Value& root, const std::string& key) {
  const json::Value* v = root.find(key);
  if (v == nullptr) return "";
  ATTN_CHECK(v->is_string(), "export: \"", key, "\" must be a string; got ", json::type_name(v->type()));
  return v->as_string();
}

void write_set(std::string& out, const AttentionSet& s) {
  write_json_string(out, s.key);
  out += ":[";
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    const Layer& layer = s.layers[l];
    out += l ? ",[[" : "[[";
    for (int64_t h = 0; h < layer.heads; ++h) {
      out += h ? ",[" : "[";
      for (int64_t i = 0; i < layer.rows; ++i) {
        out += i ? ",[" : "[";
        for (int64_t j = 0; j < layer.cols; ++j) {
          if (j) out += ',';
          out += json_number(layer.at(h, i, j));
        }
        out += ']';
      }
      out += ']';
    }
    out += "]]";
  }
  out += ']';
}

void write_tokens(std::string& out, const std::string& key, const std::vector<std::string>& tokens) {
  write_json_string(out, key);
  out += ":[";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ',';
    write_json_string(out, tokens[i]);
  }
  out += ']';
}

// root["attribution"] (see docs/viewer.md): every problem named with where and what.
Attribution read_attribution(const json::Value& v, const std::vector<std::string>& tokens) {
  ATTN_CHECK(v.is_object(), "export: \"attribution\" must be an object {\"tokens\", \"methods\", ...}; got ",
             json::type_name(v.type()));
  Attribution a;
  a.tokens = read_tokens(v, "tokens");
  ATTN_CHECK(a.tokens.size() == tokens.size(), "export: attribution has ", a.tokens.size(),
             " tokens; expected ", tokens.size(), " (one per token of \"tokens\")");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    ATTN_CHECK(a.tokens[i] == tokens[i], "export: attribution token ", i, " is '", a.tokens[i],
               "'; expected '", tokens[i], "' as in \"tokens\"");
  a.target = optional_string(v, "target");
  a.baseline = optional_string(v, "baseline");
  if (const json::Value* s = v.find("steps")) {
    ATTN_CHECK(s->is_integer() && s->as_int64() >= 1,
               "export: attribution \"steps\" must be an integer >= 1");
    a.steps = s->as_int64();
  }
  if (const json::Value* c = v.find("completeness_error")) {
    ATTN_CHECK(c->is_number(), "export: attribution \"completeness_error\" must be a number; got ",
               json::type_name(c->type()));
    a.has_completeness = true;
    a.completeness_error = c->as_double();
  }
  const json::Value* m = v.find("methods");
  ATTN_CHECK(m != nullptr && m->is_object() && m->size() > 0,
             "export: attribution needs \"methods\": an object of name -> [one score per token], e.g. "
             "{\"ig\": [...]}");
  for (const auto& [name, scores] : m->members()) {
    const std::string where = "export: attribution method \"" + name + "\"";
    ATTN_CHECK(scores.is_array(), where, " must be an array of numbers; got ",
               json::type_name(scores.type()));
    ATTN_CHECK(scores.size() == tokens.size(), where, " has ", scores.size(), " scores; expected ",
               tokens.size(), " (one per token)");
    std::vector<double> vals;
    for (std::size_t i = 0; i < scores.size(); ++i) {
      const json::Value& x = scores.at(i);
      ATTN_CHECK(x.is_number(), where, ", token ", i, " (", quoted_token(tokens, static_cast<int64_t>(i)),
                 "): expected a number; got ", json::type_name(x.type()),
                 x.is_null() ? " (NaN or infinity written as null?)" : "");
      vals.push_back(x.as_double());
    }
    a.methods.emplace_back(name, std::move(vals));
  }
  return a;
}

void write_attribution(std::string& out, const Attribution& a) {
  write_json_string(out, "attribution");
  out += ":{";
  write_tokens(out, "tokens", a.tokens);
  if (!a.target.empty()) {
    out += ',';
    write_json_string(out, "target");
    out += ':';
    write_json_string(out, a.target);
  }
  if (!a.baseline.empty()) {
    out += ',';
    write_json_string(out, "baseline");
    out += ':';
    write_json_string(out, a.baseline);
  }
  if (a.steps > 0) out += ",\"steps\":" + std::to_string(a.steps);
  if (a.has_completeness) out += ",\"completeness_error\":" + json_number(a.completeness_error);
  out += ",\"methods\":{";
  for (std::size_t k = 0; k < a.methods.size(); ++k) {
    if (k) out += ',';
    write_json_string(out, a.methods[k].first);
    out += ":[";
    for (std::size_t i = 0; i < a.methods[k].second.size(); ++i) {
      if (i) out += ',';
      out += json_number(a.methods[k].second[i]);
    }
    out += ']';
  }
  out += "}}";
}

}  // namespace

const AttentionSet& Export::set(const std::string& key) const {
  std::string present;
  for (const auto& s : sets) {
    if (s.key == key) return s;
    present += (present.empty() ? "" : ", ") + s.key;
  }
  ATTN_CHECK(false, "export has no \"", key, "\"; it has ", present);
  return sets.front();  // unreachable
}

Export parse_export(std::string_view text) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const Error& e) {
    throw Error(std::string("export: malformed JSON (") + std::to_string(text.size()) +
                " bytes): " + e.what());
  }
  ATTN_CHECK(root.is_object(),
             "export: expected a JSON object {\"tokens\": [...], \"attention\": [...]}; got ",
             json::type_name(root.type()));
  Export e;
  e.model = optional_string(root, "model");
  e.text = optional_string(root, "text");
  const bool self = root.find("attention") != nullptr || root.find("tokens") != nullptr;
  const bool encdec = root.find("encoder_tokens") != nullptr || root.find("decoder_tokens") != nullptr ||
                      root.find("cross_attention") != nullptr;
  ATTN_CHECK(self || encdec,
             "export: expected \"tokens\" and \"attention\" (self-attention) or \"encoder_tokens\", "
             "\"decoder_tokens\" and at least one of \"encoder_attention\", \"decoder_attention\", "
             "\"cross_attention\" (encoder-decoder); found neither");
  ATTN_CHECK(
      !(self && encdec),
      "export: mixes the self-attention layout (\"tokens\"/\"attention\") with the encoder-decoder one "
      "(\"encoder_tokens\"/\"decoder_tokens\"/\"cross_attention\"); expected one of them");
  if (self) {
    e.tokens = read_tokens(root, "tokens");
    e.sets.push_back(read_set(root, "attention", "self-attention", e.tokens, e.tokens, "query", "key"));
  } else {
    e.encoder_decoder = true;
    e.encoder_tokens = read_tokens(root, "encoder_tokens");
    e.decoder_tokens = read_tokens(root, "decoder_tokens");
    ATTN_CHECK(
        root.find("encoder_attention") || root.find("decoder_attention") || root.find("cross_attention"),
        "export: encoder-decoder layout without attention; expected at least one of "
        "\"encoder_attention\", \"decoder_attention\", \"cross_attention\"");
    if (root.find("encoder_attention"))
      e.sets.push_back(read_set(root, "encoder_attention", "encoder self-attention", e.encoder_tokens,
                                e.encoder_tokens, "encoder query", "encoder key"));
    if (root.find("decoder_attention"))
      e.sets.push_back(read_set(root, "decoder_attention", "decoder self-attention", e.decoder_tokens,
                                e.decoder_tokens, "decoder query", "decoder key"));
    if (root.find("cross_attention"))
      e.sets.push_back(read_set(root, "cross_attention", "cross-attention", e.decoder_tokens,
                                e.encoder_tokens, "decoder (target)", "encoder (source)"));
  }
  if (const json::Value* attr = root.find("attribution")) {
    ATTN_CHECK(!e.encoder_decoder,
               "export: \"attribution\" goes with the self-attention layout (\"tokens\"/\"attention\"); "
               "got it in an encoder-decoder export");
    e.attribution = read_attribution(*attr, e.tokens);
  }
  if (const json::Value* names = root.find("layer_names")) {
    ATTN_CHECK(names->is_array(), "export: \"layer_names\" must be an array of strings; got ",
               json::type_name(names->type()));
    std::size_t most = 0;
    for (const auto& s : e.sets) most = std::max(most, s.layers.size());
    ATTN_CHECK(names->size() == most, "export: \"layer_names\" has ", names->size(), " names; expected ",
               most, " (one per layer)");
    for (std::size_t i = 0; i < names->size(); ++i) {
      ATTN_CHECK(names->at(i).is_string(), "export: layer_names[", i, "] must be a string; got ",
                 json::type_name(names->at(i).type()));
      e.layer_names.push_back(names->at(i).as_string());
    }
  }
  return e;
}

std::string export_json(const Export& e) {
  std::string out = "{";
  auto comma = [&] {
    if (out.size() > 1) out += ',';
  };
  if (!e.model.empty()) {
    comma();
    write_json_string(out, "model");
    out += ':';
    write_json_string(out, e.model);
  }
  if (!e.text.empty()) {
    comma();
    write_json_string(out, "text");
    out += ':';
    write_json_string(out, e.text);
  }
  if (!e.layer_names.empty()) {
    comma();
    write_tokens(out, "layer_names", e.layer_names);
  }
  if (e.encoder_decoder) {
    comma();
    write_tokens(out, "encoder_tokens", e.encoder_tokens);
    comma();
    write_tokens(out, "decoder_tokens", e.decoder_tokens);
  } else {
    comma();
    write_tokens(out, "tokens", e.tokens);
  }
  for (const auto& s : e.sets) {
    comma();
    write_set(out, s);
  }
  if (e.attribution) {
    comma();
    write_attribution(out, *e.attribution);
  }
  out += "}";
  return out;
}

void save_export(const std::string& path, const Export& e, const std::string& who) {
  const std::string text = export_json(e);
  (void)parse_export(text);  // what is written reads back with the one reader
  io::write_file_atomically(path, text + "\n", who);
}

Layer layer_from_weights(const Tensor& w) {
  ATTN_CHECK(w.rank() == 4 && w.size(0) == 1,
             "attention export: expected captured weights [1, H, rows, cols]; got ", shape_str(w.shape()));
  Layer l;
  l.heads = w.size(1), l.rows = w.size(2), l.cols = w.size(3);
  l.w = w.to_vector();
  return l;
}

Layer layer_from_floats(const std::vector<float>& w, int64_t heads, int64_t rows, int64_t cols) {
  ATTN_CHECK(static_cast<int64_t>(w.size()) == heads * rows * cols, "attention export: expected ", heads,
             " x ", rows, " x ", cols, " = ", heads * rows * cols, " weights; got ", w.size());
  Layer l;
  l.heads = heads, l.rows = rows, l.cols = cols;
  l.w.assign(w.begin(), w.end());
  return l;
}

Export self_attention_export(SelfAttentionInput in) {
  Export e;
  e.model = std::move(in.model);
  e.text = std::move(in.text);
  e.tokens = in.tokens;
  AttentionSet s{"attention", "self-attention", in.tokens, std::move(in.tokens), std::move(in.layers)};
  for (std::size_t l = 0; l < s.layers.size(); ++l) e.layer_names.push_back("layer " + std::to_string(l));
  e.sets.push_back(std::move(s));
  return e;
}

Export encoder_decoder_export(EncoderDecoderInput in) {
  Export e;
  e.encoder_decoder = true;
  e.model = std::move(in.model);
  e.text = std::move(in.text);
  e.encoder_tokens = std::move(in.encoder_tokens);
  e.decoder_tokens = std::move(in.decoder_tokens);
  if (!in.encoder.empty())
    e.sets.push_back({"encoder_attention", "encoder self-attention", e.encoder_tokens, e.encoder_tokens,
                      std::move(in.encoder)});
  if (!in.decoder.empty())
    e.sets.push_back({"decoder_attention", "decoder self-attention", e.decoder_tokens, e.decoder_tokens,
                      std::move(in.decoder)});
  if (!in.cross.empty())
    e.sets.push_back(
        {"cross_attention", "cross-attention", e.decoder_tokens, e.encoder_tokens, std::move(in.cross)});
  ATTN_CHECK(!e.sets.empty(),
             "attention export: an encoder-decoder export needs encoder, decoder or "
             "cross-attention layers; got none");
  return e;
}

}  // namespace attn::viz
