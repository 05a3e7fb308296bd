#include "backends/cuda/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "backends/cuda/sha256.h"

namespace tp::cuda {

namespace fs = std::filesystem;

namespace {

// Entry file: "TPK2" | sha256(lengths + key + ptx + cubin) | u64 key, ptx and cubin lengths |
// key | ptx | cubin. Lengths are little-endian. The entry records its whole serialised key, so an
// entry that is not this key's (two entries swapped on disk, a file planted under another's
// name) is told apart from the right one, not just a damaged one; the hash covers the lengths
// so a damaged split is caught too.
constexpr char kMagic[4] = {'T', 'P', 'K', '2'};
constexpr size_t kLengthBytes = 3 * 8;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 32 + kLengthBytes;
// Far above any kernel's PTX and cubin: what a cache entry may be before it is not read at all.
constexpr long long kMaxEntryBytes = 256ll << 20;
constexpr const char* kEntrySuffix = ".bin";
constexpr const char* kTempMarker = ".tmp.";

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(char(value >> (8 * i)));
}

uint64_t get_u64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t(uint8_t(in[i])) << (8 * i);
  return value;
}

void put_field(std::string& out, const std::string& field) {
  put_u64(out, field.size());
  out += field;
}

std::array<uint8_t, 32> payload_hash(const char* lengths, const char* payload, size_t payload_bytes) {
  Sha256 hasher;
  hasher.update(lengths, kLengthBytes);
  hasher.update(payload, payload_bytes);
  return hasher.digest();
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string directory_for(const std::string& version) {
  if (!env("TILEPRIM_CACHE_DIR").empty()) return env("TILEPRIM_CACHE_DIR");
  if (version.empty()) return "";
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/tileprim/" + version;
  if (!env("HOME").empty()) return env("HOME") + "/.cache/tileprim/" + version;
  return "";
}

std::string entry_path(const std::string& directory, const std::string& digest) {
  return directory + "/" + digest + kEntrySuffix;
}

// The bytes of a regular file of at most kMaxEntryBytes, or "" with `why` set. The open does
// not block (a FIFO would wait for a writer forever) nor follow a symbolic link (one to
// /dev/zero never ends); fstat then says what was opened. `missing` is set for no file at all.
std::string read_regular_file(const std::string& path, bool& missing, std::string& why) {
  missing = false;
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    missing = errno == ENOENT || errno == ENOTDIR;  // no entry, or no directory yet (writing says why)
    why = errno == ELOOP ? "a symbolic link; entries are regular files" : std::strerror(errno);
    return "";
  }
  std::string bytes;
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    why = "not a regular file";
  } else if (info.st_size > kMaxEntryBytes) {
    why = std::to_string(info.st_size) + " bytes, more than an entry may hold (" + std::to_string(kMaxEntryBytes) + ")";
  } else {
    bytes.resize(size_t(info.st_size) + 1);  // one byte more: a file that grew meanwhile is seen
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) why = std::strerror(errno);
        break;
      }
      got += size_t(n);
    }
    if (why.empty() && got != size_t(info.st_size)) why = "it changed while being read";
    bytes.resize(why.empty() ? got : 0);
  }
  close(fd);
  return bytes;
}

// The entry at `path` for the key serialised as `key`: kHit, kMiss (no file), or kRejected with
// `why` (damaged, foreign, not a regular file, too large); both of these mean recompiling, and
// the entry is overwritten then.
enum class EntryRead { kHit, kMiss, kRejected };

