// ReportPace: how often each trainer reports to the master, chosen by the master from how many
// trainers the job has, so that the reports it handles per second stay about the same from ten
// trainers to thousands (the master is one process; a report costs it the same whoever sends it).
//   - Progress (samples, cost; the console's curves): every second up to 50 trainers, then
//     spread so the job sends about 50 a second (20 s apart at 1,000 trainers).
//   - Task progress (how far a trainer is in its task): used only to split a task for an idle
//     trainer, which is possible only once every task of the pass was handed out (the tail).
//     Before that, only often enough to learn that the tail began: every 250 ms up to 12
//     trainers, about 50 a second beyond. In the tail: every 25 ms up to 12 trainers, about 500 a
//     second beyond (2 s apart at 1,000), since each holder's report may free an idle trainer.
// The trainer takes the pace from the master's last reply; a master that says none (an older
// one) leaves the trainer's own. Pure.
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera::master {

struct ReportPace {
  std::chrono::milliseconds progress;
  std::chrono::milliseconds task_progress;
};

// The pace for a job with `trainers` live trainers (at least 1 counted); `tail`: every task of
// the pass has been handed out (splits are possible).
ReportPace PaceFor(int64_t trainers, bool tail);

}  // namespace tessera::master
