// Parsing and checking of a job spec (see job_spec.h).
#include "spec/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <regex>
#include <set>

#include "common/files.h"
#include "common/flag_names.h"
#include "common/strings.h"
#include "tessera/params.h"

namespace tessera::spec {
namespace {

// Walks a YAML mapping, reading known keys by path and refusing the rest.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string path, const std::string& origin)
      : node_(node), path_(std::move(path)), origin_(origin) {}

  Status Fail(const std::string& key, const std::string& what) const {
    return Status::InvalidArgument(origin_ + ": " + Path(key) + ": " + what);
  }
  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool Has(const std::string& key) {
    known_.insert(key);
    return node_[key] && !node_[key].IsNull();
  }
  YAML::Node Get(const std::string& key) {
    return Has(key) ? YAML::Node(node_[key]) : YAML::Node(YAML::NodeType::Undefined);
  }

  template <typename T>
  Status Read(const std::string& key, T* out) {
    if (!Has(key)) return Status::OK();
    const YAML::Node v = node_[key];
    if (!v.IsScalar()) return Fail(key, "must be a single value");
    try {
      *out = v.as<T>();
    } catch (const YAML::Exception&) {
      return Fail(key, "'" + v.Scalar() + "' is not " + Kind<T>());
    }
    return Status::OK();
  }

  Status ReadList(const std::string& key, std::vector<std::string>* out) {
    if (!Has(key)) return Status::OK();
    const YAML::Node v = node_[key];
    if (!v.IsSequence()) return Fail(key, "must be a list, e.g. [a, b]");
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].IsScalar()) return Fail(key + "[" + std::to_string(i) + "]", "must be a single value");
      out->push_back(v[i].Scalar());
    }
    return Status::OK();
  }

  // After every Read: any key not read is a mistake.
  Status RefuseUnknown() const {
    if (!node_.IsMap()) return Status::OK();
    for (const auto& kv : node_) {
      std::string key = kv.first.as<std::string>();
      if (known_.count(key)) continue;
      std::string guess = ClosestName(key, std::vector<std::string>(known_.begin(), known_.end()));
      return Fail(key,
                  "unknown field" + (guess.empty() ? std::string() : " (did you mean '" + guess + "'?)") +
                      "; known here: " + Join(std::vector<std::string>(known_.begin(), known_.end()), ", "));
    }
    return Status::OK();
  }

 private:
  template <typename T>
  static const char* Kind() {
    if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>) return "a whole number";
    if constexpr (std::is_same_v<T, double>) return "a number";
    if constexpr (std::is_same_v<T, bool>) return "true or false";
    return "text";
  }
  const YAML::Node node_;  // const: reading a key must not insert it
  std::string path_;
  const std::string& origin_;
  std::set<std::string> known_;
};

Status NeedMap(const YAML::Node& n, const std::string& origin, const std::string& path) {
  if (n.IsMap()) return Status::OK();
  return Status::InvalidArgument(origin + ": " + path + ": must be a mapping of fields (key: value)");
}

Status ReadVolume(Fields& parent, const std::string& key, VolumeSpec* v, const std::string& origin) {
  YAML::Node n = parent.Get(key);
  if (!n) return Status::OK();
  TESSERA_RETURN_IF_ERROR(NeedMap(n, origin, parent.Path(key)));
  Fields f(n, parent.Path(key), origin);
  TESSERA_RETURN_IF_ERROR(f.Read("path", &v->path));
  TESSERA_RETURN_IF_ERROR(f.Read("claim", &v->claim));
  if (YAML::Node nfs = f.Get("nfs")) {
    TESSERA_RETURN_IF_ERROR(NeedMap(nfs, origin, f.Path("nfs")));
    Fields g(nfs, f.Path("nfs"), origin);
    TESSERA_RETURN_IF_ERROR(g.Read("server", &v->nfs_server));
    TESSERA_RETURN_IF_ERROR(g.Read("path", &v->nfs_path));
    TESSERA_RETURN_IF_ERROR(g.RefuseUnknown());
    if (v->nfs_server.empty() || v->nfs_path.empty()) return f.Fail("nfs", "needs both server and path");
  }
  TESSERA_RETURN_IF_ERROR(f.RefuseUnknown());
  if (v->path.empty() || v->path[0] != '/')
    return f.Fail("path", "must be an absolute path (where processes see it)");
  if (!v->claim.empty() && !v->nfs_server.empty()) return f.Fail("claim", "give a claim or nfs, not both");
  return Status::OK();
}