EntryRead read_entry(const std::string& path, const std::string& key, CompiledKernel& out, std::string& why) {
  bool missing = false;
  const std::string bytes = read_regular_file(path, missing, why);
  if (missing) return EntryRead::kMiss;
  if (!why.empty()) return EntryRead::kRejected;
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    why = "not a tileprim kernel cache entry of this format";
    return EntryRead::kRejected;
  }
  const char* lengths = bytes.data() + sizeof(kMagic) + 32;
  const uint64_t key_bytes = get_u64(lengths), ptx_bytes = get_u64(lengths + 8), cubin_bytes = get_u64(lengths + 16);
  const uint64_t room = bytes.size() - kHeaderBytes;
  if (key_bytes > room || ptx_bytes > room || cubin_bytes > room || key_bytes + ptx_bytes + cubin_bytes != room) {
    why = "truncated or damaged (its lengths do not add up)";
    return EntryRead::kRejected;
  }
  const auto hash = payload_hash(lengths, bytes.data() + kHeaderBytes, room);
  if (std::memcmp(hash.data(), bytes.data() + sizeof(kMagic), hash.size()) != 0) {
    why = "damaged (its payload hash does not match)";
    return EntryRead::kRejected;
  }
  if (bytes.compare(kHeaderBytes, key_bytes, key) != 0) {
    why = "another kernel's entry (the key it records is not this kernel's)";
    return EntryRead::kRejected;
  }
  out.ptx.assign(bytes, kHeaderBytes + key_bytes, ptx_bytes);
  out.cubin.assign(bytes, kHeaderBytes + key_bytes + ptx_bytes, cubin_bytes);
  return EntryRead::kHit;
}

// Writes to a unique temp file in the same directory, then renames it over the entry: a
// reader sees the old file or the whole new one, and two writers of one kernel both succeed.
// Returns "" or what failed.
std::string write_entry(const std::string& directory, const std::string& digest, const std::string& key,
                        const CompiledKernel& kernel) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) return "cannot create the directory: " + ec.message();

  std::string lengths;
  put_u64(lengths, key.size());
  put_u64(lengths, kernel.ptx.size());
  put_u64(lengths, kernel.cubin.size());
  const std::string payload = key + kernel.ptx + kernel.cubin;
  const auto hash = payload_hash(lengths.data(), payload.data(), payload.size());
  std::string bytes(kMagic, sizeof(kMagic));
  bytes.append(reinterpret_cast<const char*>(hash.data()), hash.size());
  bytes += lengths;
  bytes += payload;

  std::string temp_path = directory + "/." + digest + kTempMarker + "XXXXXX";
  const int fd = mkstemp(temp_path.data());
  if (fd < 0) return std::string("cannot create a file there: ") + std::strerror(errno);
  fchmod(fd, 0644);  // mkstemp makes 0600; a cache shared by a group should stay readable
  std::string failure;
  for (size_t written = 0; written < bytes.size() && failure.empty();) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno != EINTR) failure = std::string("cannot write ") + temp_path + ": " + std::strerror(errno);
    if (n > 0) written += size_t(n);
  }
  if (close(fd) != 0 && failure.empty())
    failure = std::string("cannot write ") + temp_path + ": " + std::strerror(errno);
  if (failure.empty() && std::rename(temp_path.c_str(), entry_path(directory, digest).c_str()) != 0)
    failure = std::string("cannot rename ") + temp_path + " into place: " + std::strerror(errno);
  if (!failure.empty()) unlink(temp_path.c_str());
  return failure;
}

bool is_cache_file(const std::string& name) {
  const bool entry = name.size() == 64 + std::strlen(kEntrySuffix) &&
                     name.compare(64, std::string::npos, kEntrySuffix) == 0 &&
                     name.find_first_not_of("0123456789abcdef") == 64;
  const bool temp = name.size() > 65 && name[0] == '.' && name.find(kTempMarker) == 65;
  return entry || temp;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string CacheKey::serialise() const {
  std::string out = "tileprim-kernel-key-1";  // bump when the layout changes
  out.reserve(out.size() + source.size() + 256);
  for (const std::string* field : {&package_version, &header_digest, &nvrtc_version, &arch}) put_field(out, *field);
  put_u64(out, options.size());
  for (const auto& option : options) put_field(out, option);
  put_field(out, source);
  return out;
}

std::string CacheKey::digest() const { return sha256_hex(serialise()); }

KernelCache& KernelCache::get() {
  static KernelCache cache;
  return cache;
}

KernelCache::KernelCache() : directory_(directory_for("")), disk_wanted_(env("TILEPRIM_CACHE") != "0") {}

void KernelCache::set_package_version(const std::string& version) {
  std::lock_guard<std::mutex> lock(mutex_);
  set_package_version_locked(version);
}

void KernelCache::set_package_version_locked(const std::string& version) {
  version_ = version;
  directory_ = directory_for(version);
}

std::string KernelCache::directory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return directory_;
}

