#include "rlx/backends/mpi/call_agreement.h"

#include <cstring>
#include <tuple>

#include "rlx/collectives/reduce.h"

namespace rlx::mpi {
namespace {

using Cell = CallAgreement::Cell;
using WireCall = CallAgreement::WireCall;
using Diagnosis = CallAgreement::Diagnosis;

static_assert(sizeof(Cell) == sizeof(std::uint64_t) && sizeof(WireCall) == 32 &&
                  sizeof(Diagnosis) == 64,
              "the cells' layouts have no padding");

constexpr int kCountLowBits = 21;
constexpr std::uint32_t kCountLowMask = (1u << kCountLowBits) - 1;
constexpr int kCountShift = 32 - kCountLowBits;

// Kinds 1..16 in 4 bits, as kind - 1.
static_assert(static_cast<int>(CollectiveKind::scatter) <= 16);
constexpr std::uint32_t kind_bits(CollectiveKind kind) {
  return static_cast<std::uint32_t>(kind) - 1;
}

std::uint32_t signature_of(const CollectiveCall& call, std::uint64_t elements, bool inline_data) {
  return kind_bits(call.kind) | static_cast<std::uint32_t>(call.op) << 4 |
         static_cast<std::uint32_t>(call.dtype) << 6 | (inline_data ? CallAgreement::kInline : 0) |
         static_cast<std::uint32_t>(elements & kCountLowMask) << kCountShift;
}

// Inline cells carry data in `rest`, which the signature then covers alone.
bool same_call(const Cell& a, const Cell& b) {
  const std::uint32_t ignored = CallAgreement::kDisagreed;
  if ((a.signature & ~ignored) != (b.signature & ~ignored)) return false;
  return (a.signature & CallAgreement::kInline) != 0 || a.rest == b.rest;
}

Dtype dtype_of(const Cell& cell) { return static_cast<Dtype>((cell.signature >> 6) & 7); }
ReduceOp op_of(const Cell& cell) { return static_cast<ReduceOp>((cell.signature >> 4) & 3); }
std::uint32_t kind_of(const Cell& cell) { return cell.signature & 15; }  // kind_bits

// Inline cells only: the payload's elements, within kInlineBytes.
std::size_t inline_elements(const Cell& cell) {
  const std::size_t elements = cell.signature >> kCountShift;
  return elements * size_of(dtype_of(cell)) <= CallAgreement::kInlineBytes ? elements : 0;
}

void merge_payload(const Cell& theirs, Cell& ours) {
  const std::size_t count = inline_elements(ours);
  if (count == 0) return;
  if (kind_of(ours) == kind_bits(CollectiveKind::all_gather)) {
    for (std::size_t i = 0; i < ours.rest.size(); ++i) ours.rest[i] |= theirs.rest[i];
    return;
  }
  const Dtype dtype = dtype_of(ours);
  reduce_into({ours.rest.data(), count, dtype}, ConstElementSpan{theirs.rest.data(), count, dtype},
              op_of(ours));
}

WireCall to_wire(const CollectiveCall& call, int rank) {
  return {.sequence = call.sequence, .rank = rank, .call = encode_call(call)};
}

// Cells come from to_wire on every rank; one that does not decode would be
// MPI's corruption, and reads as the default call rather than throwing
// inside an MPI op.
CollectiveCall from_wire(const WireCall& wire) {
  return decode_call(wire.call, wire.sequence).value_or(CollectiveCall{.sequence = wire.sequence});
}

// Any total order serves: the verdict needs two calls that differ.
auto call_key(const WireCall& c) { return std::tie(c.sequence, c.call); }

// Ties go to the lower rank in both directions, so the result does not
// depend on the order MPI combines the cells in.
const WireCall& least(const WireCall& a, const WireCall& b) {
  if (call_key(a) != call_key(b)) return call_key(a) < call_key(b) ? a : b;
  return a.rank <= b.rank ? a : b;
}

const WireCall& greatest(const WireCall& a, const WireCall& b) {
  if (call_key(a) != call_key(b)) return call_key(a) > call_key(b) ? a : b;
  return a.rank <= b.rank ? a : b;
}

template <void (*Combine)(const std::byte*, std::byte*), std::size_t kBytes>
void combine_each(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* from = static_cast<const std::byte*>(in);
  auto* into = static_cast<std::byte*>(inout);
  for (int i = 0; i < *len; ++i) {
    const auto offset = static_cast<std::size_t>(i) * kBytes;
    Combine(from + offset, into + offset);
  }
}

}  // namespace

CallAgreement::CallAgreement() : diagnosis_(sizeof(Diagnosis)) {
  creation_code_ = MPI_Op_create(combine_each<combine, sizeof(Cell)>, /*commute=*/1, &cell_op_);
  if (creation_code_ == MPI_SUCCESS) {
    creation_code_ =
        MPI_Type_contiguous(static_cast<int>(sizeof(Diagnosis)), MPI_BYTE, &diagnosis_type_);
  }
  if (creation_code_ == MPI_SUCCESS) creation_code_ = MPI_Type_commit(&diagnosis_type_);
  if (creation_code_ == MPI_SUCCESS) {
    creation_code_ =
        MPI_Op_create(combine_each<diagnose, sizeof(Diagnosis)>, /*commute=*/1, &diagnosis_op_);
  }
}

CallAgreement::~CallAgreement() { release(); }

void CallAgreement::release() {
  for (MPI_Op* op : {&cell_op_, &diagnosis_op_}) {
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  }
  if (diagnosis_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&diagnosis_type_);
}

void CallAgreement::combine(const std::byte* in, std::byte* inout) {
  Cell theirs;
  Cell ours;
  std::memcpy(&theirs, in, sizeof(Cell));
  std::memcpy(&ours, inout, sizeof(Cell));
  if (((theirs.signature | ours.signature) & kDisagreed) != 0 || !same_call(theirs, ours)) {
    ours.signature |= kDisagreed;
  } else if ((ours.signature & kInline) != 0) {
    merge_payload(theirs, ours);
  }
  std::memcpy(inout, &ours, sizeof(Cell));
}

std::span<std::byte> CallAgreement::prepare(const CollectiveCall& call,
                                            std::uint64_t inline_elements) {
  const bool inline_data = inline_elements > 0;
  Cell cell;
  cell.signature = signature_of(call, inline_data ? inline_elements : call.count, inline_data);
  if (!inline_data) {
    const auto high = static_cast<std::uint32_t>(call.count >> kCountLowBits);
    std::memcpy(cell.rest.data(), &high, sizeof high);
  }
  std::memcpy(cell_.data(), &cell, sizeof(Cell));
  const std::size_t bytes = inline_data ? inline_elements * size_of(call.dtype) : 0;
  return {cell_.data() + offsetof(Cell, rest), bytes};
}

bool CallAgreement::agreed() const {
  Cell cell;
  std::memcpy(&cell, cell_.data(), sizeof(Cell));
  return (cell.signature & kDisagreed) == 0;
}

void CallAgreement::diagnose(const std::byte* in, std::byte* inout) {
  Diagnosis theirs;
  Diagnosis ours;
  std::memcpy(&theirs, in, sizeof(Diagnosis));
  std::memcpy(&ours, inout, sizeof(Diagnosis));
  const Diagnosis combined{.least = least(theirs.least, ours.least),
                           .greatest = greatest(theirs.greatest, ours.greatest)};
  std::memcpy(inout, &combined, sizeof(Diagnosis));
}

void CallAgreement::prepare_diagnosis(const CollectiveCall& call, int rank) {
  Diagnosis mine;
  mine.least = mine.greatest = to_wire(call, rank);
  std::memcpy(diagnosis_.data(), &mine, sizeof(Diagnosis));
}

CallAgreement::Verdict CallAgreement::verdict() const {
  Diagnosis found;
  std::memcpy(&found, diagnosis_.data(), sizeof(Diagnosis));
  return {.least = from_wire(found.least),
          .least_rank = found.least.rank,
          .greatest = from_wire(found.greatest),
          .greatest_rank = found.greatest.rank};
}

}  // namespace rlx::mpi
