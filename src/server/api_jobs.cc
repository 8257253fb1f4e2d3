// The REST API's job routes: code packages, submission, the list and history, stop, scale,
// delete, metrics, logs (read and followed as server-sent events), and quotas.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "common/clock.h"
#include "common/files.h"
#include "common/strings.h"
#include "server/api_routes.h"
#include "server/api_server.h"
#include "server/jobs.h"
#include "server_store/json_body.h"

namespace tessera::server {
namespace {

using Json = nlohmann::json;

const std::string kJobId = "([a-z][a-z0-9-]{0,31}-[0-9a-f]{8})";
constexpr int64_t kMaxLogRead = 256 << 10;
std::atomic<int> followers{0};
constexpr int kMaxFollowers = 4;

StatusOr<int64_t> IntParam(const httplib::Request& req, const std::string& name, int64_t def, int64_t lo,
                           int64_t hi) {
  if (!req.has_param(name)) return def;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    return Status::InvalidArgument(name + ": a number from " + std::to_string(lo) + " to " +
                                   std::to_string(hi));
  return static_cast<int64_t>(x);
}

// The file of log `node` of job `j` (in jobs->Files(j.id)); NotFound names the logs there are
// (and the likely one).
StatusOr<std::string> LogPath(Jobs* jobs, const JobInfo& j, const std::string& node) {
  std::vector<std::string> names;
  for (const auto& [n, p] : jobs->Logs(j.id)) {
    if (n == node) return p;
    names.push_back(n);
  }
  if (names.empty()) return Status::NotFound("job " + j.id + " has no logs yet (it is " + j.state + ")");
  const std::string guess = ClosestName(node, names);
  return Status::NotFound("job " + j.id + " has no log of '" + node + "'" +
                          (guess.empty() ? "" : " (did you mean '" + guess + "'?)") +
                          "; its logs: " + Join(names, ", "));
}

// The job, when the caller may do `a` in its namespace (others' jobs are not found).
struct JobOf {
  ApiRoutes& r;
  Jobs* jobs;
  StatusOr<JobInfo> operator()(const User& u, const std::string& id, Action a) const {
    TESSERA_ASSIGN_OR_RETURN(JobInfo j, jobs->Get(id));
    Status st = r.Need(u, j.ns, a);
    if (st.code() == StatusCode::kNotFound) return Status::NotFound("no job '" + id + "'");
    TESSERA_RETURN_IF_ERROR(st);
    return j;
  }
};

const std::string kNsPath = std::string("/api/v1/namespaces/") + kNamePattern;
const std::string kJobPath = "/api/v1/jobs/" + kJobId;

// Code packages, submission, the list.
void AddSubmitRoutes(ApiRoutes& r, Jobs* jobs) {
  r.Put(kNsPath + "/packages/([0-9a-f]{64})", "upload package",
        [&r, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kSubmitJob));
          TESSERA_ASSIGN_OR_RETURN(Json j, jobs->PutPackage(req.matches[1], req.matches[2], req.body));
          return Reply{201, j};
        });
  r.Post(kNsPath + "/jobs", "submit job",
         [&r, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kSubmitJob));
           TESSERA_ASSIGN_OR_RETURN(Submission spec, Submission::FromBody(req.body));
           TESSERA_ASSIGN_OR_RETURN(JobInfo j, jobs->Submit(req.matches[1], u.id, spec, WallMillis()));
           return Reply{201, j.ToJson()};
         });
  r.Get(kNsPath + "/jobs", "list jobs",
        [&r, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kListJobs));
          TESSERA_ASSIGN_OR_RETURN(int64_t limit, IntParam(req, "limit", 100, 1, 1000));
          const std::string state = req.get_param_value("state");
          TESSERA_ASSIGN_OR_RETURN(auto list, jobs->List(req.matches[1], state, static_cast<int>(limit)));
          Json out = Json::array();
          for (const auto& j : list) {
            Json x = j.ToJson();
            x.erase("workers");  // the list stays light; GET /jobs/{id} has everything
            out.push_back(std::move(x));
          }
          return Reply{200, {{"jobs", out}}};
        });
}

