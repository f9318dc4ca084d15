/* The C API from a C11 program: every collective and its non-blocking form,
 * point-to-point, split, requests and errors, checked on every rank of a job
 * of any size (rlxrun, mpirun, or none). Prints "rank R of N (backend) ok"
 * and exits 0 when every check passed; else names the first that failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx/rlx_c.h"

static int g_rank = -1;

static void fail(int line, const char* what, rlx_status status) {
  fprintf(stderr, "rank %d: c_api_check.c:%d: %s: %s (%s)\n", g_rank, line, what,
          rlx_status_name(status), rlx_last_error());
  exit(1);
}

/* A call that must succeed. */
#define OK(call)                                           \
  do {                                                     \
    rlx_status status_ = (call);                           \
    if (status_ != RLX_OK) fail(__LINE__, #call, status_); \
  } while (0)

/* A call that must fail with `expected`, its last error containing `text`. */
#define FAILS(expected, text, call)                                                    \
  do {                                                                                 \
    rlx_status status_ = (call);                                                       \
    if (status_ != (expected)) fail(__LINE__, #call " (a different status)", status_); \
    if (strstr(rlx_last_error(), (text)) == NULL) {                                    \
      fail(__LINE__, #call " (its error does not say \"" text "\")", status_);         \
    }                                                                                  \
  } while (0)

#define CHECK(condition)                                                                         \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      fprintf(stderr, "rank %d: c_api_check.c:%d: %s is false\n", g_rank, __LINE__, #condition); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

enum { kMaxRanks = 16 };

static void check_reductions(rlx_group* world, int rank, int size) {
  float f[3];
  int32_t m[2];
  int64_t p[1] = {2};
  double d[1] = {(double)rank};
  uint8_t flags[2] = {(uint8_t)(rank == size - 1), 0};
  for (int i = 0; i < 3; ++i) f[i] = (float)(rank + 1 + i);
  m[0] = rank;
  m[1] = -rank;
  OK(rlx_all_reduce(world, f, 3, RLX_F32, RLX_SUM));
  for (int i = 0; i < 3; ++i) CHECK(f[i] == (float)(size * (size + 1) / 2 + size * i));
  OK(rlx_all_reduce(world, m, 2, RLX_I32, RLX_MAX));
  CHECK(m[0] == size - 1 && m[1] == 0);
  OK(rlx_all_reduce(world, p, 1, RLX_I64, RLX_PROD));
  CHECK(p[0] == ((int64_t)1 << size));
  OK(rlx_all_reduce(world, d, 1, RLX_F64, RLX_MIN));
  CHECK(d[0] == 0.0);
  OK(rlx_all_reduce(world, flags, 2, RLX_BOOL, RLX_SUM));
  CHECK(flags[0] == 1 && flags[1] == 0);

  int32_t value[2] = {rank, 1};
  OK(rlx_reduce(world, value, 2, RLX_I32, RLX_SUM, 0));
  if (rank == 0) CHECK(value[0] == size * (size - 1) / 2 && value[1] == size);
  if (rank != 0) CHECK(value[0] == rank && value[1] == 1);

  float blocks[2 * kMaxRanks], mine[2];
  for (int b = 0; b < size; ++b) blocks[2 * b] = blocks[2 * b + 1] = (float)(rank + 10 * b);
  OK(rlx_reduce_scatter(world, blocks, mine, 2, RLX_F32, RLX_SUM));
  CHECK(mine[0] == (float)(size * (size - 1) / 2 + 10 * rank * size) && mine[1] == mine[0]);
}

static void check_data_movement(rlx_group* world, int rank, int size) {
  int32_t all[2 * kMaxRanks], two[2] = {rank, rank * rank};
  OK(rlx_all_gather(world, two, all, 2, RLX_I32));
  for (int r = 0; r < size; ++r) CHECK(all[2 * r] == r && all[2 * r + 1] == r * r);

  int64_t shared[2] = {rank == size - 1 ? 42 : 0, rank == size - 1 ? -7 : 0};
  OK(rlx_broadcast(world, shared, 2, RLX_I64, size - 1));
  CHECK(shared[0] == 42 && shared[1] == -7);

  int32_t out[kMaxRanks], in[kMaxRanks];
  for (int j = 0; j < size; ++j) in[j] = rank * 100 + j;
  OK(rlx_all_to_all(world, in, out, 1, RLX_I32));
  for (int i = 0; i < size; ++i) CHECK(out[i] == i * 100 + rank);

  int32_t gathered[kMaxRanks];
  OK(rlx_gather(world, &rank, rank == 0 ? gathered : NULL, 1, RLX_I32, 0));
  if (rank == 0) {
    for (int r = 0; r < size; ++r) CHECK(gathered[r] == r);
  }
  int32_t shares[kMaxRanks], share = -1;
  for (int r = 0; r < size; ++r) shares[r] = 1000 + r;
  OK(rlx_scatter(world, rank == 0 ? shares : NULL, &share, 1, RLX_I32, 0));
  CHECK(share == 1000 + rank);

  /* Rank r contributes r + 1 elements of value r. */
  size_t counts[kMaxRanks];
  int32_t contribution[kMaxRanks], uneven[kMaxRanks * (kMaxRanks + 1) / 2];
  for (int r = 0; r < size; ++r) counts[r] = (size_t)r + 1;
  for (int i = 0; i <= rank; ++i) contribution[i] = rank;
  OK(rlx_all_gather_v(world, contribution, uneven, counts, RLX_I32));
  for (int r = 0, at = 0; r < size; ++r) {
    for (int i = 0; i <= r; ++i) CHECK(uneven[at++] == r);
  }

  /* Rank i sends j + 1 elements of value 10 i + j to rank j. */
  size_t sends[kMaxRanks], receives[kMaxRanks];
  int32_t outgoing[kMaxRanks * (kMaxRanks + 1) / 2], incoming[kMaxRanks * kMaxRanks];
  int at = 0;
  for (int j = 0; j < size; ++j) {
    sends[j] = (size_t)j + 1;
    receives[j] = (size_t)rank + 1;
    for (int k = 0; k <= j; ++k) outgoing[at++] = 10 * rank + j;
  }
  OK(rlx_all_to_all_v(world, outgoing, sends, incoming, receives, RLX_I32));
  for (int i = 0, got = 0; i < size; ++i) {
    for (int k = 0; k <= rank; ++k) CHECK(incoming[got++] == 10 * i + rank);
  }
  OK(rlx_barrier(world));
}

static void check_point_to_point(rlx_group* world, int rank, int size) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int32_t message[3] = {rank, 2 * rank, 3 * rank}, got[3] = {0, 0, 0};
  size_t received = 0;
  OK(rlx_send(world, right, 7, message, sizeof message));
  /* Too small: refused, and the message waits for a receive that fits. */
  FAILS(RLX_ERR_INVALID_ARGUMENT, "longer than the buffer",
        rlx_recv(world, left, 7, got, sizeof got[0], &received));
  OK(rlx_recv(world, left, 7, got, sizeof got, &received));
  CHECK(received == sizeof got && got[0] == left && got[2] == 3 * left);

  /* A message of any length, in a buffer rlx allocates; an empty one is NULL. */
  void* whole = NULL;
  size_t length = 0;
  OK(rlx_send(world, right, 8, message, sizeof message));
  OK(rlx_send(world, right, 8, NULL, 0));
  OK(rlx_recv_message(world, left, 8, &whole, &length));
  CHECK(whole != NULL && length == sizeof message && ((const int32_t*)whole)[1] == 2 * left);
  free(whole);
  OK(rlx_recv_message(world, left, 8, &whole, &length));
  CHECK(whole == NULL && length == 0);

  /* A request that fails is complete: rlx_test says done and releases it;
   * the message that did not fit stays queued. */
  {
    int32_t pair[2] = {0, 0};
    rlx_request* narrow = NULL;
    int done = 0;
    rlx_status status = RLX_OK;
    OK(rlx_send(world, right, 12, message, sizeof message));
    OK(rlx_irecv(world, left, 12, pair, sizeof pair, &narrow));
    while (status == RLX_OK && !done) status = rlx_test(&narrow, &done, NULL);
    CHECK(status == RLX_ERR_INVALID_ARGUMENT && done == 1 && narrow == NULL);
    OK(rlx_recv(world, left, 12, got, sizeof got, &received));
    CHECK(received == sizeof got && got[1] == 2 * left);
  }

  /* Receives posted before their sends; a large send runs in the background. */
  enum { kLarge = 100 * 1024 };
  unsigned char* outbound = malloc(kLarge);
  unsigned char* inbound = calloc(kLarge, 1);
  CHECK(outbound != NULL && inbound != NULL);
  for (int i = 0; i < kLarge; ++i) outbound[i] = (unsigned char)(i * 7 + rank);
  rlx_request *receive = NULL, *send = NULL;
  OK(rlx_irecv(world, left, 9, inbound, kLarge, &receive));
  OK(rlx_isend(world, right, 9, outbound, kLarge, &send));
  OK(rlx_wait(&send, NULL));
  OK(rlx_wait(&receive, &received));
  CHECK(send == NULL && receive == NULL && received == kLarge);
  for (int i = 0; i < kLarge; ++i) CHECK(inbound[i] == (unsigned char)(i * 7 + left));
  free(outbound);
  free(inbound);
}

static void check_requests(rlx_group* world, int rank, int size) {
  float sum[2] = {1, (float)rank};
  int32_t mine = rank, everyone[kMaxRanks];
  rlx_request *reduce = NULL, *gather = NULL, *barrier = NULL;
  OK(rlx_iall_reduce(world, sum, 2, RLX_F32, RLX_SUM, &reduce));
  OK(rlx_iall_gather(world, &mine, everyone, 1, RLX_I32, &gather));
  OK(rlx_wait(&reduce, NULL));
  OK(rlx_wait(&gather, NULL));
  CHECK(sum[0] == (float)size && sum[1] == (float)(size * (size - 1) / 2));
  for (int r = 0; r < size; ++r) CHECK(everyone[r] == r);

  OK(rlx_ibarrier(world, &barrier));
  int done = 0;
  while (!done) OK(rlx_test(&barrier, &done, NULL));
  CHECK(barrier == NULL);
  /* A completed (NULL) request waits for nothing. */
  OK(rlx_wait(&barrier, NULL));

  int64_t root_data[1] = {rank == 0 ? 5 : 0};
  rlx_request* cast = NULL;
  OK(rlx_ibroadcast(world, root_data, 1, RLX_I64, 0, &cast));
  OK(rlx_wait(&cast, NULL));
  CHECK(root_data[0] == 5);
}

static void check_split(rlx_group* world, int rank, int size) {
  /* Odd and even ranks, each in descending order of world rank. */
  rlx_group* half = NULL;
  int half_rank = -1, half_size = -1;
  OK(rlx_split(world, rank % 2, -rank, &half));
  CHECK(half != NULL);
  OK(rlx_rank(half, &half_rank));
  OK(rlx_size(half, &half_size));
  CHECK(half_size == (size - rank % 2 + 1) / 2);
  CHECK(half_rank == (size - 1 - rank) / 2);
  int32_t total = rank;
  OK(rlx_all_reduce(half, &total, 1, RLX_I32, RLX_SUM));
  int32_t expected = 0;
  for (int r = rank % 2; r < size; r += 2) expected += r;
  CHECK(total == expected);
  OK(rlx_group_free(half));

  rlx_group* rest = NULL;
  OK(rlx_split(world, rank == 0 ? RLX_NO_COLOR : 0, 0, &rest));
  CHECK((rank == 0) == (rest == NULL));
  if (rest != NULL) OK(rlx_barrier(rest));
  OK(rlx_group_free(rest));
}

static void check_bad_calls(rlx_group* world, int size) {
  float one = 1;
  int ignored = 0;
  FAILS(RLX_ERR_INVALID_ARGUMENT, "rlx_all_reduce: the group is NULL",
        rlx_all_reduce(NULL, &one, 1, RLX_F32, RLX_SUM));
  CHECK(rlx_last_error_peer() == -1);
  FAILS(RLX_ERR_INVALID_ARGUMENT, "dtype value 42",
        rlx_all_reduce(world, &one, 1, (rlx_dtype)42, RLX_SUM));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "reduce op value 9 is not an rlx_op",
        rlx_all_reduce(world, &one, 1, RLX_F32, (rlx_op)9));
  /* Not cut to 8 bits on the way: 256 is no f32, 259 no max. */
  FAILS(RLX_ERR_INVALID_ARGUMENT, "dtype value 256 is not an rlx_dtype",
        rlx_all_reduce(world, &one, 1, (rlx_dtype)256, RLX_SUM));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "reduce op value 259",
        rlx_all_reduce(world, &one, 1, RLX_F32, (rlx_op)259));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "dtype value -1 is not an rlx_dtype",
        rlx_all_reduce(world, &one, 1, (rlx_dtype)-1, RLX_SUM));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "reduce op value -2147483648",
        rlx_all_reduce(world, &one, 1, RLX_F32, RLX_OP_INT_MIN_));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "the buffer is null",
        rlx_all_reduce(world, NULL, 1, RLX_F32, RLX_SUM));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "broadcast", rlx_broadcast(world, &one, 1, RLX_F32, size));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "send_bytes", rlx_send(world, size, 0, &one, sizeof one));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "above the largest user tag",
        rlx_send(world, 0, RLX_MAX_TAG + 1, &one, sizeof one));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "the result pointer is NULL", rlx_rank(world, NULL));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "unknown backend 'nccl'", rlx_is_available("nccl", &ignored));
  FAILS(RLX_ERR_INVALID_ARGUMENT, "rlx_wait: the request pointer is NULL", rlx_wait(NULL, NULL));
  /* A success clears the last error. */
  OK(rlx_size(world, &ignored));
  CHECK(rlx_last_error()[0] == '\0');
  CHECK(strcmp(rlx_status_name(RLX_ERR_MISMATCH), "mismatch") == 0);
  CHECK(strcmp(rlx_status_name((rlx_status)99), "not an rlx_status") == 0);
  CHECK(rlx_dtype_size(RLX_BF16) == 2 && rlx_dtype_size((rlx_dtype)8) == 0 &&
        rlx_dtype_size((rlx_dtype)256) == 0 && rlx_dtype_size((rlx_dtype)-1) == 0);
}