const std::regex& DnsLabel() {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return re;
}
const std::regex& Quantity() {
  static const std::regex re("[0-9]+(\\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?");
  return re;
}

}  // namespace

std::vector<std::string> JobSpec::EtcdEndpoints() const {
  if (external_etcd()) return etcd_endpoints;
  std::vector<std::string> out;
  for (int i = 0; i < etcd_members; ++i)
    out.push_back(name + "-etcd-" + std::to_string(i) + "." + name + "-etcd:2379");
  return out;
}

std::string JobSpec::EtcdText() const { return Join(EtcdEndpoints(), ","); }

std::vector<std::string> JobSpec::JobCreateArgs() const {
  std::vector<std::string> args = {
      "--pservers",     std::to_string(pservers),     "--mode",     mode, "--optimizer", optimizer,
      "--min-trainers", std::to_string(trainers_min), "--if-absent"};
  if (tls()) args.push_back("--tls");
  if (checkpoint_steps > 0) args.insert(args.end(), {"--checkpoint-steps", std::to_string(checkpoint_steps)});
  if (backup_trainers > 0) args.insert(args.end(), {"--backup-trainers", std::to_string(backup_trainers)});
  if (nonfinite != "skip") args.insert(args.end(), {"--nonfinite", nonfinite});
  if (wire != "f32") args.insert(args.end(), {"--wire", wire});
  if (replicas > 1) args.insert(args.end(), {"--replicas", std::to_string(replicas)});
  if (start_pservers > 0) args.insert(args.end(), {"--start-pservers", std::to_string(start_pservers)});
  return args;
}

StatusOr<JobConfig> JobConfigOf(const JobSpec& s) {
  JobConfig c;
  c.pservers = s.pservers;
  TESSERA_ASSIGN_OR_RETURN(c.mode, ConsistencyMode::Parse(s.mode));
  TESSERA_ASSIGN_OR_RETURN(c.optimizer, OptimizerConfig::Parse(s.optimizer));
  c.min_trainers = c.mode.kind == ConsistencyMode::Kind::kAsync ? 1 : s.trainers_min;
  c.checkpoint_steps = s.checkpoint_steps;
  c.replicas = s.replicas;
  c.backup_trainers = s.backup_trainers;
  c.initial_pservers = s.start_pservers;
  c.tls = s.tls();
  TESSERA_ASSIGN_OR_RETURN(c.nonfinite, ParseNonFinitePolicy(s.nonfinite));
  TESSERA_ASSIGN_OR_RETURN(c.wire, WireChoice::Parse(s.wire));
  TESSERA_RETURN_IF_ERROR(c.Validate());
  return c;
}

JobSpec::TlsFiles JobSpec::Tls() const {
  if (!tls()) return {};
  return {tls_dir + "/ca.pem", tls_dir + "/node.pem", tls_dir + "/node.key"};
}

std::vector<std::pair<std::string, std::string>> JobSpec::TlsEnv() const {
  if (!tls()) return {};
  const TlsFiles f = Tls();
  return {{flags::kEnvTlsCa, f.ca}, {flags::kEnvTlsCert, f.cert}, {flags::kEnvTlsKey, f.key}};
}