// One job: read, metrics, stop, scale, delete.
void AddJobControlRoutes(ApiRoutes& r, Jobs* jobs) {
  const JobOf job_of{r, jobs};
  r.Get(kJobPath, "read job", [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
    TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kReadJob));
    Json out = j.ToJson();
    TESSERA_ASSIGN_OR_RETURN(out["events"], jobs->Events(j.id));
    return Reply{200, out};
  });
  r.Get(kJobPath + "/metrics", "read metrics",
        [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kReadJob));
          TESSERA_ASSIGN_OR_RETURN(int64_t since, IntParam(req, "since", 0, 0, INT64_MAX));
          TESSERA_ASSIGN_OR_RETURN(int64_t limit, IntParam(req, "limit", 5000, 1, 5000));
          TESSERA_ASSIGN_OR_RETURN(Json m, jobs->Metrics(j.id, since, static_cast<int>(limit)));
          return Reply{200, m};
        });
  r.Post(kJobPath + "/stop", "stop job",
         [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kStopJob));
           TESSERA_RETURN_IF_ERROR(jobs->RequestStop(j.id, u.name, WallMillis()));
           TESSERA_ASSIGN_OR_RETURN(j, jobs->Get(j.id));
           return Reply{202, j.ToJson()};
         });
  r.Post(kJobPath + "/scale", "scale job",
         [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
           TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kScaleJob));
           TESSERA_ASSIGN_OR_RETURN(auto b, JsonBody::Parse(req.body, {"trainers"}));
           TESSERA_ASSIGN_OR_RETURN(auto n, b.OptionalInt("trainers"));
           if (!n) return Status::InvalidArgument("body: field 'trainers' is required");
           if (*n < 1 || *n > 256) return Status::InvalidArgument("body: trainers must be 1..256");
           TESSERA_RETURN_IF_ERROR(jobs->Scale(j.id, static_cast<int>(*n), WallMillis()));
           TESSERA_ASSIGN_OR_RETURN(j, jobs->Get(j.id));
           return Reply{202, j.ToJson()};
         });
  r.Delete(kJobPath, "delete job",
           [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
             TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kDeleteJob));
             TESSERA_RETURN_IF_ERROR(jobs->Delete(j.id));
             return Reply{204, {}};
           });
}

// Where a read of log `path` begins: ?offset=N (bytes), or back from the end until its last
// ?tail=L lines (default 100) are behind, within the read limit.
StatusOr<int64_t> LogReadStart(const sandbox::ConfinedDir& files, const std::string& path, int64_t size,
                               const httplib::Request& req) {
  if (req.has_param("offset")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t from, IntParam(req, "offset", 0, 0, INT64_MAX));
    return std::min(from, size);
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t lines, IntParam(req, "tail", 100, 1, 10000));
  int64_t from = std::max<int64_t>(0, size - kMaxLogRead);
  std::string tail = files.ReadRange(path, from, size - from);
  int64_t seen = 0;
  size_t at = tail.size();
  if (at > 0 && tail[at - 1] == '\n') --at;
  while (at > 0) {
    if (tail[at - 1] == '\n' && ++seen >= lines) break;
    --at;
  }
  return from + static_cast<int64_t>(at);
}

