// A shared library opened with dlopen at run time, its entry points found with dlsym: how
// tileprim reaches libcuda, NVRTC and NCCL without linking them, so importing it never needs
// a GPU or a toolkit.
#pragma once
#include <string>
#include <type_traits>

namespace tp::cuda {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary() = default;  // never closed: the process may still hold its pointers

  // Opens `candidate` (a path or a name for the loader); on failure appends
  // "  candidate: why\n" to `failures` and returns false. An absent path is not dlopened.
  bool open(const std::string& candidate, std::string& failures);
  bool loaded() const { return handle_ != nullptr; }
  void close();  // only after a failed resolve, before anything used it

  // Sets slot to the symbol, or appends its name to `missing` ("a, b").
  template <class F> void resolve(F& slot, const char* name, std::string& missing) const {
    void* symbol = find(name);
    if (!symbol) missing += std::string(missing.empty() ? "" : ", ") + name;
    slot = reinterpret_cast<std::remove_reference_t<F>>(symbol);
  }
  void* find(const char* name) const;
  std::string path_of(void* symbol) const;  // the file the symbol came from

 private:
  void* handle_ = nullptr;
  std::string candidate_;
};

}  // namespace tp::cuda
