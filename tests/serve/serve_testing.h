// What the server tests share: a started server with its client, and a reply's JSON body.
#pragma once

#include <attn/io/json.h>
#include <attn/serve/server.h>
#include <httplib.h>

#include <string>

namespace attn::serve::test {

// A started server and a client for it; stopped at the end of the scope.
struct Running {
  Server server;
  httplib::Client client;
  explicit Running(ServerOptions o, bool load = true) : server(prep(std::move(o))), client(start_and_host()) {
    client.set_read_timeout(60, 0);
    if (load) server.load_models();
  }
  static ServerOptions prep(ServerOptions o) {
    o.host = "127.0.0.1";
    o.port = 0;
    return o;
  }
  std::string start_and_host() {
    server.start();
    return server.url();
  }
  httplib::Result post(const std::string& path, const std::string& body) {
    return client.Post(path.c_str(), body, "application/json");
  }
};

inline json::Value body_of(const httplib::Result& r) { return json::parse(r->body); }

}  // namespace attn::serve::test
