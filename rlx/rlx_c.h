/* rlx from C (C11; no C++ types): the process group, every collective and
 * point-to-point call, and non-blocking requests, as the C++ API has them
 * (rlx/rlx.h, rlx/transport/transport.h).
 *
 *   rlx_group* world = NULL;
 *   if (rlx_init("any", 0, &world) != RLX_OK) {
 *     fprintf(stderr, "%s\n", rlx_last_error());
 *     return 1;
 *   }
 *   float values[4] = {1, 2, 3, 4};
 *   rlx_all_reduce(world, values, 4, RLX_F32, RLX_SUM);
 *   rlx_group_free(world);
 *   rlx_finalize();
 *
 * Every call returns an rlx_status. On failure, rlx_last_error() (per thread)
 * says what happened, naming the rank, the peer, the call and the sizes as
 * the C++ errors do, and rlx_last_error_peer() the rank blamed; a call that
 * succeeds clears both. The failures that end a group (timeout, peer_lost,
 * protocol_violation, mismatch) make every later call on it fail with the
 * same error; other groups go on. Buffers are the caller's: collectives work
 * in place on them and never keep a pointer past the call (non-blocking
 * calls: past the request's completion).
 */
#ifndef RLX_RLX_C_H_
#define RLX_RLX_C_H_

#include <stddef.h>
#include <stdint.h>

#include "rlx/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What librlx_c.so exports (rlx's own symbols stay inside it). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* What a call returns: RLX_OK, or the kind of its failure. */
typedef enum rlx_status {
  RLX_OK = 0,
  RLX_ERR_TIMEOUT = 1,                   /* a deadline passed (RLX_TIMEOUT_S) */
  RLX_ERR_PEER_LOST = 2,                 /* a peer closed, reset or died */
  RLX_ERR_PROTOCOL_VIOLATION = 3,        /* bytes on the wire the protocol does not allow */
  RLX_ERR_MISMATCH = 4,                  /* ranks made different calls, or with different sizes */
  RLX_ERR_INVALID_ARGUMENT = 5,          /* a bad argument or setting */
  RLX_ERR_BACKEND_UNAVAILABLE = 6,       /* the backend was not built or cannot start here */
  RLX_ERR_RESOURCE_EXHAUSTED = 7,        /* a memory or descriptor limit was reached */
  RLX_ERR_INTERNAL = 8,                  /* anything else: a bug in rlx, please report it */
  RLX_STATUS_INT_MIN_ = -2147483647 - 1, /* as rlx_dtype's */
  RLX_STATUS_INT_MAX_ = 2147483647
} rlx_status;

/* Element types, as the C++ rlx::Dtype. RLX_F16 and RLX_BF16 are 16-bit
 * floats (uint16_t storage), reduced in float; RLX_BOOL is one byte (0 or
 * 1), sum and max reduce it as a logical or, prod and min as an and. */
typedef enum rlx_dtype {
  RLX_F32 = 0,
  RLX_F64 = 1,
  RLX_F16 = 2,
  RLX_BF16 = 3,
  RLX_I32 = 4,
  RLX_I64 = 5,
  RLX_U8 = 6,
  RLX_BOOL = 7,
  /* Not types: every int is then a value of the enum to C++ too, so rlx
   * can refuse a wrong one (as Vulkan's *_MAX_ENUM). */
  RLX_DTYPE_INT_MIN_ = -2147483647 - 1,
  RLX_DTYPE_INT_MAX_ = 2147483647
} rlx_dtype;

typedef enum rlx_op {
  RLX_SUM = 0,
  RLX_PROD = 1,
  RLX_MIN = 2,
  RLX_MAX = 3,
  RLX_OP_INT_MIN_ = -2147483647 - 1, /* as rlx_dtype's */
  RLX_OP_INT_MAX_ = 2147483647
} rlx_op;

/* A handle on a group of ranks. Handles are independent: each one from
 * rlx_init or rlx_split is released by rlx_group_free, and the group closes
 * when its last handle (C or C++) goes. One group may be used from several
 * threads as the C++ Transport may (collectives of one group in one order). */
