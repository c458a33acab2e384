// POST /v1/chat/completions and POST /v1/completions: each request joins the engine's batch
// (serve/engine.h: one model, continuous batching, the prefix cache) and turns its tokens into text
// here: stop strings, valid UTF-8 pieces, and server-sent events when "stream" is true.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/models/generate.h>
#include <attn/models/text_stream.h>
#include <attn/viz/attention.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <random>

#include "serve/impl.h"

namespace attn::serve::detail {
namespace {

// The text of a message's content: a string, or a list of {"type": "text", "text": ...} parts.
std::string content_text(const json::Value& msg, std::size_t i) {
  const json::Value* c = member(msg, "content");
  if (!c) return "";
  if (c->is_string()) return c->as_string();
  if (c->is_array()) {
    std::string out;
    for (const json::Value& part : c->items()) {
      const json::Value* type = part.find("type");
      const json::Value* text = part.find("text");
      if (!part.is_object() || !type || !type->is_string() || type->as_string() != "text" || !text ||
          !text->is_string())
        throw bad_request(
            "messages[" + std::to_string(i) +
                "].content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported",
            "messages", "invalid_content");
      out += text->as_string();
    }
    return out;
  }
  throw bad_request("messages[" + std::to_string(i) + "].content must be a string or a list of text parts",
                    "messages", "invalid_type");
}

std::string chunk_prefix(const GenRequest& r) {
  std::string out = "{\"id\":";
  json::write_string(out, r.id);
  out += r.chat ? ",\"object\":\"chat.completion.chunk\"" : ",\"object\":\"text_completion\"";
  out += ",\"created\":" + std::to_string(r.created) + ",\"model\":";
  json::write_string(out, r.model);
  return out;
}

std::string usage_json(int64_t prompt, int64_t completion) {
  return "{\"prompt_tokens\":" + std::to_string(prompt) +
         ",\"completion_tokens\":" + std::to_string(completion) +
         ",\"total_tokens\":" + std::to_string(prompt + completion) + "}";
}

// One streamed chunk: a piece of text (finish empty) or the last one (finish set, text empty).
std::string chunk_json(const GenRequest& r, const std::string& text, const std::string& finish, bool role,
                       const std::string& rows = "") {
  std::string out = chunk_prefix(r) + ",\"choices\":[{\"index\":0,";
  if (r.chat) {
    out += "\"delta\":{";
    if (role) out += "\"role\":\"assistant\",";
    if (finish.empty()) {
      out += "\"content\":";
      json::write_string(out, text);
    } else if (role) {
      out.pop_back();
    }
    out += "}";
  } else {
    out += "\"text\":";
    json::write_string(out, text);
  }
  out += ",\"logprobs\":null,\"finish_reason\":";
  if (finish.empty())
    out += "null";
  else
    json::write_string(out, finish);
  out += "}]";
  if (!rows.empty()) {  // stream_attention: the rows that chose this chunk's tokens
    out += ",\"attention_rows\":{\"layers\":[";
    for (std::size_t i = 0; i < r.row_layers.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(r.row_layers[i]);
    }
    out += "],\"heads\":[";
    for (std::size_t i = 0; i < r.row_heads.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(r.row_heads[i]);
    }
    out += "],\"tokens\":[" + rows + "]}";
  }
  out += "}";
  return out;
}

}  // namespace

GenResult Impl::generate(GenStream& st, const GenRequest& r, const PieceSink& on_piece,
                         const std::function<bool()>& client_gone) {
  GenResult out;
  // With stream_attention: the attention rows of the tokens since the last piece, as JSON objects.
  std::string rows;
  const auto P = static_cast<int64_t>(r.prompt_ids.size());
  const auto add_rows = [&](int32_t token, const std::vector<float>& w) {
    const auto i = static_cast<int64_t>(out.ids.size()) - 1;  // this token's index in the reply
    const int64_t keys = P + i;                               // the positions its row saw
    rows += rows.empty() ? "{" : ",{";
    rows += "\"index\":" + std::to_string(i) + ",\"token\":" + std::to_string(token) +
            ",\"position\":" + std::to_string(keys - 1) + ",\"weights\":[";
    const float* v = w.data();
    for (std::size_t l = 0; l < r.row_layers.size(); ++l) {
      rows += l ? ",[" : "[";
      for (std::size_t h = 0; h < r.row_heads.size(); ++h) {
        rows += h ? ",[" : "[";
        for (int64_t j = 0; j < keys; ++j) {
          if (j) rows += ',';
          append_float(rows, *v++);
        }
        rows += ']';
      }
      rows += ']';
    }
    rows += "]}";
  };
  // The reply as valid UTF-8 pieces, held back where a character or a stop string may continue.
  models::TextStream stream([this](const std::vector<int32_t>& ids) { return gen_model->decode(ids); },
                            r.stop);
  bool cancelled = false, ended = false;
  // A piece of text to the client: false ends the generation (the client went away).
  const auto emit = [&](const std::string& piece) {
    if (piece.empty()) return true;
    out.text += piece;
    const std::string sent = std::move(rows);
    rows.clear();
    if (!on_piece || on_piece(piece, sent)) return true;
    cancelled = true;
    return false;
  };
  models::runtime::FinishReason reason = models::runtime::FinishReason::stop;
  std::string error;
  // The engine's tokens as they come; the text is written here, outside the engine's steps.
  while (!ended) {
    std::deque<int32_t> got;
    std::deque<std::vector<float>> got_rows;
    bool finished = false;
    {
      std::unique_lock<std::mutex> lk(st.mu);
      st.cv.wait_for(lk, std::chrono::milliseconds(client_gone ? 100 : 1000),
                     [&] { return !st.tokens.empty() || st.finished; });
      got.swap(st.tokens);
      got_rows.swap(st.rows);
      finished = st.finished;
      reason = st.reason;
      error = st.error;
    }
    for (std::size_t k = 0; k < got.size(); ++k) {
      const int32_t t = got[k];
      out.ids.push_back(t);
      if (k < got_rows.size()) add_rows(t, got_rows[k]);
      if (!emit(stream.push(t)) || stream.stopped()) {
        ended = true;
        break;
      }
    }
    if (!ended && client_gone && client_gone()) cancelled = ended = true;
    if (!ended && finished) break;
  }
  metrics.tokens("completion", static_cast<int64_t>(out.ids.size()));
  if (ended) {  // a stop string, or the client went away: the engine frees the sequence at its next step
    engine->cancel(st);
    out.finish_reason = cancelled ? "cancelled" : "stop";
    return out;
  }
  if (reason == models::runtime::FinishReason::error || reason == models::runtime::FinishReason::cancelled)
    throw HttpError(500,
                    "generation failed: " + (error.empty() ? std::string("the engine stopped it") : error),
                    "", "internal_error");
  out.finish_reason = reason == models::runtime::FinishReason::length ? "length" : "stop";
  if (!emit(stream.finish()) || stream.stopped()) out.finish_reason = cancelled ? "cancelled" : "stop";
  out.rows = std::move(rows);  // tokens whose text never became a piece: their rows go with the last chunk
  return out;
}

void Impl::completions(const http::Request& req, http::Response& res, bool chat) {
  const auto in_flight = std::make_shared<InFlight>(generations_in_flight);  // before the check stop() makes
  require_ready();
  const json::Value body = parse_body(req);
  const Limits& l = options.limits;
  auto r = std::make_shared<GenRequest>();
  r->chat = chat;
  r->model = check_model(body, "generation", generate_id, generate_aliases);
  r->id = new_id(chat ? "chatcmpl" : "cmpl");
  r->created = unix_time();
  GenModel& any = *gen_model;
  // The prompt.
  text::TextPieces pieces;
  if (chat) {
    const json::Value* msgs = member(body, "messages");
    if (!msgs || !msgs->is_array() || msgs->size() == 0)
      throw bad_request("'messages' is required: a non-empty list of {\"role\", \"content\"}", "messages",
                        "missing_messages");
    if (msgs->size() > 1024)
      throw bad_request("too many messages (the limit is 1024)", "messages", "too_many_messages");
    std::vector<std::pair<std::string, std::string>> turns;
    for (std::size_t i = 0; i < msgs->size(); ++i) {
      const json::Value& m = msgs->at(i);
      if (!m.is_object())
        throw bad_request("messages[" + std::to_string(i) + "] must be an object", "messages",
                          "invalid_type");
      const json::Value* role = m.find("role");
      if (!role || !role->is_string())
        throw bad_request("messages[" + std::to_string(i) + "].role is required (system, user or assistant)",
                          "messages", "invalid_role");
      std::string rl = role->as_string();
      if (rl == "developer") rl = "system";
      if (rl != "system" && rl != "user" && rl != "assistant")
        throw bad_request("messages[" + std::to_string(i) +
                              "].role must be system, user or assistant; got '" + excerpt(rl) + "'",
                          "messages", "invalid_role");
      turns.push_back({rl, content_text(m, i)});
    }
    // The template's markers are special tokens; the messages' contents are text, always.
    pieces = any.chat_pieces(turns);
  } else {
    const json::Value* p = member(body, "prompt");
    if (!p) throw bad_request("'prompt' is required: a string", "prompt", "missing_prompt");
    if (p->is_array() && p->size() == 1 && p->at(std::size_t{0}).is_string()) p = &p->at(std::size_t{0});
    if (!p->is_string())
      throw bad_request("'prompt' must be a string (or a list of one string)", "prompt", "invalid_type");
    // Text by default: "<|im_end|>" in a prompt is those characters. "special_tokens": true lets the
    // prompt's special-token strings become their tokens (a raw prompt written in the model's format).
    pieces.push_back({p->as_string(), opt_bool(body, "special_tokens").value_or(false)});
  }
  r->prompt_text = text::join_pieces(pieces);
  if (static_cast<int64_t>(r->prompt_text.size()) > l.max_input_bytes)
    throw bad_request("the prompt has " + std::to_string(r->prompt_text.size()) + " bytes; the limit is " +
                          std::to_string(l.max_input_bytes) + " (--max-input-bytes)",
                      chat ? "messages" : "prompt", "input_too_large");
  r->prompt_ids = any.encode(pieces);
  if (r->prompt_ids.empty())
    throw bad_request("the prompt is empty (no tokens)", chat ? "messages" : "prompt", "empty_prompt");
  // Options.
  if (const auto n = opt_integer(body, "n", 1, 1, " (one choice per request)"); n) (void)n;
  std::optional<int64_t> mt = opt_integer(body, "max_completion_tokens", 1, l.max_tokens, " (--max-tokens)");
  if (!mt) mt = opt_integer(body, "max_tokens", 1, l.max_tokens, " (--max-tokens)");
  r->max_tokens = mt.value_or(std::min(l.default_max_tokens, l.max_tokens));
  r->temperature = opt_number(body, "temperature", 0, 2).value_or(1.0);
  r->top_p = opt_number(body, "top_p", 1e-9, 1).value_or(1.0);
  r->top_k = opt_integer(body, "top_k", 0, int64_t{1} << 30).value_or(0);
  if (const auto seed = opt_integer(body, "seed", INT64_MIN, INT64_MAX))
    r->seed = static_cast<uint64_t>(*seed);
  else
    r->seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(unix_time());
  if (const json::Value* stop = member(body, "stop")) {
    std::vector<const json::Value*> items;
    if (stop->is_string())
      items.push_back(stop);
    else if (stop->is_array() && stop->size() <= 4)
      for (const json::Value& s : stop->items()) items.push_back(&s);
    else
      throw bad_request("'stop' must be a string or a list of at most 4 strings", "stop", "invalid_type");
    for (const json::Value* s : items) {
      if (!s->is_string() || s->as_string().empty() || s->as_string().size() > 256)
        throw bad_request("'stop' strings must be non-empty strings of at most 256 bytes", "stop",
                          "invalid_value");
      r->stop.push_back(s->as_string());
    }
  }
  r->stream = opt_bool(body, "stream").value_or(false);
  if (const json::Value* so = member(body, "stream_options"); so && so->is_object())
    r->include_usage = opt_bool(*so, "include_usage").value_or(false);
  r->attention = opt_attention(body);
  const auto P = static_cast<int64_t>(r->prompt_ids.size());
  if (P + r->max_tokens > engine->sequence_capacity()) {
    const bool pool = engine->sequence_capacity() < any.capacity();
    throw bad_request("this request has " + std::to_string(P) + " prompt tokens and asks for up to " +
                          std::to_string(r->max_tokens) + " more; a sequence holds " +
                          std::to_string(engine->sequence_capacity()) + " tokens" +
                          (pool ? " (the KV cache, --kv-cache-mb)" : " (--context)") +
                          ": shorten the prompt or max_tokens",
                      chat ? "messages" : "prompt", "context_length_exceeded");
  }
  if (r->attention && P + r->max_tokens > l.max_attention_tokens)
    throw bad_request("'attention' is captured for at most " + std::to_string(l.max_attention_tokens) +
                          " tokens (--max-attention-tokens); this request has " + std::to_string(P) +
                          " prompt tokens and max_tokens " + std::to_string(r->max_tokens),
                      "attention", "context_length_exceeded");
  if (const auto rows = opt_attention(body, "stream_attention")) {
    // Each token's attention row (the query that chose it) in its chunk: the layers and heads asked for.
    if (!r->stream)
      throw bad_request(
          "'stream_attention' needs \"stream\": true (each chunk carries its tokens' attention "
          "rows); 'attention' gives a whole reply's weights",
          "stream_attention", "invalid_value");
    const auto all = [](int64_t n) {
      std::vector<int64_t> v(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
      return v;
    };
    r->row_layers = rows->layers.empty() ? all(any.layers()) : rows->layers;
    r->row_heads = rows->heads.empty() ? all(any.heads()) : rows->heads;
    for (const int64_t v : r->row_layers)
      if (v >= any.layers())
        throw bad_request("stream_attention.layers: layer " + std::to_string(v) +
                              " does not exist; the model has " + std::to_string(any.layers()) + " layers",
                          "stream_attention.layers", "invalid_value");
    for (const int64_t v : r->row_heads)
      if (v >= any.heads())
        throw bad_request("stream_attention.heads: head " + std::to_string(v) +
                              " does not exist; the model has " + std::to_string(any.heads()) + " heads",
                          "stream_attention.heads", "invalid_value");
    // Every row of the whole reply at most, before anything is generated.
    const auto per_row = static_cast<int64_t>(r->row_layers.size() * r->row_heads.size());
    check_attention_values(per_row * r->max_tokens * (P + r->max_tokens), l.max_attention_values, "up to ");
  }
  if (r->attention) {
    // The worst case, prompt + max_tokens, checked before anything is generated.
    const int64_t N = P + r->max_tokens;
    check_attention_values(attention_values(*r->attention, any.layers(), any.heads(), N, N),
                           l.max_attention_values, "up to ");
  }

  // Into the batch: wait for room (a 503 after --max-queue-wait, a 429 when too many wait already).
  models::GenerateOptions g = models::request_options(r->max_tokens, r->temperature, r->top_k, r->top_p);
  any.set_stop_tokens(g);
  const std::shared_ptr<GenStream> st =
      engine->submit(r->prompt_ids, g, r->seed, r->row_layers, r->row_heads);
  // However the request ends (an error, a stream never started), its sequence leaves the batch.
  const std::shared_ptr<void> leave(nullptr, [this, st](void*) { engine->cancel(*st); });
  {
    std::unique_lock<std::mutex> lk(st->mu);
    const bool in = st->cv.wait_for(lk, std::chrono::duration<double>(l.max_queue_wait_s),
                                    [&] { return st->admitted || st->finished; });
    if (!in) {
      lk.unlock();
      engine->cancel(*st);
      HttpError e(503,
                  "no room in the generation batch within " + std::to_string(l.max_queue_wait_s) +
                      " s (--max-queue-wait); retry later",
                  "", "queue_timeout");
      e.retry_after_s = 2;
      throw e;
    }
  }
  metrics.tokens("prompt", P);
  // The attention of prompt + reply, from the model's own sequence between the engine's steps.
  const auto attention_of = [this](const GenRequest& q, const GenResult& g) {
    std::vector<int32_t> ids = q.prompt_ids;
    ids.insert(ids.end(), g.ids.begin(), g.ids.end());
    viz::Export e;
    {
      GateHold hold(gate);
      e = gen_model->attention(ids, generate_id, q.prompt_text + g.text);
    }
    return json::dump(
        export_value(filter_export(std::move(e), *q.attention, options.limits.max_attention_values)));
  };

  if (!r->stream) {
    // No bytes go out until the reply is whole: the connection is asked after each token instead.
    const GenResult g = generate(*st, *r, nullptr, req.client_gone);
    if (g.finish_reason == "cancelled") {  // nobody to answer: the status is for the metrics
      send_error(res, HttpError(499, "the client went away before the reply was whole", "", "client_closed"));
      return;
    }
    std::string out = chunk_prefix(*r);
    // chunk_prefix names the chunk object; the whole reply is a chat.completion / text_completion.
    out.replace(out.find(r->chat ? "chat.completion.chunk" : "text_completion"), r->chat ? 21 : 15,
                r->chat ? "chat.completion" : "text_completion");
    out += ",\"choices\":[{\"index\":0,";
    if (r->chat) {
      out += "\"message\":{\"role\":\"assistant\",\"content\":";
      json::write_string(out, g.text);
      out += "}";
    } else {
      out += "\"text\":";
      json::write_string(out, g.text);
    }
    out += ",\"logprobs\":null,\"finish_reason\":";
    json::write_string(out, g.finish_reason);
    out += "}],\"usage\":" + usage_json(P, static_cast<int64_t>(g.ids.size()));
    if (r->attention) out += ",\"attention\":" + attention_of(*r, g);
    out += "}";
    send_json(res, 200, out);
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [this, r, st, leave, in_flight, P, attention_of](
                                                            std::size_t, http::DataSink& sink) {
    const auto write = [&sink](const std::string& data) {
      const std::string line = "data: " + data + "\n\n";
      return sink.write(line.data(), line.size());
    };
    try {
      if (r->chat && !write(chunk_json(*r, "", "", true))) {
        engine->cancel(*st);
        return false;
      }
      const GenResult g = generate(*st, *r, [&](const std::string& piece, const std::string& rows) {
        return write(chunk_json(*r, piece, "", false, rows));
      });
      if (g.finish_reason == "cancelled") return false;  // the client went away: close
      std::string last = chunk_json(*r, "", g.finish_reason, false, g.rows);
      if (r->attention) {
        last.pop_back();
        last += ",\"attention\":" + attention_of(*r, g) + "}";
      }
      if (!write(last)) return false;
      if (r->include_usage && !write(chunk_prefix(*r) + ",\"choices\":[],\"usage\":" +
                                     usage_json(P, static_cast<int64_t>(g.ids.size())) + "}"))
        return false;
      if (!write("[DONE]")) return false;
    } catch (const HttpError& e) {
      write(error_body(e));
      write("[DONE]");
    } catch (const std::exception& e) {
      log(std::string("error in a stream: ") + e.what());
      write(error_body(HttpError(500, std::string("internal error: ") + e.what(), "", "internal_error")));
      write("[DONE]");
    }
    sink.done();
    return true;
  });
}

}  // namespace attn::serve::detail
