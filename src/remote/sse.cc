// Server-sent events, parsed (see sse.h).
#include "remote/sse.h"

namespace tessera::remote {

std::vector<SseEvent> SseParser::Feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  buffer_.append(bytes);
  size_t start = 0;
  for (;;) {
    size_t nl = buffer_.find('\n', start);
    if (nl == std::string::npos) break;
    size_t end = nl;
    if (end > start && buffer_[end - 1] == '\r') --end;
    Line(std::string_view(buffer_).substr(start, end - start), &out);
    start = nl + 1;
  }
  buffer_.erase(0, start);
  return out;
}

void SseParser::Line(std::string_view line, std::vector<SseEvent>* out) {
  if (line.empty()) {  // a blank line dispatches the event
    if (has_data_ || current_.event != "message") {
      if (!current_.id.empty()) last_id_ = current_.id;
      current_.id = last_id_;
      out->push_back(std::move(current_));
    }
    current_ = SseEvent();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // a comment: the server's keep-alive
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) current_.data += '\n';
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.event = std::string(value);
  } else if (field == "id") {
    current_.id = std::string(value);
  }
}

}  // namespace tessera::remote