// The next server-sent events of a followed log from *at (one per whole line, its id the offset
// after it), "event: end" once the job has ended with nothing more to read, or a ping after about
// 10 s of nothing. Returns what httplib's content provider returns.
bool SendLogEvents(Jobs* jobs, const std::string& id, const std::string& file,
                   const sandbox::ConfinedDir& files, int64_t* at, int64_t deadline,
                   httplib::DataSink& sink) {
  for (int idle = 0; idle < 40; ++idle) {  // about 10 s per call, then the provider is asked again
    if (!sink.is_writable() || WallMillis() > deadline) {
      sink.done();
      return true;
    }
    const int64_t size = files.Size(file);
    if (size > *at) {
      std::string chunk = files.ReadRange(file, *at, std::min<int64_t>(kMaxLogRead, size - *at));
      size_t nl = chunk.rfind('\n');
      if (nl != std::string::npos) {
        std::string out;
        size_t start = 0;
        while (start <= nl) {
          size_t e = chunk.find('\n', start);
          *at += static_cast<int64_t>(e - start + 1);
          out += "id: " + std::to_string(*at) + "\ndata: " + chunk.substr(start, e - start) + "\n\n";
          start = e + 1;
        }
        sink.write(out.data(), out.size());
        return true;
      }
    }
    auto j = jobs->Get(id);
    if (!j.ok() || j->ended_ms != 0) {
      const std::string end = "event: end\ndata: the job has ended\n\n";
      sink.write(end.data(), end.size());
      sink.done();
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const std::string ping = ": still following\n\n";
  return sink.write(ping.data(), ping.size());
}

// A job's logs: the list, a piece, and following one.
void AddLogRoutes(ApiRoutes& r, Jobs* jobs) {
  const JobOf job_of{r, jobs};
  r.Get(kJobPath + "/logs", "list logs",
        [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kReadLogs));
          Json out = Json::array();
          const auto files = jobs->Files(j.id);
          for (const auto& [node, path] : jobs->Logs(j.id))
            out.push_back({{"node", node}, {"bytes", files.Size(path)}});
          return Reply{200, {{"logs", out}}};
        });
  // A piece of a log: from ?offset=N (bytes), or its last ?tail=L lines (default 100).
  r.Get(kJobPath + "/logs/([a-z][a-z0-9-]{0,63})", "read log",
        [job_of, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kReadLogs));
          const std::string node = req.matches[2];
          TESSERA_ASSIGN_OR_RETURN(const std::string path, LogPath(jobs, j, node));
          const auto files = jobs->Files(j.id);
          const int64_t size = std::max<int64_t>(0, files.Size(path));
          TESSERA_ASSIGN_OR_RETURN(const int64_t from, LogReadStart(files, path, size, req));
          std::string text = files.ReadRange(path, from, std::min(kMaxLogRead, size - from));
          const int64_t next = from + static_cast<int64_t>(text.size());
          return Reply{
              200,
              {{"node", node}, {"offset", from}, {"next", next}, {"text", text}, {"ended", j.ended_ms != 0}}};
        });
  // Following a log: server-sent events, one per line (its id: the byte offset after it), from
  // ?offset=N or Last-Event-ID (default: the end), until the job has ended and the log is read.
  r.Note("GET", kJobPath + "/logs/([a-z][a-z0-9-]{0,63})/follow");
  r.http().Get(kJobPath + "/logs/([a-z][a-z0-9-]{0,63})/follow",
               [&r, job_of, jobs](const httplib::Request& req, httplib::Response& res) {
                 StatusOr<std::string> path = [&]() -> StatusOr<std::string> {
                   TESSERA_ASSIGN_OR_RETURN(User u, r.Caller(req));
                   TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kReadLogs));
                   return LogPath(jobs, j, req.matches[2]);
                 }();
                 if (!path.ok()) return ApiRoutes::Send(res, path.status());
                 if (followers.fetch_add(1) >= kMaxFollowers) {
                   followers.fetch_sub(1);
                   return ApiRoutes::Send(
                       res, Status::ResourceExhausted(
                                "too many logs followed at once; read them with ?offset= instead"));
                 }
                 const auto files = std::make_shared<sandbox::ConfinedDir>(jobs->Files(req.matches[1]));
                 int64_t pos = files->Size(*path);
                 const std::string last = req.get_header_value("Last-Event-ID");
                 if (!last.empty()) pos = std::atoll(last.c_str());
                 if (req.has_param("offset")) pos = std::atoll(req.get_param_value("offset").c_str());
                 const std::string id = req.matches[1], file = *path;
                 auto at = std::make_shared<int64_t>(std::max<int64_t>(0, pos));
                 auto deadline = std::make_shared<int64_t>(WallMillis() + 3600 * 1000);
                 res.set_header("Cache-Control", "no-cache");
                 res.set_chunked_content_provider(
                     "text/event-stream",
                     [jobs, id, file, files, at, deadline](size_t, httplib::DataSink& sink) {
                       return SendLogEvents(jobs, id, file, *files, at.get(), *deadline, sink);
                     },
                     [](bool) { followers.fetch_sub(1); });
               });
}

