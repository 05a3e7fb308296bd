// The kernel cache: an in-process table in front of a directory of compiled kernels.
//
//   CacheKey key{version, header_digest, "13.0", "sm_90a", options, source};
//   auto kernel = KernelCache::get().get_or_compile(key, [&] { return CompiledKernel{...}; });
//   kernel->origin;  // "memory", "disk" or "compiled"
//
// Disk: $TILEPRIM_CACHE_DIR, else $XDG_CACHE_HOME/tileprim/<version>, else
// $HOME/.cache/tileprim/<version>; one file <digest>.bin per kernel, which records its whole key
// and a hash of it all: an entry is used only when both check out, and only a regular file of
// bounded size is read (opened without blocking or following a link). Any other file under an
// entry's name is recompiled over, with one warning per process. TILEPRIM_CACHE=0 keeps
// kernels in memory only; so does a directory that cannot be written (with one warning).
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tp::cuda {

// Everything that decides the compiled bytes. The option order is kept: it can matter
// (include paths, repeated -D).
struct CacheKey {
  std::string package_version;
  std::string header_digest;   // digest of the device headers the source includes
  std::string nvrtc_version;   // e.g. "13.0"
  std::string arch;            // e.g. "sm_90a" or "compute_90"
  std::vector<std::string> options;
  std::string source;

  // Every field length-prefixed, so no two keys collide by moving bytes between fields.
  std::string serialise() const;
  // sha256 hex of serialise(): the entry's file name on disk.
  std::string digest() const;
};

struct CompiledKernel {
  std::string ptx;
  std::string cubin;
  std::string origin;       // "memory", "disk" or "compiled"
  double compile_ms = 0;    // time this process spent compiling or loading it
};

class KernelCache {
 public:
  static KernelCache& get();

  // The cached kernel, else the disk entry, else compile() (whose result is then stored).
  // compile runs without the lock held; it may throw, and nothing is stored then.
  std::shared_ptr<const CompiledKernel> get_or_compile(const CacheKey& key,
                                                       const std::function<CompiledKernel()>& compile);

  // Picks the on-disk directory; get_or_compile() sets it from its key too.
  void set_package_version(const std::string& version);
  // Empties the in-process table and, when disk is true, removes the entries (and stray
  // temp files) from this version's directory.
  void clear(bool disk);
  std::string directory() const;  // empty before a version is known, unless TILEPRIM_CACHE_DIR is set
  bool disk_enabled() const;

  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

 private:
  KernelCache();
  void set_package_version_locked(const std::string& version);
  void disable_disk(const std::string& why);
  void warn_entry(const std::string& path, const std::string& why);

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> table_;  // serialise() -> kernel
  std::string version_;
  std::string directory_;
  bool disk_wanted_ = true;   // false under TILEPRIM_CACHE=0
  bool disk_failed_ = false;  // the directory could not be written; stays so for the process
  bool entry_warned_ = false;  // an unusable entry was reported (once per process)
};

}  // namespace tp::cuda
