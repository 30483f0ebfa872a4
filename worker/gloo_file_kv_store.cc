#include "worker/gloo_file_kv_store.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "util/file.h"

namespace meshrt {
namespace {

bool ReadFile(const std::string& path, std::string* value) {
  absl::StatusOr<std::string> bytes = meshrt::ReadFile(path);
  if (!bytes.ok()) return false;
  *value = std::move(*bytes);
  return true;
}

}  // namespace

std::string FileKeyValueStore::PathOf(const std::string& key) const {
  std::string name;
  for (unsigned char c : key) absl::StrAppendFormat(&name, "%02x", c);
  return absl::StrCat(dir_, "/", name);
}

absl::Status FileKeyValueStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("KeyValueStore::Set: empty key");
  const std::string path = PathOf(key);
  std::string existing;
  if (ReadFile(path, &existing)) {
    if (existing == value) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("KeyValueStore: key '", key, "' is already set to a different value"));
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".",
                                       std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(value.data(), value.size());
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileKeyValueStore::Get(const std::string& key, absl::Duration timeout) {
  if (key.empty()) return absl::InvalidArgumentError("KeyValueStore::Get: empty key");
  const absl::Time deadline = absl::Now() + timeout;
  const std::string path = PathOf(key);
  std::string value;
  while (!ReadFile(path, &value)) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "KeyValueStore: key '", key, "' was not set within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return value;
}

}  // namespace meshrt
