// `tessera local --spec job.yaml`: the options of a local run from the job spec that `tessera
// launch`, `tessera deploy k8s` and the platform take (spec/job_spec.h). Every setting of the
// spec that means something on one machine is carried over; the cluster's own (image, namespace,
// resources, ports, etcd members, volumes' claims) are not needed here. Pure.
#pragma once

#include "local/supervisor.h"
#include "spec/job_spec.h"

namespace tessera::local {

// Sets `o`'s job, store, data sets, trainer (a built-in model, or the spec's command quoted for
// /bin/sh), topology, training, checkpoint and task settings from `s`; leaves the rest (run
// directory, resume, follow, busy polling ...) as they are. InvalidArgument for what `tessera
// local` cannot do (TLS between processes on one machine).
Status ApplySpec(const spec::JobSpec& s, LocalOptions* o);

// The other way: the spec of a local run's job (what ApplySpec reads back the same), so that
// what the job is made of is decided once, from a spec (JobConfigOf, role_argv).
spec::JobSpec SpecOf(const LocalOptions& o);

}  // namespace tessera::local