typedef struct rlx_group rlx_group;
/* A non-blocking operation: completed and released by rlx_wait, or by an
 * rlx_test that finds it complete. */
typedef struct rlx_request rlx_request;

/* rlx_split's color for ranks that take part but join no new group. */
#define RLX_NO_COLOR (-1)
/* User tags: 0 to RLX_MAX_TAG. */
#define RLX_MAX_TAG 0xffffffu

/* "0.1.0": the library's version (RLX_VERSION_STRING is the header's). */
const char* rlx_version(void);
/* What the last failed call on this thread said ("" after a success). Valid
 * until this thread's next rlx call. */
const char* rlx_last_error(void);
/* The rank that last failure blames (in the group of the call), or -1. */
int rlx_last_error_peer(void);
/* "ok", "timeout", "peer_lost", ... for a status. */
const char* rlx_status_name(rlx_status status);
/* Element size in bytes, 0 for a value that is not an rlx_dtype. */
size_t rlx_dtype_size(rlx_dtype dtype);

/* *available = 1 when `backend` ("tcp", "mpi", "verbs", "singleton") was
 * built into this library. */
rlx_status rlx_is_available(const char* backend, int* available);
/* Joins the process group, as rlx::init: `backend` "any" (RLX_BACKEND
 * decides), "tcp", "mpi", "verbs" or "singleton"; with no launcher a group
 * of one unless `strict` is non-zero. Later calls give new handles on the
 * same group. */
rlx_status rlx_init(const char* backend, int strict, rlx_group** world);
/* Drops rlx's own hold on the process group (rlx_init's and the array ops'):
 * it closes, its peers told, once the program has freed its handles too.
 * rlx_init fails after it. */
rlx_status rlx_finalize(void);

rlx_status rlx_group_free(rlx_group* group); /* NULL is allowed */
rlx_status rlx_rank(const rlx_group* group, int* rank);
rlx_status rlx_size(const rlx_group* group, int* size);
/* "singleton", "tcp", "mpi" or "verbs"; a static string. */
rlx_status rlx_backend(const rlx_group* group, const char** name);
/* MPI_Comm_split: a call of every rank. Ranks with the same color (0 or
 * more) form a new group ordered by key, then by rank; *out is NULL for
 * RLX_NO_COLOR. */
rlx_status rlx_split(rlx_group* group, int color, int key, rlx_group** out);

/* Point-to-point. A send returns once the message is on its way (it never
 * waits for the receiver). A receive takes the oldest message from `from`
 * with `tag` into `buffer` (up to `capacity` bytes) and sets *received (if
 * not NULL) to its length; a longer message fails with
 * RLX_ERR_INVALID_ARGUMENT and stays queued for the next receive. */
rlx_status rlx_send(rlx_group* group, int to, uint32_t tag, const void* data, size_t bytes);
rlx_status rlx_recv(rlx_group* group, int from, uint32_t tag, void* buffer, size_t capacity,
                    size_t* received);
/* The same for a message of any length, in a buffer rlx allocates: *data
 * (release it with free(); NULL for an empty message) and *bytes. For
 * bindings whose receive returns the message; rlx_recv into a buffer of
 * your own saves the copy. The one case that loses the message: no memory
 * left for that copy (RLX_ERR_RESOURCE_EXHAUSTED, "out of memory"). */
rlx_status rlx_recv_message(rlx_group* group, int from, uint32_t tag, void** data, size_t* bytes);

/* Collectives: every rank calls them in the same order with the same
 * counts, dtype, op and root, else RLX_ERR_MISMATCH on every rank. Counts
 * are elements. */
rlx_status rlx_all_reduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op);
/* `output` holds size x count elements: every rank's `input`, in rank order. */
rlx_status rlx_all_gather(rlx_group* group, const void* input, void* output, size_t count,
                          rlx_dtype dtype);
/* `input` holds size blocks of `count`; `output` gets block rank of the
 * reduction. */
rlx_status rlx_reduce_scatter(rlx_group* group, const void* input, void* output, size_t count,
                              rlx_dtype dtype, rlx_op op);
