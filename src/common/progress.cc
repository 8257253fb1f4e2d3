// ProgressBar (see progress.h).
#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

#include "common/strings.h"

namespace tessera {

bool ProgressBar::StderrIsTerminal() { return ::isatty(2) == 1; }

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), total_(total), unit_(std::move(unit)), tty_(StderrIsTerminal()) {
  start_ = last_ = Now();
}

void ProgressBar::Update(int64_t done, const std::string& extra) {
  if (!tty_) return;
  TimePoint now = Now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  double secs = std::chrono::duration<double>(now - start_).count();
  double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  std::string amount =
      unit_ == "bytes" ? HumanBytes(static_cast<double>(done)) : std::to_string(done) + " " + unit_;
  std::string speed =
      unit_ == "bytes" ? HumanBytes(rate) + "/s" : std::to_string(static_cast<int64_t>(rate)) + "/s";
  if (total_ > 0) {
    const int width = 30;
    double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    int fill = static_cast<int>(frac * width);
    std::string bar(fill, '=');
    if (fill < width) bar += '>';
    bar.resize(width, ' ');
    std::fprintf(stderr, "\r%s [%s] %3.0f%% %s %s %s\033[K", label_.c_str(), bar.c_str(), 100 * frac,
                 amount.c_str(), speed.c_str(), extra.c_str());
  } else {
    std::fprintf(stderr, "\r%s %s %s %s\033[K", label_.c_str(), amount.c_str(), speed.c_str(), extra.c_str());
  }
  std::fflush(stderr);
}

void ProgressBar::Finish(const std::string& summary) {
  if (tty_ && drawn_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", summary.c_str());
  std::fflush(stderr);
}

}  // namespace tessera