bool KernelCache::disk_enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_wanted_ && !disk_failed_ && !directory_.empty();
}

void KernelCache::disable_disk(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (disk_failed_) return;  // one warning per process
  disk_failed_ = true;
  std::fprintf(stderr,
               "tileprim: warning: kernel cache directory %s is not usable (%s); kernels are cached in memory "
               "only for this process. Set TILEPRIM_CACHE_DIR to a writable directory, or TILEPRIM_CACHE=0.\n",
               directory_.empty() ? "(none)" : directory_.c_str(), why.c_str());
}

void KernelCache::warn_entry(const std::string& path, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (entry_warned_) return;  // one warning per process
  entry_warned_ = true;
  std::fprintf(stderr,
               "tileprim: warning: kernel cache entry %s is not used (%s); the kernel is recompiled and the entry "
               "rewritten. Further such entries are replaced without a word.\n",
               path.c_str(), why.c_str());
}

std::shared_ptr<const CompiledKernel> KernelCache::get_or_compile(const CacheKey& key,
                                                                  const std::function<CompiledKernel()>& compile) {
  // SHA-256 runs at about 200 MB/s here, several microseconds for a few KB of source, so the
  // table is keyed by the serialised key itself and the digest is only computed on a miss.
  std::string serialised = key.serialise();
  bool use_disk = false;
  std::string directory;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto hit = table_.find(serialised); hit != table_.end()) return hit->second;
    if (key.package_version != version_) set_package_version_locked(key.package_version);
    use_disk = disk_wanted_ && !disk_failed_;
    directory = directory_;
  }
  if (use_disk && directory.empty()) {
    disable_disk("neither TILEPRIM_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
    use_disk = false;
  }

  const std::string digest = sha256_hex(serialised);
  const auto start = std::chrono::steady_clock::now();
  CompiledKernel fresh;
  bool from_disk = false;
  if (use_disk) {
    std::string why;
    const std::string path = entry_path(directory, digest);
    const EntryRead read = read_entry(path, serialised, fresh, why);
    from_disk = read == EntryRead::kHit;
    if (read == EntryRead::kRejected) warn_entry(path, why);
  }
  if (!from_disk) fresh = compile();
  fresh.origin = from_disk ? "disk" : "compiled";
  fresh.compile_ms = milliseconds_since(start);
  if (!from_disk && use_disk) {
    if (std::string failure = write_entry(directory, digest, serialised, fresh); !failure.empty()) {
      disable_disk(failure);
    }
  }

  // The table keeps its own copy labelled "memory", so hits share it without copying.
  auto remembered = std::make_shared<CompiledKernel>(fresh);
  remembered->origin = "memory";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A thread that raced us here stored an equally good entry; emplace keeps the first.
    table_.emplace(std::move(serialised), std::move(remembered));
  }
  return std::make_shared<const CompiledKernel>(std::move(fresh));
}

void KernelCache::clear(bool disk) {
  std::string directory;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.clear();
    directory = directory_;
  }
  if (!disk || directory.empty()) return;
  // Collect first: removing entries while a directory_iterator walks them is unspecified.
  std::vector<fs::path> doomed;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec))
    if (is_cache_file(it->path().filename().string())) doomed.push_back(it->path());
  for (const auto& path : doomed) fs::remove(path, ec);
}

}  // namespace tp::cuda