rlx_status rlx_broadcast(rlx_group* group, void* data, size_t count, rlx_dtype dtype, int root);
/* `input` and `output` hold size blocks of `count`; block j of input goes to
 * rank j. In place when they are the same buffer. */
rlx_status rlx_all_to_all(rlx_group* group, const void* input, void* output, size_t count,
                          rlx_dtype dtype);
/* Rank root's `data` gets the reduction; the others' stays as it was. */
rlx_status rlx_reduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op,
                      int root);
/* Root's `output` (size x count) gets every rank's `input`; elsewhere
 * `output` is not used and may be NULL. */
rlx_status rlx_gather(rlx_group* group, const void* input, void* output, size_t count,
                      rlx_dtype dtype, int root);
/* Rank r's `output` gets block r of root's `input` (size x count); elsewhere
 * `input` is not used and may be NULL. */
rlx_status rlx_scatter(rlx_group* group, const void* input, void* output, size_t count,
                       rlx_dtype dtype, int root);
/* Rank r contributes counts[r] elements (counts has size entries, the same
 * on every rank); `output` gets them all in rank order. */
rlx_status rlx_all_gather_v(rlx_group* group, const void* input, void* output, const size_t* counts,
                            rlx_dtype dtype);
/* `input` holds send_counts[j] elements for rank j; `output` gets
 * recv_counts[i] from rank i (size entries each). */
rlx_status rlx_all_to_all_v(rlx_group* group, const void* input, const size_t* send_counts,
                            void* output, const size_t* recv_counts, rlx_dtype dtype);
rlx_status rlx_barrier(rlx_group* group);

/* Non-blocking forms: the same checks on this thread, then *request says
 * when the operation completed. Buffers (and counts arrays) stay valid and
 * untouched until then. An irecv's length is what rlx_wait gives. */
rlx_status rlx_isend(rlx_group* group, int to, uint32_t tag, const void* data, size_t bytes,
                     rlx_request** request);
rlx_status rlx_irecv(rlx_group* group, int from, uint32_t tag, void* buffer, size_t capacity,
                     rlx_request** request);
rlx_status rlx_iall_reduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op,
                           rlx_request** request);
rlx_status rlx_iall_gather(rlx_group* group, const void* input, void* output, size_t count,
                           rlx_dtype dtype, rlx_request** request);
rlx_status rlx_ireduce_scatter(rlx_group* group, const void* input, void* output, size_t count,
                               rlx_dtype dtype, rlx_op op, rlx_request** request);
rlx_status rlx_ibroadcast(rlx_group* group, void* data, size_t count, rlx_dtype dtype, int root,
                          rlx_request** request);
rlx_status rlx_iall_to_all(rlx_group* group, const void* input, void* output, size_t count,
                           rlx_dtype dtype, rlx_request** request);
rlx_status rlx_ireduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op,
                       int root, rlx_request** request);
rlx_status rlx_igather(rlx_group* group, const void* input, void* output, size_t count,
                       rlx_dtype dtype, int root, rlx_request** request);
rlx_status rlx_iscatter(rlx_group* group, const void* input, void* output, size_t count,
                        rlx_dtype dtype, int root, rlx_request** request);
rlx_status rlx_iall_gather_v(rlx_group* group, const void* input, void* output,
                             const size_t* counts, rlx_dtype dtype, rlx_request** request);
rlx_status rlx_iall_to_all_v(rlx_group* group, const void* input, const size_t* send_counts,
                             void* output, const size_t* recv_counts, rlx_dtype dtype,
                             rlx_request** request);
rlx_status rlx_ibarrier(rlx_group* group, rlx_request** request);

/* Waits for *request (each operation has the group's deadline), releases it
 * and sets *request to NULL, even when it failed; returns its status.
 * *bytes (if not NULL): an irecv's message length, else 0. A NULL *request
 * is a completed one. */
rlx_status rlx_wait(rlx_request** request, size_t* bytes);
/* *done = 1 and as rlx_wait when *request completed, failed or not (its
 * status is the result); else *done = 0, RLX_OK, and it stays. */
rlx_status rlx_test(rlx_request** request, int* done, size_t* bytes);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RLX_RLX_C_H_ */
