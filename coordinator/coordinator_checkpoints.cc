// Coordinator::SaveCheckpoint and Coordinator::RestoreCheckpoint (coordinator.h): checkpoints of
// a session's variables under --checkpoint_root, fanned out to its workers.
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_internal.h"
#include "runtime/checkpoint.h"
#include "runtime/checkpoint_store.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

using coordinator_internal::CoordString;
using coordinator_internal::ParallelFor;

namespace {

constexpr int kMaxCheckpointVersionsKept = 1000;

// `s` with its code, prefixed with `what`.
absl::Status Prefixed(const std::string& what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// The first failure's code, with every failure in the message.
absl::Status JoinFailures(const std::string& what, const std::vector<absl::Status>& results,
                          const std::function<std::string(int)>& who) {
  std::vector<std::string> errors;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (size_t p = 0; p < results.size(); ++p) {
    if (results[p].ok()) continue;
    if (code == absl::StatusCode::kOk) code = results[p].code();
    errors.push_back(absl::StrCat(who(static_cast<int>(p)), ": ", results[p].message()));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::Status(code, absl::StrCat(what, ": ", absl::StrJoin(errors, "; ")));
}

}  // namespace

absl::StatusOr<v1::SaveCheckpointResponse> Coordinator::SaveCheckpoint(
    const std::string& id, const std::string& name, int keep) {
  const absl::Time started = absl::Now();
  absl::StatusOr<v1::SaveCheckpointResponse> saved = SaveCheckpointUncounted(id, name, keep);
  metrics_.CheckpointSaved(saved.ok(), absl::Now() - started);
  return saved;
}

absl::StatusOr<v1::RestoreCheckpointResponse> Coordinator::RestoreCheckpoint(
    const std::string& id, const std::string& name, bool partial) {
  absl::StatusOr<v1::RestoreCheckpointResponse> restored =
      RestoreCheckpointUncounted(id, name, partial);
  metrics_.CheckpointRestored(restored.ok());
  return restored;
}

absl::StatusOr<v1::SaveCheckpointResponse> Coordinator::SaveCheckpointUncounted(
    const std::string& id, const std::string& name, int keep) {
  ScopedLogContext log_session(id);
  const std::string what = absl::StrCat("saving a checkpoint of session ", id, " as '", name, "'");
  if (keep < 1 || keep > kMaxCheckpointVersionsKept) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": keep ", keep, " versions is not in [1, ",
                                                   kMaxCheckpointVersionsKept, "]"));
  }
  ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(options_.checkpoint_root));
  ASSIGN_OR_RETURN(std::shared_ptr<Session> session, FindSession(id));
  absl::MutexLock step_lock(&session->step_mu);
  RETURN_IF_ERROR(CheckUsable(session.get()));
  absl::StatusOr<std::string> directory = root.Resolve(name, /*create=*/true);
  if (!directory.ok()) return Prefixed(what, directory.status());
  // A new version beside the committed one; nothing the previous save wrote is touched until the
  // new version is committed (runtime/checkpoint_store.h).
  absl::StatusOr<CheckpointWriter> writer = CheckpointWriter::Begin(*directory, session->step, keep);
  if (!writer.ok()) return Prefixed(what, writer.status());
  const Mesh& mesh = session->mesh;
  const int n = mesh.num_processors();
  auto who = [&](int p) {
    return absl::StrCat("worker ", session->worker_ids[p], " (", session->addresses[p],
                        ", mesh coordinate ", CoordString(mesh.Coordinate(p)), ")");
  };
  std::vector<absl::StatusOr<v1::WorkerSaveCheckpointResponse>> saved(
      n, absl::UnknownError("not run"));
  ParallelFor(n, [&](int p) {
    v1::WorkerSaveCheckpointRequest request;
    request.set_session(id);
    request.set_directory(writer->version_dir());
    saved[p] = session->clients[p]->SaveCheckpoint(request, options_.checkpoint_timeout);
  });
  std::vector<absl::Status> statuses;
  std::vector<v1::CheckpointShard> shards;
  for (auto& r : saved) {
    statuses.push_back(r.status());
    if (r.ok()) {
      for (v1::CheckpointShard& s : *r->mutable_shards()) shards.push_back(std::move(s));
    }
  }
  absl::Status failed = JoinFailures(what, statuses, who);
  absl::StatusOr<v1::CheckpointManifest> manifest = absl::UnknownError("no manifest built");
  if (failed.ok()) {
    manifest = BuildManifest(session->program, session->step, std::move(shards));
    if (!manifest.ok()) failed = Prefixed(what, manifest.status());
  }
  if (failed.ok()) {
    if (absl::Status s = writer->Commit(*manifest); !s.ok()) failed = Prefixed(what, s);
  }
  if (!failed.ok()) {
    writer->Abandon();  // the new version's own files; the committed version stays as it was
    return failed;
  }
  v1::SaveCheckpointResponse response;
  response.set_step(manifest->step());
  response.set_num_shards(manifest->shards_size());
  for (const v1::CheckpointShard& s : manifest->shards()) {
    response.set_num_bytes(response.num_bytes() + s.byte_size());
  }
  LogInfo("coordinator: session ", id, " saved a checkpoint at step ", manifest->step(), " as ",
          writer->version_dir(), " (", manifest->shards_size(), " shards, ", response.num_bytes(),
          " bytes)");
  return response;
}

namespace {

// Damage that an older checkpoint version may not have; anything else (a program that does not
// match, a worker that fails) is the answer.
bool Damaged(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDataLoss || s.code() == absl::StatusCode::kNotFound;
}

// The mesh a checkpoint was saved on, as text ("?" when its manifest's mesh does not parse).
std::string SavedMesh(const v1::CheckpointManifest& manifest) {
  absl::StatusOr<Mesh> m = Mesh::FromProto(manifest.mesh());
  return m.ok() ? m->ToString() : std::string("?");
}

}  // namespace

