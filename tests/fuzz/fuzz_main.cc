// The main of every fuzz target (tests/fuzz/BUILD.bazel).
//
// Plain and ASan builds: replays every file under the corpus directories
// given as arguments through LLVMFuzzerTestOneInput, so the seed corpus and
// every crash ever found run as a regression test. A missing or empty corpus
// fails.
//
// --config=fuzz (HUB_LIBFUZZER defined, libFuzzer and its main linked):
// LLVMFuzzerInitialize puts, in front of the arguments, an output corpus
// directory
// ($HUB_FUZZ_CORPUS_OUT, else a fresh one under $TEST_TMPDIR, so the
// checked-in seeds are only read), -max_total_time=$HUB_FUZZ_SECONDS
// (default 5) and -timeout=20. Later libFuzzer flags override these.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#ifdef HUB_LIBFUZZER
// libFuzzer's own main runs; it calls this before it reads its flags, so the
// defaults go in front of the test's arguments here.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const char* keep = std::getenv("HUB_FUZZ_CORPUS_OUT");
  const std::string out = keep != nullptr && *keep != '\0'
                              ? std::string(keep)
                              : std::string(tmp != nullptr ? tmp : "/tmp") +
                                    "/fuzz-corpus-" + std::to_string(getpid());
  std::filesystem::create_directories(out);
  const char* seconds = std::getenv("HUB_FUZZ_SECONDS");
  // Kept for the whole run: libFuzzer holds on to the pointers.
  static std::vector<std::string>* args = new std::vector<std::string>{
      (*argv)[0],
      std::string("-max_total_time=") +
          (seconds != nullptr && *seconds != '\0' ? seconds : "5"),
      // A single input running this long is a hang: report it as one.
      "-timeout=20", "-print_final_stats=1", out};
  for (int i = 1; i < *argc; ++i) args->push_back((*argv)[i]);
  static std::vector<char*>* pointers = new std::vector<char*>;
  for (std::string& a : *args) pointers->push_back(a.data());
  pointers->push_back(nullptr);
  *argc = static_cast<int>(args->size());
  *argv = pointers->data();
  return 0;
}
#else
int main(int argc, char** argv) {
  int files = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;  // a libFuzzer flag
    std::error_code error;
    std::vector<std::filesystem::path> paths;
    if (std::filesystem::is_directory(arg, error)) {
      for (const auto& entry :
           std::filesystem::recursive_directory_iterator(arg, error)) {
        if (entry.is_regular_file()) paths.push_back(entry.path());
      }
    } else {
      paths.push_back(arg);
    }
    for (const std::filesystem::path& path : paths) {
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        return 1;
      }
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                             bytes.size());
      ++files;
    }
  }
  std::printf("replayed %d corpus files\n", files);
  return files > 0 ? 0 : 1;
}
#endif
