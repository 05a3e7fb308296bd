#include "backends/cuda/kernel_resources.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dispatch/architecture.h"
#include "errors.h"

namespace tp::cuda {

namespace {

// The ELF64 little-endian layout a CUBIN has (the System V ABI's): section headers and symbols.
constexpr std::size_t kSectionHeaderBytes = 64, kSymbolBytes = 24;
constexpr uint32_t kSymbolTable = 2, kNoBits = 8;  // NOBITS: a size and no bytes in the image (.nv.shared.*)
// .nv.info entries: format, attribute, then a 16-bit field; EIFMT_SVAL's field is the size of the
// payload that follows, the others' is the value itself
constexpr uint8_t kFormatSized = 0x04;
constexpr uint8_t kAttrRegisterCount = 0x2f, kAttrFrameSize = 0x11, kAttrBarriers = 0x4c;

// Bounds-checked little-endian reads of an image that may be anything.
class Image {
 public:
  explicit Image(const std::string& bytes) : bytes_(bytes) {}
  bool has(uint64_t offset, uint64_t size) const { return offset <= bytes_.size() && size <= bytes_.size() - offset; }
  template <class T> T read(uint64_t offset) const {
    T value{};
    if (has(offset, sizeof(T))) std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }
  // The NUL-terminated name at `offset`, or "" where it runs past the image.
  std::string name(uint64_t offset) const {
    if (!has(offset, 1)) return "";
    const void* end = std::memchr(bytes_.data() + offset, '\0', bytes_.size() - offset);
    return end ? std::string(bytes_.data() + offset) : "";
  }

 private:
  const std::string& bytes_;
};

struct Section {
  uint32_t name = 0, type = 0, link = 0;
  uint64_t offset = 0, size = 0;
};

std::vector<Section> sections(const Image& image) {
  const uint64_t table = image.read<uint64_t>(0x28);
  const uint16_t entry = image.read<uint16_t>(0x3a), count = image.read<uint16_t>(0x3c);
  std::vector<Section> out;
  if (entry != kSectionHeaderBytes || !image.has(table, uint64_t{count} * entry)) return out;
  for (uint16_t i = 0; i < count; ++i) {
    const uint64_t at = table + uint64_t{i} * entry;
    Section s{image.read<uint32_t>(at), image.read<uint32_t>(at + 4), image.read<uint32_t>(at + 40),
              image.read<uint64_t>(at + 24), image.read<uint64_t>(at + 32)};
    if (s.type != kNoBits && !image.has(s.offset, s.size)) return {};
    out.push_back(s);
  }
  return out;
}

// The index of `function` in the symbol table, or -1.
long long symbol_index(const Image& image, const std::vector<Section>& all, const std::string& function) {
  for (const Section& table : all) {
    if (table.type != kSymbolTable || table.link >= all.size()) continue;
    const Section& names = all[table.link];
    for (uint64_t k = 0; k < table.size / kSymbolBytes; ++k) {
      const uint32_t name = image.read<uint32_t>(table.offset + k * kSymbolBytes);
      if (name < names.size && image.name(names.offset + name) == function) return static_cast<long long>(k);
    }
  }
  return -1;
}

}  // namespace

FunctionResources function_resources(const std::string& cubin, const std::string& function) {
  FunctionResources r;
  const Image image(cubin);
  static const char kMagic[] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */};
  if (cubin.size() < 64 || std::memcmp(cubin.data(), kMagic, sizeof kMagic) != 0) return r;
  const std::vector<Section> all = sections(image);
  const uint16_t names_index = image.read<uint16_t>(0x3e);
  const long long symbol = symbol_index(image, all, function);
  if (all.empty() || names_index >= all.size() || symbol < 0) return r;
  r.static_shared = 0;
  r.barriers = 0;  // none named where the function's own .nv.info says nothing
  const std::string shared_section = ".nv.shared." + function, own_info = ".nv.info." + function;
  for (const Section& s : all) {
    const std::string name = s.name < all[names_index].size ? image.name(all[names_index].offset + s.name) : "";
    if (name == shared_section) r.static_shared = static_cast<long long>(s.size);
    if ((name != ".nv.info" && name != own_info) || s.type == kNoBits) continue;  // only sections whose bytes were checked
    for (uint64_t at = s.offset; at + 4 <= s.offset + s.size;) {
      const uint8_t format = image.read<uint8_t>(at), attribute = image.read<uint8_t>(at + 1);
      const uint16_t field = image.read<uint16_t>(at + 2);
      const uint64_t payload = format == kFormatSized ? field : 0;
      if (name == own_info && attribute == kAttrBarriers && format != kFormatSized) r.barriers = std::min<int>(field, 16);
      if (name == ".nv.info" && payload >= 8 && at + 4 + payload <= s.offset + s.size &&
          image.read<uint32_t>(at + 4) == symbol) {
        const uint32_t value = image.read<uint32_t>(at + 8);
        if (attribute == kAttrRegisterCount) {  // no architecture gives a thread more than SmLimits' default
          r.registers = static_cast<int>(std::min<uint32_t>(value, SmLimits{}.registers_per_thread));
        }
        if (attribute == kAttrFrameSize) r.frame_bytes = value;
      }
      at += 4 + payload;
    }
  }
  return r;
}