absl::StatusOr<v1::RestoreCheckpointResponse> Coordinator::RestoreCheckpointUncounted(
    const std::string& id, const std::string& name, bool partial) {
  ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(options_.checkpoint_root));
  ASSIGN_OR_RETURN(std::shared_ptr<Session> session, FindSession(id));
  absl::MutexLock step_lock(&session->step_mu);
  RETURN_IF_ERROR(CheckUsable(session.get()));
  const std::string what = absl::StrCat(partial ? "partially restoring" : "restoring",
                                        " checkpoint '", name, "' into session ", id);
  absl::StatusOr<std::string> checkpoint_dir = root.Resolve(name, /*create=*/false);
  if (!checkpoint_dir.ok()) return Prefixed(what, checkpoint_dir.status());
  // The committed version (CURRENT), never a save in progress or one that died half way; when
  // it is damaged (a manifest or shard fails its checksum, a file is missing), the older complete
  // versions the saves kept, newest first (runtime/checkpoint_store.h).
  std::vector<std::string> versions;
  {
    absl::StatusOr<std::vector<std::string>> listed = RestorableVersions(*checkpoint_dir);
    if (!listed.ok()) return Prefixed(what, listed.status());
    versions = *std::move(listed);
  }
  const Mesh& mesh = session->mesh;
  const int n = mesh.num_processors();
  auto who = [&](int p) {
    return absl::StrCat("worker ", session->worker_ids[p], " (", session->addresses[p],
                        ", mesh coordinate ", CoordString(mesh.Coordinate(p)), ")");
  };
  std::string directory;
  v1::CheckpointManifest manifest_storage;
  const v1::CheckpointManifest* const manifest = &manifest_storage;
  auto fan_out = [&](v1::WorkerRestoreCheckpointRequest::Phase phase,
                     const std::vector<bool>& to) {
    std::vector<absl::Status> results(n);
    ParallelFor(n, [&](int p) {
      if (!to[p]) return;
      v1::WorkerRestoreCheckpointRequest request;
      request.set_session(id);
      request.set_directory(directory);
      request.set_phase(phase);
      if (phase == v1::WorkerRestoreCheckpointRequest::PREPARE) {
        *request.mutable_manifest() = *manifest;
        request.set_partial(partial);
      }
      results[p] = session->clients[p]->RestoreCheckpoint(request, options_.checkpoint_timeout);
    });
    return results;
  };
  const std::vector<bool> all(n, true);
  absl::Status failed;
  std::vector<std::string> skipped;  // damaged versions, with why
  const bool versioned = !versions.empty();  // else an old-format checkpoint, or none
  for (size_t v = 0; v < (versioned ? versions.size() : 1); ++v) {
    absl::StatusOr<CommittedCheckpoint> candidate =
        versioned ? ReadCheckpointVersion(versions[v]) : ReadCommittedCheckpoint(*checkpoint_dir);
    if (!candidate.ok()) {
      failed = Prefixed(what, candidate.status());
      if (!versioned || !Damaged(candidate.status())) return failed;
      skipped.push_back(std::string(candidate.status().message()));
      continue;
    }
    directory = candidate->directory;
    manifest_storage = std::move(candidate->manifest);
    // A partial restore checks the variables the checkpoint holds (and refuses ones the session
    // lacks); the workers then load only those.
    absl::Status s = CheckManifestForProgram(
        *manifest, partial ? ProgramWithSavedVariables(session->program, *manifest)
                           : session->program);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    }
    std::vector<absl::Status> prepared =
        fan_out(v1::WorkerRestoreCheckpointRequest::PREPARE, all);
    failed = JoinFailures(what, prepared, who);
    if (failed.ok()) break;
    std::vector<bool> abort(n);
    bool all_damage = true;
    for (int p = 0; p < n; ++p) {
      abort[p] = prepared[p].ok();
      if (!prepared[p].ok() && !Damaged(prepared[p])) all_damage = false;
    }
    fan_out(v1::WorkerRestoreCheckpointRequest::ABORT, abort);  // best effort
    if (!versioned || !all_damage) return failed;
    skipped.push_back(std::string(failed.message()));
  }
  if (!failed.ok()) {
    if (skipped.size() < 2) return failed;
    return absl::Status(failed.code(),
                        absl::StrCat(what, ": no version of it is intact: ",
                                     absl::StrJoin(skipped, "; ")));
  }
  if (!skipped.empty()) {
    LogWarning("coordinator: ", what, ": the newest version is damaged, restoring the older ",
               directory, " (", absl::StrJoin(skipped, "; "), ")");
  }
  std::vector<absl::Status> committed = fan_out(v1::WorkerRestoreCheckpointRequest::COMMIT, all);
  failed = JoinFailures(absl::StrCat(what, " (some workers installed the checkpoint, others "
                                           "did not: the session is unusable)"),
                        committed, who);
  if (!failed.ok()) {
    {
      absl::MutexLock lock(&mu_);
      FailSessionLocked(session.get(), failed);
    }
    ReleaseSession(session);
    return failed;
  }
  session->step = manifest->step();
  LogInfo("coordinator: session ", id, " restored checkpoint ", directory, " (step ",
          manifest->step(), ", saved on mesh ", SavedMesh(*manifest), ")");
  v1::RestoreCheckpointResponse response;
  response.set_step(manifest->step());
  return response;
}

}  // namespace meshrt
