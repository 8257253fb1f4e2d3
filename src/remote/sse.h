// SseParser: splits a server-sent event stream (text/event-stream) into events as its bytes
// arrive, in whatever pieces the network delivers them. Handles LF and CRLF line ends, comment
// lines (": ..."), several data lines in one event (joined with '\n'), and id/event fields.
// Pure; one owner (not thread-safe).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::remote {

struct SseEvent {
  std::string event = "message";  // the event's type ("end" for a log whose job ended)
  std::string data;
  std::string id;  // the last id seen, for Last-Event-ID when reconnecting
};

class SseParser {
 public:
  // Feeds the next bytes; returns the events they complete.
  std::vector<SseEvent> Feed(std::string_view bytes);
  // Forgets a partly received event (the connection dropped); keeps last_id().
  void Reset() {
    buffer_.clear();
    current_ = SseEvent();
    has_data_ = false;
  }
  // The id of the last complete event ("" if none had one).
  const std::string& last_id() const { return last_id_; }

 private:
  void Line(std::string_view line, std::vector<SseEvent>* out);

  std::string buffer_;
  SseEvent current_;
  bool has_data_ = false;
  std::string last_id_;
};

}  // namespace tessera::remote
