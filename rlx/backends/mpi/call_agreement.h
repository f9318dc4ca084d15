// How the MPI transport makes sure every rank runs the same collective
// before any of its data is used.
//
// MPI itself does not check: ranks that call MPI_Allreduce with different
// datatypes or ops get wrong values, different sizes get MPI_ERR_TRUNCATE on
// one rank and garbage on the other, and different collectives hang. So every
// rlx collective over MPI starts with one MPI_Allreduce of a one-word cell
// (8 bytes, MPI_UINT64_T: Open MPI's shared memory moves up to 8 bytes
// measurably faster than 12 or more), the same on every rank whatever the
// call, combined by a user-defined op:
//   * the cell holds the call's signature (kind, op, dtype, element count)
//     and a "disagreed" flag; combining two cells whose signatures differ
//     sets the flag, and a set flag stays set, so after the all-reduce every
//     rank knows whether every rank made the same call (MPI pairs the n-th
//     collective of every rank, so the sequence number needs no room);
//   * calls whose data fit in kInlineBytes (a 4-byte all_sum) carry it in the
//     cell, and the op reduces (or, for all_gather, merges) it only while the
//     signatures agree: one MPI call does the check and the work, and a
//     mismatch leaves the caller's buffer untouched;
//   * larger calls carry no data: once the cell shows agreement, every rank
//     makes the same MPI call with the same sizes;
//   * only when the flag is set, every rank runs a second all-reduce of the
//     full calls with the ranks that made them (the least and the greatest,
//     which every rank then holds alike), so the error can name both calls.
// A barrier is the cell alone (an all-reduce returns on no rank before every
// rank contributed).
//
// What it costs: docs/BENCHMARKS.md, "The MPI transport beside MPI_Allreduce".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <mpi.h>

#include "rlx/collectives/links.h"
#include "rlx/transport/call_codec.h"

namespace rlx::mpi {

class CallAgreement {
 public:
  // Data up to this size rides in the cell.
  static constexpr std::size_t kInlineBytes = 4;
  // Element counts from here on do not fit the cell (2^53: no buffer that
  // large can exist); the transport refuses them.
  static constexpr std::uint64_t kCountLimit = std::uint64_t{1} << 53;

  // Creates the diagnosis datatype and the ops; MPI must be started.
  CallAgreement();
  ~CallAgreement();
  CallAgreement(const CallAgreement&) = delete;
  CallAgreement& operator=(const CallAgreement&) = delete;
  // Frees the datatype and ops (before MPI_Finalize). Idempotent.
  void release();
  // 0 when the constructor's MPI calls succeeded, else the first failure's code.
  int creation_code() const { return creation_code_; }

  // Writes `call` (count below kCountLimit) into the cell and returns the
  // payload area to fill, of `inline_elements` elements of call.dtype (at
  // most kInlineBytes; 0 when the data does not ride along): what the op
  // reduces for all_reduce and reduce_scatter, or merges bit by bit (or) for
  // all_gather, whose payload must be zero outside this rank's block.
  std::span<std::byte> prepare(const CollectiveCall& call, std::uint64_t inline_elements);
  // The cell is one MPI_UINT64_T reduced with cell_op().
  void* cell() { return cell_.data(); }
  MPI_Op cell_op() const { return cell_op_; }
  // After the cell's all-reduce: true when every rank made the same call.
  bool agreed() const;

  // The second round, after a disagreement: this rank's call and rank.
  void prepare_diagnosis(const CollectiveCall& call, int rank);
  void* diagnosis() { return diagnosis_.data(); }
  MPI_Datatype diagnosis_datatype() const { return diagnosis_type_; }
  MPI_Op diagnosis_op() const { return diagnosis_op_; }

  // What the second round found: the least and the greatest call, and a rank
  // that made each (the lowest such rank).
  struct Verdict {
    CollectiveCall least;
    int least_rank = -1;
    CollectiveCall greatest;
    int greatest_rank = -1;
  };
  Verdict verdict() const;

  // The wire layouts, public for the ops and their tests.
  struct Cell {
    // kind - 1 (4 bits), op (2), dtype (3), kInline, kDisagreed, then the
    // count's low 21 bits (inline: the payload's elements).
    std::uint32_t signature = 0;
    // Inline: the payload. Otherwise the count's bits 21 to 52.
    std::array<std::byte, kInlineBytes> rest{};
  };
  static constexpr std::uint32_t kInline = 1u << 9;
  static constexpr std::uint32_t kDisagreed = 1u << 10;
  // inout = combine(in, inout) for one cell: the cell op's body.
  static void combine(const std::byte* in, std::byte* inout);

  struct WireCall {
    std::uint64_t sequence = 0;
    std::int32_t rank = -1;
    EncodedCall call{};
    std::uint8_t unused = 0;
    std::uint32_t unused2 = 0;
  };
  struct Diagnosis {
    WireCall least;
    WireCall greatest;
  };
  // inout = diagnose(in, inout): keeps the least and the greatest call.
  static void diagnose(const std::byte* in, std::byte* inout);

 private:
  alignas(std::uint64_t) std::array<std::byte, sizeof(Cell)> cell_{};
  std::vector<std::byte> diagnosis_;
  MPI_Op cell_op_ = MPI_OP_NULL;
  MPI_Datatype diagnosis_type_ = MPI_DATATYPE_NULL;
  MPI_Op diagnosis_op_ = MPI_OP_NULL;
  int creation_code_ = MPI_SUCCESS;
};

}  // namespace rlx::mpi
