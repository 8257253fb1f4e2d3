// The trainer-side data reader: records from the tasks the job's master hands out.
//
// A Reader asks the master (found through etcd, followed when it moves) for a task, reads the
// task's chunks from the data set store (checking each chunk's checksum and that it matches the
// manifest), and yields its records in order. A task is acknowledged to the master only after
// the caller says, with Trained(), that every record returned so far has been trained on, so a
// trainer that dies mid-task loses nothing: the task goes back to the queue. (The acknowledgement
// itself is sent in the background: the trainer's next batch does not wait for the master.) A corrupt chunk
// fails its task (with the reason) and the reader moves on to the next task.
//
// Fetching ahead: once the records left in the current task would not outlast the time the last
// fetch took by much (at the rate they are being read), or are few (`fetch_ahead_records`), the
// reader asks for the next task and reads its chunks on a thread of its own, so a trainer does
// not wait for the master and the disk between two batches. The master then counts both tasks
// as held by this trainer for that short while; the one fetched ahead is not in Held() until a
// record of it is returned (nothing of it is in the model before). The master makes a reader
// that asks ahead wait while the tasks left are needed by trainers that hold none.
//
// Thread-safety: one thread uses a Reader at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/connection.h"
#include "tessera/status.h"

namespace tessera {

struct ReaderOptions {
  ConnectionOptions connection;  // etcd, the job and its secret; required
  // The trainer this reader works for (tasks are attributed to it, and returned to the queue
  // when its registration goes). Use Client::trainer_id(). Empty: the reader registers its own
  // trainer id with a lease.
  std::string trainer_id;
  std::string store;  // the store path as mounted here (empty: the master's path)
  std::chrono::milliseconds request_timeout{std::chrono::minutes(5)};
  // Open() fails after this long if no etcd endpoint accepts connections, saying why.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
  int64_t lease_ttl_seconds = 10;
  // Fetch the next task ahead once this many records or fewer are left in the current one, if
  // the timing did not say so earlier (0: never; each task is then fetched when the last one
  // runs out).
  int64_t fetch_ahead_records = 256;
};

struct ReaderStats {
  int64_t tasks_done = 0;     // acknowledged
  int64_t tasks_failed = 0;   // failed by this reader (corrupt chunks)
  int64_t stale = 0;          // acknowledgements the master refused (task re-dispatched meanwhile)
  int64_t records = 0;        // records returned
  int64_t splits = 0;         // tasks this reader was told to stop early (the rest went to an idle trainer)
  int64_t fetched_ahead = 0;  // tasks whose records were read before the ones before them ran out
};

// A task the reader holds: how many of its records were returned (`offset`) of `records`.
struct ReaderHeldTask {
  int64_t task = 0;
  int64_t epoch = 0;
  int pass = 0;
  int64_t offset = 0;
  int64_t records = 0;
};

class Reader {
 public:
  static StatusOr<std::unique_ptr<Reader>> Open(const ReaderOptions& options);
  virtual ~Reader() = default;

  // Copies the next record into *record. Returns false when there is nothing for this trainer
  // right now: the rest of the pass is in other trainers' hands, or every pass is done
  // (finished()). It never waits for other trainers: in sync mode the caller must keep taking
  // part in steps (with empty pushes) or the others could not finish the pass. So:
  //   while (!reader->finished()) {
  //     if (!reader->Next(&rec)) {             // nothing now: train what you have, then
  //       train the partial batch (or an empty step); reader->Trained(); continue;
  //     }
  //     add rec to the batch; if (batch full) { train; reader->Trained(); }
  //   }
  virtual StatusOr<bool> Next(std::string* record) = 0;
  // Next(), but only from the task at hand: false when it has no record left (nothing is fetched,
  // and the task is not counted as handed out in full until a Next() finds it empty). For reading
  // the next batch while the step before is still on its way: Trained() then cannot acknowledge a
  // task whose last records are not trained yet.
  virtual StatusOr<bool> NextInTask(std::string* record) = 0;
  // Every pass of the data is done.
  virtual bool finished() const = 0;
  // After Next() returned false with the job not finished: whether other trainers held tasks of
  // the pass at the master's last answer. In sync mode their steps then pace this trainer's
  // empty ones; when nobody trains (a followed data set waiting for chunks), a caller pauses.
  // A reader told "wait" while others train asks the master again no sooner than 10 ms later.
  virtual bool others_training() const = 0;
  // Every record returned so far has been trained on: acknowledge the tasks they completed. The
  // acknowledgement goes on a thread of its own (the trainer does not wait for the master); an
  // error of it is returned by a later call, and its tasks are acknowledged again then.
  virtual Status Trained() = 0;
  // The same, telling the master the trainer's step now (the model at that version holds every
  // record returned so far); used for consistent checkpoints. Done before it returns: the
  // trainer's position at that step is reported next.
  virtual Status TrainedAt(int64_t step) = 0;
  // The tasks held now (returned from, not yet acknowledged), oldest first.
  virtual std::vector<ReaderHeldTask> Held() const = 0;
  // The pass of the task the last record came from (0-based), and the number of passes.
  virtual int pass() const = 0;
  virtual int passes() const = 0;
  // The pass the job is in as the master last said (0-based; passes() once every pass is done):
  // it moves on also while this reader gets no records (the rest of a pass is with others).
  virtual int job_pass() const = 0;
  // "line" (text data sets) or "example" (tessera.data.Example).
  virtual const std::string& record_type() const = 0;
  virtual ReaderStats stats() const = 0;
  // For tests and logs: the last task handed out (id, epoch).
  virtual std::pair<int64_t, int64_t> current_task() const = 0;
};

}  // namespace tessera
