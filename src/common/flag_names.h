// The names of the `tessera` command's subcommands, flags and environment variables that other
// code writes: tessera local's child command lines and environments (src/local/child_commands),
// and the trainers' session (src/api), beside the parser that reads them (src/cli). One spelling
// for both sides, so renaming a flag cannot leave a writer behind.
#pragma once

namespace tessera::flags {

// Subcommands.
inline constexpr char kCommandPserver[] = "pserver";
inline constexpr char kCommandMaster[] = "master";
inline constexpr char kCommandTrain[] = "train";
inline constexpr char kCommandNode[] = "node";

// Flags.
inline constexpr char kEtcd[] = "--etcd";
inline constexpr char kJob[] = "--job";
inline constexpr char kIndex[] = "--index";
inline constexpr char kLeaseTtl[] = "--lease-ttl";
inline constexpr char kTransport[] = "--transport";
inline constexpr char kBusyPoll[] = "--busy-poll-us";
inline constexpr char kCheckpointDir[] = "--checkpoint-dir";
inline constexpr char kCheckpointEvery[] = "--checkpoint-every";
inline constexpr char kStore[] = "--store";
inline constexpr char kDataset[] = "--dataset";
inline constexpr char kPasses[] = "--passes";
inline constexpr char kChunksPerTask[] = "--chunks-per-task";
inline constexpr char kMinTasks[] = "--min-tasks";
inline constexpr char kMinTaskRecords[] = "--min-task-records";
inline constexpr char kTaskTimeout[] = "--task-timeout";
inline constexpr char kMaxFailures[] = "--max-failures";
inline constexpr char kHttpPort[] = "--http-port";
inline constexpr char kHttpHost[] = "--http-host";
inline constexpr char kLogDir[] = "--log-dir";
inline constexpr char kHistoryFile[] = "--history-file";
inline constexpr char kModel[] = "--model";
inline constexpr char kBatchSize[] = "--batch-size";
inline constexpr char kEvalDataset[] = "--eval-dataset";
inline constexpr char kModelArg[] = "--model-arg";
inline constexpr char kRole[] = "--role";
inline constexpr char kFirstRank[] = "--first-rank";
inline constexpr char kDataDir[] = "--data-dir";
inline constexpr char kStopOnEof[] = "--stop-on-eof";
inline constexpr char kHostProcesses[] = "--host-processes";
inline constexpr char kSecretFile[] = "--secret-file";

// Environment variables (each stands for the flag of the same name where both exist).
inline constexpr char kEnvEtcd[] = "TESSERA_ETCD";
inline constexpr char kEnvJob[] = "TESSERA_JOB";
inline constexpr char kEnvTrainerId[] = "TESSERA_TRAINER_ID";
inline constexpr char kEnvStore[] = "TESSERA_STORE";
inline constexpr char kEnvDataset[] = "TESSERA_DATASET";
inline constexpr char kEnvEvalDataset[] = "TESSERA_EVAL_DATASET";
inline constexpr char kEnvRunDir[] = "TESSERA_RUN_DIR";
inline constexpr char kEnvBatchSize[] = "TESSERA_BATCH_SIZE";
inline constexpr char kEnvLeaseTtl[] = "TESSERA_LEASE_TTL";
inline constexpr char kEnvTransport[] = "TESSERA_TRANSPORT";
inline constexpr char kEnvPipeline[] = "TESSERA_PIPELINE";  // 0: ClientOptions::pipeline off
inline constexpr char kEnvBusyPoll[] = "TESSERA_BUSY_POLL_US";  // common/busy_poll.h
inline constexpr char kEnvWorkAhead[] =
    "TESSERA_WORK_AHEAD";  // 1/0: a built-in trainer begins its next step ahead, or not
inline constexpr char kEnvHttpPort[] = "TESSERA_HTTP_PORT";
// How to reach the job (include/tessera/connection.h).
inline constexpr char kEnvEtcdUser[] = "TESSERA_ETCD_USER";
inline constexpr char kEnvEtcdPassword[] = "TESSERA_ETCD_PASSWORD";
inline constexpr char kEnvEtcdCredentials[] = "TESSERA_ETCD_CREDENTIALS";
inline constexpr char kEnvEtcdTls[] = "TESSERA_ETCD_TLS";
inline constexpr char kEnvEtcdCa[] = "TESSERA_ETCD_CA";
inline constexpr char kEnvEtcdCert[] = "TESSERA_ETCD_CERT";
inline constexpr char kEnvEtcdKey[] = "TESSERA_ETCD_KEY";
inline constexpr char kEnvJobSecretFile[] = "TESSERA_JOB_SECRET_FILE";
inline constexpr char kEnvTlsCa[] = "TESSERA_TLS_CA";
inline constexpr char kEnvTlsCert[] = "TESSERA_TLS_CERT";
inline constexpr char kEnvTlsKey[] = "TESSERA_TLS_KEY";

}  // namespace tessera::flags