Residency residency(const std::string& arch, int block_threads, int registers, long long shared_bytes, int barriers) {
  if (block_threads < 1 || registers < 0 || shared_bytes < 0 || barriers < 0 || barriers > 16) {
    throw ValueError("residency: block_threads must be positive, registers and shared_bytes not negative, "
                     "barriers from 0 to 16");
  }
  const SmLimits sm = sm_limits(arch);
  const int warp = sm.warp_threads, unit = sm.register_unit, partitions = sm.register_partitions;
  const int warps_per_block = (block_threads + warp - 1) / warp;
  Residency r;
  r.max_warps = sm.threads / warp;
  // registers: each warp takes registers x 32 rounded up to 256, from one of four partitions
  const int per_warp = std::max(1, (registers * warp + unit - 1) / unit * unit);
  const int by_registers = (sm.registers / partitions / per_warp) * partitions / warps_per_block;
  const long long taken = shared_bytes + sm.shared_reserved_per_block;
  const long long per_block = (taken + sm.shared_unit - 1) / sm.shared_unit * sm.shared_unit;
  const int by_shared = shared_bytes > sm.shared_per_block ? 0 : static_cast<int>(sm.shared / std::max(1LL, per_block));
  const int by_threads = r.max_warps / warps_per_block;
  const int by_barriers = sm.barriers > 0 && barriers > 0 ? sm.barriers / barriers : sm.blocks;
  r.blocks = std::min({by_registers, by_shared, by_threads, sm.blocks, by_barriers});
  r.warps = r.blocks * warps_per_block;
  const std::string warps = " allow " + std::to_string(r.blocks) + (r.blocks == 1 ? " block of " : " blocks of ") +
                            std::to_string(warps_per_block) + (warps_per_block == 1 ? " warp" : " warps");
  if (r.blocks == by_threads) {
    r.limit = "threads: " + std::to_string(sm.threads) + " per SM" + warps;
  } else if (r.blocks == sm.blocks) {
    r.limit = "blocks: " + std::to_string(sm.blocks) + " per SM at most";
  } else if (r.blocks == by_barriers) {
    r.limit = "barriers: " + std::to_string(barriers) + " named per block (" + std::to_string(sm.barriers) +
              " per SM)" + warps;
  } else if (r.blocks == by_shared) {
    r.limit = "shared memory: " + std::to_string(shared_bytes) + " bytes per block" + warps;
  } else {
    r.limit = "registers: " + std::to_string(registers) + " per thread" + warps;
  }
  return r;
}

}  // namespace tp::cuda
