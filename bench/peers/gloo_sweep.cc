// The sweep over Gloo (Debian's libgloo-dev, TCP transport): ring or
// halving-doubling all-reduce, ring all-gather, barrier, pair send/recv.
// Ranks meet through a FileStore in a shared directory.
//
//   GLOO_RANK=r GLOO_SIZE=n GLOO_STORE=/tmp/dir gloo-sweep --algorithm ring|hd [sweep options]
#include <memory>
#include <string>

#include <gloo/allgather_ring.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench/sweep_driver.h"

namespace {

class GlooComm {
 public:
  GlooComm(int rank, int size, const std::string& store_dir, bool halving_doubling)
      : hd_(halving_doubling) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(store, device);
    context_ = context;
  }
  int rank() { return context_->rank; }
  int size() { return context_->size; }
  void all_sum(float* data, std::size_t count) {
    // Gloo algorithms bind their buffers at construction: cache one per (buffer, count).
    if (data != reduce_data_ || count != reduce_count_) {
      std::vector<float*> ptrs{data};
      if (hd_) {
        reduce_ = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs,
                                                                          static_cast<int>(count));
      } else {
        reduce_ =
            std::make_unique<gloo::AllreduceRing<float>>(context_, ptrs, static_cast<int>(count));
      }
      reduce_data_ = data;
      reduce_count_ = count;
    }
    reduce_->run();
  }
  void all_gather(const float* in, float* out, std::size_t count) {
    if (out != gather_out_ || count != gather_count_) {
      gather_ = std::make_unique<gloo::AllgatherRing<float>>(
          context_, std::vector<const float*>{in}, out, static_cast<int>(count));
      gather_out_ = out;
      gather_count_ = count;
    }
    gather_->run();
  }
  void barrier() {
    if (!barrier_) barrier_ = std::make_unique<gloo::BarrierAllToOne>(context_);
    barrier_->run();
  }
  void send(int peer, const std::byte* data, std::size_t bytes) {
    auto buffer = context_->getPair(peer)->createSendBuffer(1, const_cast<std::byte*>(data), bytes);
    buffer->send();
    buffer->waitSend();
  }
  void recv(int peer, std::byte* data, std::size_t bytes) {
    auto buffer = context_->getPair(peer)->createRecvBuffer(1, data, bytes);
    buffer->waitRecv();
  }
  double max(double value) {
    // Two-rank-safe max through all-gather (Gloo has no max all-reduce here).
    std::vector<double> all(static_cast<std::size_t>(size()));
    gloo::AllgatherRing<double> gather(context_, std::vector<const double*>{&value}, all.data(), 1);
    gather.run();
    return *std::max_element(all.begin(), all.end());
  }

 private:
  bool hd_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<gloo::Algorithm> reduce_, gather_, barrier_;
  float* reduce_data_ = nullptr;
  std::size_t reduce_count_ = 0;
  float* gather_out_ = nullptr;
  std::size_t gather_count_ = 0;
};

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  bool hd = false;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--algorithm" && i + 1 < argc) {
      hd = std::string(argv[++i]) == "hd";
    } else {
      rest.push_back(argv[i]);
    }
  }
  const char* store = std::getenv("GLOO_STORE");
  if (env_int("GLOO_RANK") < 0 || env_int("GLOO_SIZE") < 1 || store == nullptr) {
    std::fprintf(stderr, "gloo-sweep: set GLOO_RANK, GLOO_SIZE and GLOO_STORE\n");
    return 2;
  }
  GlooComm comm(env_int("GLOO_RANK"), env_int("GLOO_SIZE"), store, hd);
  auto options = rlx::bench::parse_sweep_options(static_cast<int>(rest.size()), rest.data(),
                                                 hd ? "gloo-hd" : "gloo-ring");
  rlx::bench::Sweep<GlooComm>(comm, options).run();
  return 0;
}