namespace {

Status ReadEtcd(Fields& f, JobSpec* s, const std::string& origin) {
  YAML::Node e = f.Get("etcd");
  if (!e) return Status::OK();
  TESSERA_RETURN_IF_ERROR(NeedMap(e, origin, "etcd"));
  Fields g(e, "etcd", origin);
  TESSERA_RETURN_IF_ERROR(g.Read("members", &s->etcd_members));
  TESSERA_RETURN_IF_ERROR(g.ReadList("endpoints", &s->etcd_endpoints));
  TESSERA_RETURN_IF_ERROR(g.RefuseUnknown());
  if (s->etcd_members != 1 && s->etcd_members != 3) return g.Fail("members", "must be 1 or 3");
  for (const auto& ep : s->etcd_endpoints)
    if (ep.find(':') == std::string::npos) return g.Fail("endpoints", "'" + ep + "' is not host:port");
  return Status::OK();
}

// `trainers: N`, or `trainers: {min: N, max: M}`.
Status ReadTrainers(Fields& f, JobSpec* s, const std::string& origin) {
  YAML::Node t = f.Get("trainers");
  if (!t) return Status::OK();
  if (t.IsScalar()) {
    TESSERA_RETURN_IF_ERROR(f.Read("trainers", &s->trainers_min));
    s->trainers_max = s->trainers_min;
    return Status::OK();
  }
  TESSERA_RETURN_IF_ERROR(NeedMap(t, origin, "trainers"));
  Fields g(t, "trainers", origin);
  TESSERA_RETURN_IF_ERROR(g.Read("min", &s->trainers_min));
  s->trainers_max = s->trainers_min;
  TESSERA_RETURN_IF_ERROR(g.Read("max", &s->trainers_max));
  TESSERA_RETURN_IF_ERROR(g.RefuseUnknown());
  if (s->trainers_max < s->trainers_min) return g.Fail("max", "must be at least min");
  return Status::OK();
}

Status ReadResources(Fields& f, JobSpec* s, const std::string& origin) {
  YAML::Node r = f.Get("resources");
  if (!r) return Status::OK();
  TESSERA_RETURN_IF_ERROR(NeedMap(r, origin, "resources"));
  Fields g(r, "resources", origin);
  for (const char* role : {"etcd", "master", "pserver", "trainer"}) {
    YAML::Node n = g.Get(role);
    if (!n) continue;
    TESSERA_RETURN_IF_ERROR(NeedMap(n, origin, g.Path(role)));
    Fields h(n, g.Path(role), origin);
    Resources res;
    TESSERA_RETURN_IF_ERROR(h.Read("cpu", &res.cpu));
    TESSERA_RETURN_IF_ERROR(h.Read("memory", &res.memory));
    TESSERA_RETURN_IF_ERROR(h.Read("gpu", &res.gpus));
    TESSERA_RETURN_IF_ERROR(h.RefuseUnknown());
    for (auto [key, q] : {std::pair{"cpu", res.cpu}, std::pair{"memory", res.memory}})
      if (!q.empty() && !std::regex_match(q, Quantity()))
        return h.Fail(key, "'" + q + "' is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)");
    if (res.gpus < 0) return h.Fail("gpu", "must not be negative");
    s->resources[role] = res;
  }
  return g.RefuseUnknown();
}

// The values of train:, each checked on its own (what they mean together: JobConfigOf).
Status CheckTrain(const Fields& g, const JobSpec& s) {
  if (s.dataset.empty()) return g.Fail("dataset", "is required (the data set in the store to train on)");
  if (s.model.empty() == s.command.empty())
    return g.Fail("model", "give either model (a built-in: mlp, logreg, word2vec) or command (your trainer)");
  if (!s.model.empty() && s.model != "mlp" && s.model != "logreg" && s.model != "word2vec")
    return g.Fail("model", "'" + s.model + "' is not a built-in model (mlp, logreg, word2vec)");
  if (auto m = ConsistencyMode::Parse(s.mode); !m.ok()) return g.Fail("mode", m.status().message());
  if (auto o = OptimizerConfig::Parse(s.optimizer); !o.ok()) return g.Fail("optimizer", o.status().message());
  if (s.passes < 1) return g.Fail("passes", "must be at least 1");
  if (s.batch_size < 1) return g.Fail("batch_size", "must be at least 1");
  if (s.lease_ttl < 2) return g.Fail("lease_ttl", "must be at least 2 seconds");
  if (!(s.checkpoint_every >= 0)) return g.Fail("checkpoint_every", "must not be negative");
  if (s.checkpoint_steps < 0) return g.Fail("checkpoint_steps", "must not be negative (0: off)");
  if (s.backup_trainers < 0) return g.Fail("backup_trainers", "must not be negative");
  if (s.nonfinite != "skip" && s.nonfinite != "error") return g.Fail("nonfinite", "must be skip or error");
  if (auto w = WireChoice::Parse(s.wire); !w.ok()) return g.Fail("wire", w.status().message());
  if (!(s.task_timeout > 0)) return g.Fail("task_timeout", "must be a positive number of seconds");
  if (s.max_failures < 0) return g.Fail("max_failures", "must not be negative");
  if (s.chunks_per_task < 0) return g.Fail("chunks_per_task", "must not be negative (0: the master's choice)");
  if (s.transport != "auto" && s.transport != "tcp" && s.transport != "grpc" && s.transport != "shm")
    return g.Fail("transport", "must be auto, tcp, grpc or shm");
  for (const auto& a : s.model_args)
    if (a.find('=') == std::string::npos) return g.Fail("model_args", "'" + a + "' is not key=value");
  return Status::OK();
}

Status ReadTrain(Fields& f, JobSpec* s, const std::string& origin) {
  YAML::Node t = f.Get("train");
  if (!t) return Status::InvalidArgument(origin + ": train: is required (at least its dataset and model or command)");
  TESSERA_RETURN_IF_ERROR(NeedMap(t, origin, "train"));
  Fields g(t, "train", origin);
  TESSERA_RETURN_IF_ERROR(g.Read("mode", &s->mode));
  TESSERA_RETURN_IF_ERROR(g.Read("optimizer", &s->optimizer));
  TESSERA_RETURN_IF_ERROR(g.Read("passes", &s->passes));
  TESSERA_RETURN_IF_ERROR(g.Read("dataset", &s->dataset));
  TESSERA_RETURN_IF_ERROR(g.Read("eval_dataset", &s->eval_dataset));
  TESSERA_RETURN_IF_ERROR(g.Read("batch_size", &s->batch_size));
  TESSERA_RETURN_IF_ERROR(g.Read("model", &s->model));
  TESSERA_RETURN_IF_ERROR(g.ReadList("model_args", &s->model_args));
  TESSERA_RETURN_IF_ERROR(g.ReadList("command", &s->command));
  TESSERA_RETURN_IF_ERROR(g.Read("lease_ttl", &s->lease_ttl));
  TESSERA_RETURN_IF_ERROR(g.Read("checkpoint_every", &s->checkpoint_every));
  TESSERA_RETURN_IF_ERROR(g.Read("checkpoint_steps", &s->checkpoint_steps));
  TESSERA_RETURN_IF_ERROR(g.Read("backup_trainers", &s->backup_trainers));
  TESSERA_RETURN_IF_ERROR(g.Read("nonfinite", &s->nonfinite));
  TESSERA_RETURN_IF_ERROR(g.Read("wire", &s->wire));
  TESSERA_RETURN_IF_ERROR(g.Read("task_timeout", &s->task_timeout));
  TESSERA_RETURN_IF_ERROR(g.Read("max_failures", &s->max_failures));
  TESSERA_RETURN_IF_ERROR(g.Read("chunks_per_task", &s->chunks_per_task));
  TESSERA_RETURN_IF_ERROR(g.Read("transport", &s->transport));
  TESSERA_RETURN_IF_ERROR(g.RefuseUnknown());
  return CheckTrain(g, *s);
}

Status ReadTls(Fields& f, JobSpec* s, const std::string& origin) {
  YAML::Node t = f.Get("tls");
  if (!t) return Status::OK();
  TESSERA_RETURN_IF_ERROR(NeedMap(t, origin, "tls"));
  Fields g(t, "tls", origin);
  s->tls_dir = "/etc/tessera/tls";
  TESSERA_RETURN_IF_ERROR(g.Read("path", &s->tls_dir));
  TESSERA_RETURN_IF_ERROR(g.Read("secret", &s->tls_secret));
  TESSERA_RETURN_IF_ERROR(g.RefuseUnknown());
  if (s->tls_dir.empty() || s->tls_dir[0] != '/') return g.Fail("path", "must be an absolute directory");
  if (!s->tls_secret.empty() && (s->tls_secret.size() > 63 || !std::regex_match(s->tls_secret, DnsLabel())))
    return g.Fail("secret", "'" + s->tls_secret + "' is not a Secret's name");
  return Status::OK();
}

Status ReadPorts(Fields& f, JobSpec* s, const std::string& origin) {
  YAML::Node p = f.Get("ports");
  if (!p) return Status::OK();
  TESSERA_RETURN_IF_ERROR(NeedMap(p, origin, "ports"));
  Fields g(p, "ports", origin);
  TESSERA_RETURN_IF_ERROR(g.Read("http", &s->http_port));
  TESSERA_RETURN_IF_ERROR(g.Read("data", &s->port));
  TESSERA_RETURN_IF_ERROR(g.RefuseUnknown());
  for (auto [key, v] : {std::pair{"http", s->http_port}, std::pair{"data", s->port}})
    if (v < 1 || v > 65535) return g.Fail(key, "must be a port number (1-65535)");
  if (s->http_port == s->port) return g.Fail("data", "must differ from ports.http");
  return Status::OK();
}

// The top-level values, and what the job's configuration refuses (job_config.h), in its words.
Status CheckTopLevel(const Fields& f, const JobSpec& s, const std::string& origin) {
  if (s.name.empty()) return f.Fail("name", "is required (the job's name)");
  if (s.name.size() > 40 || !std::regex_match(s.name, DnsLabel()))
    return f.Fail("name", "'" + s.name + "' must be lowercase letters, digits and '-', at most 40 characters");
  if (!std::regex_match(s.namespace_, DnsLabel()) || s.namespace_.size() > 63)
    return f.Fail("namespace", "'" + s.namespace_ + "' is not a valid namespace name");
  if (s.image.empty()) return f.Fail("image", "must not be empty");
  if (s.image_pull_policy != "Always" && s.image_pull_policy != "IfNotPresent" && s.image_pull_policy != "Never")
    return f.Fail("image_pull_policy", "must be Always, IfNotPresent or Never");
  if (s.masters < 1 || s.masters > 5) return f.Fail("masters", "must be between 1 and 5");
  if (s.pservers < 1 || s.pservers > 1024) return f.Fail("pservers", "must be between 1 and 1024");
  if (s.replicas < 1 || s.replicas > s.pservers)
    return f.Fail("replicas", "must be between 1 and pservers (" + std::to_string(s.pservers) +
                                  "): each copy of a shard lives on a different pserver");
  if (s.start_pservers < 0 || s.start_pservers > s.pservers)
    return f.Fail("start_pservers", "must be between 1 and pservers (" + std::to_string(s.pservers) +
                                        ") for an elastic job, or 0 (not elastic)");
  if (s.trainers_min < 1) return f.Fail("trainers", "min must be at least 1");
  if (auto c = JobConfigOf(s); !c.ok()) return Status::InvalidArgument(origin + ": " + c.status().message());
  return Status::OK();
}

// A cluster's processes find the store and the checkpoints only where the spec says.
Status CheckSharedPaths(const Fields& f, const JobSpec& s) {
  if (s.store.path.empty()) {
    return f.Fail("store",
                  "is required: {path: /where/processes/see/it, claim: or nfs:}, in the file or beside it "
                  "(--set store.path=...)");
  }
  if (s.keeps_checkpoints() && s.checkpoints.path.empty()) {
    return f.Fail(
        "checkpoints",
        "is required while train.checkpoint_every or checkpoint_steps > 0 (or set them to 0), in the "
        "file or beside it (--set checkpoints.path=...)");
  }
  return Status::OK();
}

}  // namespace

