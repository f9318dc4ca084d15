#include "rlx/transport/hostfile_reader.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace rlx::hostfile {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
}

// The ReadError `call` throws; fails the test when it throws none.
template <class Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const ReadError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ReadError";
  return {};
}

TEST(HostfileReader, ReadsARegularFileWhole) {
  const fs::path file = temp_path("hosts");
  std::ofstream(file) << "node1 slots=2\nnode2\n";
  EXPECT_EQ(read_text(file.string(), 1s), "node1 slots=2\nnode2\n");
  fs::remove(file);
}

TEST(HostfileReader, AFileLongerThanTheCapIsRefusedAfterReadingOneByteMore) {
  const fs::path file = temp_path("huge_hosts");
  std::ofstream(file) << std::string(kMaxBytes + 1, ' ');
  EXPECT_NE(error_of([&] { read_text(file.string(), 5s); }).find("is longer than 4 MiB"),
            std::string::npos);
  std::ofstream(file) << std::string(kMaxBytes, ' ');  // exactly the cap is fine
  EXPECT_EQ(read_text(file.string(), 5s).size(), kMaxBytes);
  fs::remove(file);
}

TEST(HostfileReader, DevZeroIsRefusedAtItsFirstByte) {
  EXPECT_NE(error_of([] {
              read_text("/dev/zero", 5s);
            }).find("/dev/zero: is not a text file (byte 0x00 at offset 0)"),
            std::string::npos);
}

TEST(HostfileReader, AFifoNobodyWritesFailsAtTheDeadline) {
  const fs::path fifo = temp_path("silent_fifo");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_of([&] { read_text(fifo.string(), 300ms); });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(error.find("nothing to read within RLX_CONNECT_TIMEOUT_S (0.3 s)"), std::string::npos)
      << error;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 2s);
  fs::remove(fifo);
}

TEST(HostfileReader, AFifoIsReadToItsWritersEnd) {
  const fs::path fifo = temp_path("written_fifo");
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The writer arrives after the reader opened: the reader must wait for it,
  // not take the empty FIFO for an empty file.
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    std::ofstream(fifo) << "[\"127.0.0.1:5000\"]";
  });
  EXPECT_EQ(read_text(fifo.string(), 10s), "[\"127.0.0.1:5000\"]");
  writer.join();
  fs::remove(fifo);
}

TEST(HostfileReader, ADirectoryOrAMissingFileIsNamed) {
  EXPECT_NE(error_of([] { read_text("/", 1s); }).find("/: is a directory"), std::string::npos);
  EXPECT_NE(error_of([] {
              read_text("/nonexistent/hosts", 1s);
            }).find("/nonexistent/hosts: cannot be read (No such file or directory)"),
            std::string::npos);
}

TEST(HostfileReader, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::string error = error_of([&] { parse_json(deep, "deep.json"); });
  EXPECT_NE(error.find("deep.json: nests lists or objects more than 32 deep (at byte 32)"),
            std::string::npos)
      << error;
  // Brackets inside strings do not nest; 32 levels are fine.
  EXPECT_NO_THROW(parse_json("[\"" + std::string(100, '[') + "\"]", "f"));
  EXPECT_NO_THROW(parse_json(std::string(32, '[') + std::string(32, ']'), "f"));
  EXPECT_THROW(parse_json(std::string(33, '{') + "}", "f"), ReadError);
}

TEST(HostfileReader, ParseErrorsQuoteAnExcerptWithThePosition) {
  const std::string huge_token = "[\"" + std::string(100'000, 'x');
  const std::string error = error_of([&] { parse_json(huge_token, "cut.json"); });
  EXPECT_NE(error.find("cut.json: is not valid JSON: parse error at line 1, column 100003"),
            std::string::npos)
      << error;
  EXPECT_LT(error.size(), 300u) << error;
  // A number too large for a double is nlohmann's out_of_range, not a parse_error.
  EXPECT_NE(error_of([] { parse_json("[1e400]", "big.json"); }).find("big.json: is not valid JSON"),
            std::string::npos);
}

TEST(HostfileReader, ExcerptsOfValuesAreShort) {
  const nlohmann::json big(5000, 1);  // "[1,1,...]": 10,001 bytes
  EXPECT_EQ(excerpt(big, 5), "[1,1,... (9.8 KiB in all)");
}

}  // namespace
}  // namespace rlx::hostfile