/* Ranks that call different collectives all fail naming the call; the group
 * they failed on stays failed, the world goes on. */
static void check_mismatch(rlx_group* world, int rank) {
  rlx_group* copy = NULL;
  OK(rlx_split(world, 0, 0, &copy));
  /* Every rank has its handle before any fails the group (a rank still
   * setting it up would fail its split with the relayed mismatch). */
  OK(rlx_barrier(world));
  float values[5] = {0, 0, 0, 0, 0};
  FAILS(RLX_ERR_MISMATCH, "all_reduce",
        rlx_all_reduce(copy, values, rank == 0 ? 4 : 5, RLX_F32, RLX_SUM));
  CHECK(rlx_barrier(copy) != RLX_OK);
  OK(rlx_group_free(copy));
  OK(rlx_barrier(world));
}

int main(void) {
  int available = 0;
  CHECK(strcmp(rlx_version(), RLX_VERSION_STRING) == 0);
  OK(rlx_is_available("tcp", &available));
  CHECK(available == 1);

  rlx_group* world = NULL;
  int rank = -1, size = -1;
  const char* backend = NULL;
  OK(rlx_init("any", 0, &world));
  OK(rlx_rank(world, &rank));
  OK(rlx_size(world, &size));
  OK(rlx_backend(world, &backend));
  g_rank = rank;
  CHECK(size >= 1 && size <= kMaxRanks && rank >= 0 && rank < size);

  check_reductions(world, rank, size);
  check_data_movement(world, rank, size);
  check_point_to_point(world, rank, size);
  check_requests(world, rank, size);
  check_split(world, rank, size);
  check_bad_calls(world, size);
  if (size > 1) check_mismatch(world, rank);

  OK(rlx_group_free(world));
  OK(rlx_finalize());
  rlx_group* again = NULL;
  FAILS(RLX_ERR_INVALID_ARGUMENT, "finalize", rlx_init("any", 0, &again));
  CHECK(again == NULL);
  printf("rank %d of %d (%s) ok\n", rank, size, backend);
  return 0;
}