std::vector<std::string> ShellCommand(const std::string& line) { return {"/bin/sh", "-c", line}; }

std::string ShellLine(const std::vector<std::string>& command) {
  if (command.size() == 3 && command[0] == "/bin/sh" && command[1] == "-c") return command[2];
  std::vector<std::string> quoted;
  for (const auto& a : command) quoted.push_back(ShellQuote(a));
  return Join(quoted, " ");
}

StatusOr<JobSpec> ParseJobSpec(const std::string& text, const std::string& origin, Where where) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap())
    return Status::InvalidArgument(origin + ": a job spec is a mapping of fields, starting with name:");
  JobSpec s;
  Fields f(root, "", origin);
  TESSERA_RETURN_IF_ERROR(f.Read("name", &s.name));
  TESSERA_RETURN_IF_ERROR(f.Read("image", &s.image));
  TESSERA_RETURN_IF_ERROR(f.Read("image_pull_policy", &s.image_pull_policy));
  TESSERA_RETURN_IF_ERROR(f.Read("namespace", &s.namespace_));
  TESSERA_RETURN_IF_ERROR(f.Read("masters", &s.masters));
  TESSERA_RETURN_IF_ERROR(f.Read("pservers", &s.pservers));
  TESSERA_RETURN_IF_ERROR(f.Read("replicas", &s.replicas));
  TESSERA_RETURN_IF_ERROR(f.Read("start_pservers", &s.start_pservers));
  TESSERA_RETURN_IF_ERROR(ReadEtcd(f, &s, origin));
  TESSERA_RETURN_IF_ERROR(ReadTrainers(f, &s, origin));
  TESSERA_RETURN_IF_ERROR(ReadResources(f, &s, origin));
  TESSERA_RETURN_IF_ERROR(ReadTrain(f, &s, origin));
  TESSERA_RETURN_IF_ERROR(ReadVolume(f, "store", &s.store, origin));
  TESSERA_RETURN_IF_ERROR(ReadVolume(f, "checkpoints", &s.checkpoints, origin));
  TESSERA_RETURN_IF_ERROR(ReadTls(f, &s, origin));
  TESSERA_RETURN_IF_ERROR(ReadPorts(f, &s, origin));
  TESSERA_RETURN_IF_ERROR(f.RefuseUnknown());
  TESSERA_RETURN_IF_ERROR(CheckTopLevel(f, s, origin));
  if (where == Where::kCluster) TESSERA_RETURN_IF_ERROR(CheckSharedPaths(f, s));
  return s;
}

StatusOr<JobSpec> LoadJobSpec(const std::string& path, Where where) {
  auto text = ReadFile(path);
  if (!text.ok())
    return Status::NotFound("cannot read the job spec " + path + ": " + text.status().message());
  return ParseJobSpec(*text, path, where);
}

}  // namespace tessera::spec
