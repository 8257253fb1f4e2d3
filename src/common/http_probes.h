// /healthz and /readyz, the probe endpoints of every Tessera process that serves HTTP (pserver,
// master, a trainer asked for them): /healthz answers 200 while the process answers at all;
// /readyz answers 200 with the reason the process is ready, or 503 with why not yet.
// Header-only (for the libraries that already use cpp-httplib).
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

namespace tessera {

// `ready` returns true and sets *why when ready ("leading", "serving index 0"), else false with
// *why saying what it waits for. Called on the server's threads.
inline void AddProbes(httplib::Server& server, std::function<bool(std::string* why)> ready) {
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  server.Get("/readyz", [ready = std::move(ready)](const httplib::Request&, httplib::Response& res) {
    std::string why;
    bool ok = ready(&why);
    res.status = ok ? 200 : 503;
    res.set_content((ok ? why : "not ready: " + why) + "\n", "text/plain");
  });
}

}  // namespace tessera
