#include "rlx/transport/shm/segment.h"

#include <cstring>
#include <string>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlx/transport/auth.h"

namespace rlx::shm {
namespace {

using namespace std::chrono_literals;

// A fresh job token per test, so tests (and parallel runs) never meet.
std::string fresh_token() {
  const auth::Nonce nonce = auth::fresh_nonce();
  return std::string(reinterpret_cast<const char*>(nonce.data()), nonce.size());
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

const ErrorSite kSite{.rank = 0, .world_size = 2, .operation = "test"};
const SegmentOwner self = SegmentOwner::self();

TEST(SharedSegment, NamesHideTheTokenAndKeepJobsApart) {
  const std::string a = fresh_token(), b = fresh_token();
  EXPECT_NE(SharedSegment::name_for(a, 0, 0, self), SharedSegment::name_for(b, 0, 0, self));
  EXPECT_NE(SharedSegment::name_for(a, 0, 0, self), SharedSegment::name_for(a, 0, 1, self));
  EXPECT_TRUE(SharedSegment::name_for(a, 0, 3, self).starts_with(SharedSegment::job_prefix(a)));
  EXPECT_EQ(SharedSegment::name_for("token", 0, 3, self).find("token"), std::string::npos);
  EXPECT_TRUE(SharedSegment::name_for("token", 0, 3, {.pid_namespace = 4026531836, .pid = 77})
                  .ends_with("-3-4026531836-77"));
  EXPECT_NE(SharedSegment::name_for(a, 1, 0, self), SharedSegment::name_for(a, 2, 0, self));
}

// The creator's segment is private to its user, another process opens it
// by name and writes into it, and once unlinked nothing is left in /dev/shm.
TEST(SharedSegment, APeerProcessOpensItAndUnlinkingLeavesNothing) {
  const std::string name = SharedSegment::name_for(fresh_token(), 0, 0, self);
  SharedSegment mine = SharedSegment::create(kDefaultDirectory, name, 1 << 20, kSite);
  struct stat st {};
  ASSERT_EQ(::stat(mine.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(mine.data()) % 64, 0u);

  const pid_t child = ::fork();
  if (child == 0) {
    try {
      SharedSegment theirs =
          SharedSegment::open(kDefaultDirectory, name, 1 << 20, Clock::now() + 5s, kSite);
      std::memset(theirs.data(), 0x5a, theirs.size());
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(mine.data()[0], std::byte{0x5a});
  EXPECT_EQ(mine.data()[(1 << 20) - 1], std::byte{0x5a});
  mine.unlink();
  EXPECT_FALSE(exists(mine.path()));
  mine.data()[7] = std::byte{1};  // still mapped
}

TEST(SharedSegment, OpeningWaitsForTheCreatorUntilTheDeadline) {
  const std::string name = SharedSegment::name_for(fresh_token(), 0, 1, self);
  const auto start = Clock::now();
  try {
    SharedSegment::open(kDefaultDirectory, name, 4096, start + 200ms, kSite);
    FAIL() << "opened a segment nobody created";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
  }
  EXPECT_GE(Clock::now() - start, 200ms);
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(SharedSegment, ASegmentOfAnotherSizeIsRefused) {
  const std::string name = SharedSegment::name_for(fresh_token(), 0, 0, self);
  SharedSegment mine = SharedSegment::create(kDefaultDirectory, name, 4096, kSite);
  try {
    SharedSegment::open(kDefaultDirectory, name, 8192, Clock::now() + 1s, kSite);
    FAIL() << "opened a segment of another size";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::protocol_violation) << error.what();
  }
}

TEST(SharedSegment, AnExistingNameIsNotTakenOver) {
  const std::string name = SharedSegment::name_for(fresh_token(), 0, 0, self);
  SharedSegment first = SharedSegment::create(kDefaultDirectory, name, 4096, kSite);
  EXPECT_THROW(SharedSegment::create(kDefaultDirectory, name, 4096, kSite), CollectiveError);
  EXPECT_TRUE(exists(first.path()));
}

// More than /dev/shm holds: a clear error naming the directory and the free
// space, at creation (not a SIGBUS later), and no file left behind.
TEST(SharedSegment, TooLittleRoomIsAClearErrorAndLeavesNothing) {
  struct statvfs fs {};
  ASSERT_EQ(::statvfs(kDefaultDirectory, &fs), 0);
  const std::size_t too_much = static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize + (1u << 30);
  const std::string name = SharedSegment::name_for(fresh_token(), 0, 0, self);
  try {
    SharedSegment::create(kDefaultDirectory, name, too_much, kSite);
    FAIL() << "reserved more than the directory holds";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::resource_exhausted);
    const std::string text = error.what();
    EXPECT_NE(text.find("/dev/shm"), std::string::npos) << text;
    EXPECT_NE(text.find("free"), std::string::npos) << text;
    EXPECT_NE(text.find("RLX_SHM=0"), std::string::npos) << text;
  }
  EXPECT_FALSE(exists(std::string(kDefaultDirectory) + "/" + name));
}

TEST(SharedSegment, TheLauncherRemovesOneJobsLeftoversOnly) {
  const std::string job = fresh_token(), other = fresh_token();
  SharedSegment a =
      SharedSegment::create(kDefaultDirectory, SharedSegment::name_for(job, 0, 0, self), 64, kSite);
  SharedSegment b =
      SharedSegment::create(kDefaultDirectory, SharedSegment::name_for(job, 0, 1, self), 64, kSite);
  SharedSegment c = SharedSegment::create(kDefaultDirectory,
                                          SharedSegment::name_for(other, 0, 0, self), 64, kSite);
  EXPECT_EQ(remove_job_segments(kDefaultDirectory, job), 2);
  EXPECT_FALSE(exists(a.path()));
  EXPECT_FALSE(exists(b.path()));
  EXPECT_TRUE(exists(c.path()));
}

// A rank killed during set-up leaves its named segment behind when nobody
// outlives it to clean up: the next start removes it, since the process its
// name records is gone; live processes' segments, other pid namespaces' and
// files not named by rlx stay.
TEST(SharedSegment, OrphanedSegmentsAreRemovedAndEveryOtherFileStays) {
  const std::string job = fresh_token();
  const pid_t child = ::fork();
  if (child == 0) {
    new SharedSegment(SharedSegment::create(
        kDefaultDirectory, SharedSegment::name_for(job, 0, 1, SegmentOwner::self()), 64, kSite));
    ::_exit(0);  // no destructor: the name stays, as after SIGKILL
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const SegmentOwner gone{self.pid_namespace, child};
  const std::string orphan =
      std::string(kDefaultDirectory) + "/" + SharedSegment::name_for(job, 0, 1, gone);
  ASSERT_TRUE(exists(orphan));
  SharedSegment live =
      SharedSegment::create(kDefaultDirectory, SharedSegment::name_for(job, 0, 0, self), 64, kSite);
  SharedSegment elsewhere = SharedSegment::create(
      kDefaultDirectory, SharedSegment::name_for(job, 0, 2, {self.pid_namespace + 1, child}), 64,
      kSite);
  EXPECT_GE(remove_orphaned_segments(kDefaultDirectory), 1);
  EXPECT_FALSE(exists(orphan));
  EXPECT_TRUE(exists(live.path()));
  EXPECT_TRUE(exists(elsewhere.path()));
}

// A segment's name is new for every start of a job (its pid, a fresh
// instance): a file already there was planted, and the error says so.
TEST(SharedSegment, ANameThatExistsAlreadyIsNamedAsNotOurs) {
  const std::string name = SharedSegment::name_for(fresh_token(), 0, 0, self);
  const std::string path = std::string(kDefaultDirectory) + "/" + name;
  const int planted = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  ASSERT_GE(planted, 0);
  ::close(planted);
  try {
    SharedSegment::create(kDefaultDirectory, name, 64, kSite);
    ADD_FAILURE() << "a planted name was taken over";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("the name exists already"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("same token"), std::string::npos) << e.what();
  }
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace rlx::shm
