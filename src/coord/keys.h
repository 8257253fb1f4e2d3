// The etcd key layout of a Tessera job: every key lives under /tessera/<job>/.
// This header is the one place that spells key names; docs/etcd-keys.md explains each.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::keys {

inline std::string Root() { return "/tessera/"; }
inline std::string Job(std::string_view job) { return Root() + std::string(job) + "/"; }

// Job configuration (JSON), written once by `tessera job create`.
inline std::string Config(std::string_view job) { return Job(job) + "config"; }
// The job's secret (64 hex characters; security/job_secret.h), beside the configuration. With
// `job create --secure` only the job's own etcd user may read it.
inline std::string Secret(std::string_view job) { return Job(job) + "secret"; }
// Slot -> pserver index map (JSON), beside the configuration.
inline std::string SlotMap(std::string_view job) { return Job(job) + "slotmap"; }

// pserver registrations: one key per claimed index, attached to the pserver's lease.
inline std::string PserverPrefix(std::string_view job) { return Job(job) + "pservers/"; }
inline std::string Pserver(std::string_view job, int index) {
  return PserverPrefix(job) + std::to_string(index);
}
// Replicas (the job's replicas > 1): the pserver processes ("hosts"), one key per claimed host
// index attached to its lease; the shards (pserver indices above) are served by the hosts the
// replica map names, kept beside the configuration (JSON, job/replica_map.h).
inline std::string PserverHostPrefix(std::string_view job) { return Job(job) + "pserver-hosts/"; }
inline std::string ReplicaMap(std::string_view job) { return Job(job) + "replicas"; }
// Per-pserver "initialized" flags, written by each pserver once its parameters are set.
inline std::string PserverReadyPrefix(std::string_view job) { return Job(job) + "pserver-ready/"; }
inline std::string PserverReady(std::string_view job, int index) {
  return PserverReadyPrefix(job) + std::to_string(index);
}
// Election-style lock that decides which trainer initializes the parameters.
inline std::string InitLockPrefix(std::string_view job) { return Job(job) + "init-lock/"; }

// Trainer registrations, attached to each trainer's lease.
inline std::string TrainerPrefix(std::string_view job) { return Job(job) + "trainers/"; }
inline std::string Trainer(std::string_view job, std::string_view id) {
  return TrainerPrefix(job) + std::string(id);
}

// Trainers that deregistered on purpose (they finished or were stopped), written in the same
// transaction as the deregistration: {"pid": P, "epoch": E}. Tells a supervisor that a trainer
// process whose registration is gone did not lose its lease (it is not frozen).
inline std::string TrainerLeftPrefix(std::string_view job) { return Job(job) + "trainers-left/"; }
inline std::string TrainerLeft(std::string_view job, std::string_view id) {
  return TrainerLeftPrefix(job) + std::string(id);
}

// Master election: candidates under this prefix; the leader is the oldest key.
inline std::string MasterElectionPrefix(std::string_view job) { return Job(job) + "master/election/"; }
// The master's persisted state (task queue snapshot and deltas).
inline std::string MasterStatePrefix(std::string_view job) { return Job(job) + "master/state/"; }

// Latest checkpoint metadata per pserver index.
inline std::string CheckpointPrefix(std::string_view job) { return Job(job) + "checkpoints/"; }
inline std::string Checkpoint(std::string_view job, int index) {
  return CheckpointPrefix(job) + std::to_string(index);
}

// Consistent checkpoints (sync jobs with checkpoint steps): the data position saved with each
// consistent version (20-digit zero-padded, so keys sort by version), and the rollback order
// that the master applies once per generation: {"version": V, "generation": G}.
inline std::string PositionPrefix(std::string_view job) { return Job(job) + "positions/"; }
inline std::string Position(std::string_view job, int64_t version) {
  std::string v = std::to_string(version);
  return PositionPrefix(job) + std::string(v.size() < 20 ? 20 - v.size() : 0, '0') + v;
}
inline std::string Rollback(std::string_view job) { return Job(job) + "rollback"; }
// A job that follows its data set (--follow) stops taking new chunks once this key exists.
inline std::string FollowStop(std::string_view job) { return Job(job) + "follow/stop"; }

// Training metrics (cost history) kept for the console.
inline std::string MetricsPrefix(std::string_view job) { return Job(job) + "metrics/"; }

// `tessera local`: the number of trainers the supervisor should run (`tessera local scale`).
inline std::string LocalTrainers(std::string_view job) { return Job(job) + "local/trainers"; }
// `tessera local` of an elastic job: the number of pserver processes it should run.
inline std::string LocalPservers(std::string_view job) { return Job(job) + "local/pservers"; }

// `tessera launch`: the job spec (YAML) the launcher ran, read by every `tessera node` it started,
// and the stop order ("finished" or "stopped") that ends every node gracefully.
inline std::string LaunchSpec(std::string_view job) { return Job(job) + "launch/spec"; }
inline std::string LaunchStop(std::string_view job) { return Job(job) + "launch/stop"; }

// The last path element of a key ("/tessera/j/pservers/3" -> "3").
inline std::string_view LastElement(std::string_view key) {
  size_t slash = key.rfind('/');
  return slash == std::string_view::npos ? key : key.substr(slash + 1);
}

}  // namespace tessera::keys