// The trained model, as the file itself (application/octet-stream).
void AddModelRoute(ApiRoutes& r, Jobs* jobs) {
  const JobOf job_of{r, jobs};
  r.Note("GET", kJobPath + "/model");
  r.http().Get(kJobPath + "/model", [&r, job_of, jobs](const httplib::Request& req, httplib::Response& res) {
    // Sent from the file the job wrote, opened once (no link followed) and read as it goes.
    StatusOr<std::shared_ptr<UniqueFd>> model = [&]() -> StatusOr<std::shared_ptr<UniqueFd>> {
      TESSERA_ASSIGN_OR_RETURN(User u, r.Caller(req));
      TESSERA_ASSIGN_OR_RETURN(JobInfo j, job_of(u, req.matches[1], Action::kReadJob));
      auto fd = jobs->Files(j.id).Open(kModelFile);
      if (fd.status().code() == StatusCode::kNotFound)
        return Status::FailedPrecondition(
            "job " + j.id + " has no model" +
            (j.ended_ms
                 ? std::string(" (it ended ") + j.state + " before saving one)"
                 : std::string(" yet: it is ") + j.state + "; the model is saved when every pass is done"));
      if (!fd.ok()) return fd.status();
      return std::make_shared<UniqueFd>(std::move(*fd));
    }();
    if (!model.ok()) return ApiRoutes::Send(res, model.status());
    struct stat st {};
    if (::fstat((*model)->get(), &st) != 0)
      return ApiRoutes::Send(res, Status::Unavailable("cannot read the model"));
    res.set_header("Content-Disposition", "attachment; filename=\"" + std::string(req.matches[1]) + ".tsm\"");
    res.set_content_provider(static_cast<size_t>(st.st_size), "application/octet-stream",
                             [fd = *model](size_t offset, size_t length, httplib::DataSink& sink) {
                               char buf[1 << 16];
                               const ssize_t n = ::pread(fd->get(), buf, std::min(length, sizeof buf),
                                                         static_cast<off_t>(offset));
                               if (n <= 0) return false;  // shorter than it was: the connection ends
                               sink.write(buf, static_cast<size_t>(n));
                               return true;
                             });
  });
}

// A namespace's quota: its limits and what it uses.
void AddQuotaRoutes(ApiRoutes& r, Jobs* jobs, Datasets* datasets) {
  r.Get(kNsPath + "/quota", "read quota",
        [&r, jobs, datasets](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kReadQuota));
          TESSERA_ASSIGN_OR_RETURN(QuotaLimits q, jobs->Quota(req.matches[1]));
          TESSERA_ASSIGN_OR_RETURN(Usage used, jobs->UsageOf(req.matches[1]));
          TESSERA_ASSIGN_OR_RETURN(int64_t data_bytes, datasets->BytesOwned(req.matches[1]));
          TESSERA_ASSIGN_OR_RETURN(int64_t job_bytes, jobs->JobDiskBytes(req.matches[1]));
          const int64_t bytes = data_bytes + job_bytes;
          Json usage = UsageJson(used);
          usage["storage_mb"] = static_cast<double>(bytes) / (1 << 20);
          return Reply{
              200, {{"namespace", std::string(req.matches[1])}, {"limits", QuotaJson(q)}, {"usage", usage}}};
        });
  r.Put(kNsPath + "/quota", "set quota",
        [&r, jobs](const User& u, const httplib::Request& req) -> StatusOr<Reply> {
          TESSERA_RETURN_IF_ERROR(r.Need(u, req.matches[1], Action::kSetQuota));
          TESSERA_ASSIGN_OR_RETURN(QuotaLimits q, QuotaFromBody(req.body));
          TESSERA_RETURN_IF_ERROR(jobs->SetQuota(req.matches[1], q));
          return Reply{200, {{"namespace", std::string(req.matches[1])}, {"limits", QuotaJson(q)}}};
        });
}

}  // namespace

void AddJobRoutes(ApiRoutes& r, Jobs* jobs, Datasets* datasets) {
  AddSubmitRoutes(r, jobs);
  AddJobControlRoutes(r, jobs);
  AddLogRoutes(r, jobs);
  AddModelRoute(r, jobs);
  AddQuotaRoutes(r, jobs, datasets);
}

}  // namespace tessera::server
