//! rlx from Rust: a safe [`Group`] over rlx's C API (`rlx/rlx_c.h`, linked
//! from `librlx_c.so`).
//!
//! ```no_run
//! let world = rlx::Group::init("any", false)?; // the launcher's group, or a group of one
//! let mut grad = vec![1.0f32; 1024];
//! world.all_sum(&mut grad)?;                    // in place, across every rank
//! world.send_bytes((world.rank() + 1) % world.size(), 7, b"hello")?;
//! # Ok::<(), rlx::Error>(())
//! ```
//!
//! Every call returns a [`Result`] whose [`Error`] carries the kind
//! ([`ErrorKind`]), the message rlx wrote (naming the rank, the call, the
//! sizes and the peer) and the rank it blames. Non-blocking calls take their
//! buffer by value and give it back from [`Request::wait`], so no borrow can
//! end while rlx still writes into it.

mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::ptr;

/// What went wrong, as rlx's `ErrorKind` (the C API's `rlx_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A deadline passed (`RLX_TIMEOUT_S`).
    Timeout,
    /// A peer closed, reset or died.
    PeerLost,
    /// Bytes on the wire that the protocol does not allow.
    ProtocolViolation,
    /// Ranks made different calls, or with different sizes.
    Mismatch,
    /// A bad argument or setting: the group is still usable.
    InvalidArgument,
    /// The backend was not built or cannot start here.
    BackendUnavailable,
    /// A memory or descriptor limit was reached.
    ResourceExhausted,
    /// Anything else: a bug in rlx.
    Internal,
}

/// An rlx failure: its kind, rlx's message, and the rank it blames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub peer: Option<i32>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn kind_of(status: sys::rlx_status) -> ErrorKind {
    match status {
        1 => ErrorKind::Timeout,
        2 => ErrorKind::PeerLost,
        3 => ErrorKind::ProtocolViolation,
        4 => ErrorKind::Mismatch,
        5 => ErrorKind::InvalidArgument,
        6 => ErrorKind::BackendUnavailable,
        7 => ErrorKind::ResourceExhausted,
        _ => ErrorKind::Internal,
    }
}

// The status of a C call, with this thread's last error when it failed.
fn check(status: sys::rlx_status) -> Result<()> {
    if status == sys::RLX_OK {
        return Ok(());
    }
    // SAFETY: rlx_last_error returns a NUL-terminated string valid until this
    // thread's next rlx call; it is copied at once.
    let message = unsafe { CStr::from_ptr(sys::rlx_last_error()) }
        .to_string_lossy()
        .into_owned();
    let peer = unsafe { sys::rlx_last_error_peer() };
    Err(Error {
        kind: kind_of(status),
        message,
        peer: (peer >= 0).then_some(peer),
    })
}

fn invalid(message: String) -> Error {
    Error {
        kind: ErrorKind::InvalidArgument,
        message,
        peer: None,
    }
}

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Sum = 0,
    Prod = 1,
    Min = 2,
    Max = 3,
}

/// The element types rlx reduces and moves, with their `rlx_dtype`. rlx's
/// 16-bit floats have no stable Rust type (move them with the byte calls),
/// and its bool is `u8` here (see below).
///
/// # Safety
/// `DTYPE` must describe `Self`'s size, and every bit pattern must be a
/// valid `Self`: rlx writes what other ranks (perhaps not in Rust) sent.
pub unsafe trait Element: Copy + 'static {
    const DTYPE: c_int;
}
unsafe impl Element for f32 {
    const DTYPE: c_int = 0;
}
unsafe impl Element for f64 {
    const DTYPE: c_int = 1;
}
unsafe impl Element for i32 {
    const DTYPE: c_int = 4;
}
unsafe impl Element for i64 {
    const DTYPE: c_int = 5;
}
unsafe impl Element for u8 {
    const DTYPE: c_int = 6;
}
// No bool: rlx moves bytes as they are, so a peer's byte 2 would arrive in
// a Rust bool, which may only hold 0 or 1. Use u8.

/// A group of ranks: what [`Group::init`] and [`Group::split`] give. Dropping
/// it releases this handle; the group closes when its last handle goes.
/// Collectives of one group must come from one thread at a time (another
/// thread's is refused with [`ErrorKind::InvalidArgument`]).
pub struct Group {
    raw: *mut sys::rlx_group,
    rank: i32,
    size: i32,
}

// SAFETY: the C++ group behind the handle is safe to call from any thread.
unsafe impl Send for Group {}
unsafe impl Sync for Group {}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("backend", &self.backend())
            .finish()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: raw came from rlx_init or rlx_split and is freed once.
        unsafe { sys::rlx_group_free(self.raw) };
    }
}

impl Group {
    /// Joins the process group: `backend` "any" (`RLX_BACKEND` decides),
    /// "tcp", "mpi", "verbs" or "singleton"; with no launcher a group of one
    /// unless `strict`. Later calls give new handles on the same group.
    pub fn init(backend: &str, strict: bool) -> Result<Group> {
        let name = CString::new(backend)
            .map_err(|_| invalid(format!("the backend name {backend:?} holds a NUL byte")))?;
        let mut raw = ptr::null_mut();
        // SAFETY: name is NUL-terminated; raw receives a new handle.
        check(unsafe { sys::rlx_init(name.as_ptr(), strict as c_int, &mut raw) })?;
        Group::from_raw(raw)
    }

    fn from_raw(raw: *mut sys::rlx_group) -> Result<Group> {
        let mut group = Group {
            raw,
            rank: -1,
            size: -1,
        };
        // SAFETY: raw is a live handle; the results go to local integers.
        check(unsafe { sys::rlx_rank(raw, &mut group.rank) })?;
        check(unsafe { sys::rlx_size(raw, &mut group.size) })?;
        Ok(group)
    }

    /// This process's rank in the group, 0 to size() - 1.
    pub fn rank(&self) -> i32 {
        self.rank
    }
    pub fn size(&self) -> i32 {
        self.size
    }
    /// "singleton", "tcp", "mpi" or "verbs".
    pub fn backend(&self) -> &'static str {
        let mut name = ptr::null();
        // SAFETY: rlx_backend returns a static string.
        match check(unsafe { sys::rlx_backend(self.raw, &mut name) }) {
            Ok(()) => unsafe { CStr::from_ptr(name) }
                .to_str()
                .unwrap_or("unknown"),
            Err(_) => "unknown",
        }
    }

    /// MPI_Comm_split: a call of every rank. Ranks with the same `color`
    /// (0 or more) form a new group, ordered by `key`, then by rank here;
    /// `None` for a color of `None` (the rank takes part, joins no group).
    pub fn split(&self, color: Option<i32>, key: i32) -> Result<Option<Group>> {
        let color = match color {
            Some(c) if c < 0 => return Err(invalid(format!("split: color {c} is negative"))),
            Some(c) => c,
            None => sys::RLX_NO_COLOR,
        };
        let mut raw = ptr::null_mut();
        // SAFETY: self.raw is live; raw receives a new handle or NULL.
        check(unsafe { sys::rlx_split(self.raw, color, key, &mut raw) })?;
        if raw.is_null() {
            Ok(None)
        } else {
            Group::from_raw(raw).map(Some)
        }
    }

    // Elements of `buffer` a block per rank: `blocks` of `count` each.
    fn blocks_of<T>(&self, call: &str, what: &str, buffer: &[T], count: usize) -> Result<()> {
        let wanted = count.checked_mul(self.size as usize);
        if wanted != Some(buffer.len()) {
            return Err(invalid(format!(
                "{call}: {what} holds {} elements, not {} blocks of {count}",
                buffer.len(),
                self.size
            )));
        }
        Ok(())
    }

    /// Reduces `data` elementwise across ranks, in place.
    pub fn all_reduce<T: Element>(&self, data: &mut [T], op: Op) -> Result<()> {
        // SAFETY: data is valid for data.len() elements of T's dtype.
        check(unsafe {
            sys::rlx_all_reduce(
                self.raw,
                data.as_mut_ptr().cast(),
                data.len(),
                T::DTYPE,
                op as c_int,
            )
        })
    }
    pub fn all_sum<T: Element>(&self, data: &mut [T]) -> Result<()> {
        self.all_reduce(data, Op::Sum)
    }

    /// Every rank's `input` in rank order: `output` holds size() x input.len().
    pub fn all_gather<T: Element>(&self, input: &[T], output: &mut [T]) -> Result<()> {
        self.blocks_of("all_gather", "output", output, input.len())?;
        // SAFETY: lengths checked: output holds size x input.len() elements.
        check(unsafe {
            sys::rlx_all_gather(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                input.len(),
                T::DTYPE,
            )
        })
    }

    /// Block rank() of the reduction of every rank's `input` (size() blocks of
    /// output.len()) into `output`.
    pub fn reduce_scatter<T: Element>(&self, input: &[T], output: &mut [T], op: Op) -> Result<()> {
        self.blocks_of("reduce_scatter", "input", input, output.len())?;
        // SAFETY: lengths checked: input holds size x output.len() elements.
        check(unsafe {
            sys::rlx_reduce_scatter(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                output.len(),
                T::DTYPE,
                op as c_int,
            )
        })
    }

    /// Rank `root`'s `data` into every rank's `data`.
    pub fn broadcast<T: Element>(&self, data: &mut [T], root: i32) -> Result<()> {
        // SAFETY: data is valid for data.len() elements.
        check(unsafe {
            sys::rlx_broadcast(
                self.raw,
                data.as_mut_ptr().cast(),
                data.len(),
                T::DTYPE,
                root,
            )
        })
    }

    /// Block j of `input` to rank j; block i of `output` from rank i (both
    /// size() equal blocks).
    pub fn all_to_all<T: Element>(&self, input: &[T], output: &mut [T]) -> Result<()> {
        let count = input.len() / self.size as usize;
        self.blocks_of("all_to_all", "input", input, count)?;
        self.blocks_of("all_to_all", "output", output, count)?;
        // SAFETY: lengths checked: both hold size x count elements.
        check(unsafe {
            sys::rlx_all_to_all(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                count,
                T::DTYPE,
            )
        })
    }

    /// Rank `root`'s `data` gets the reduction; the others' stays as it was.
    pub fn reduce<T: Element>(&self, data: &mut [T], op: Op, root: i32) -> Result<()> {
        // SAFETY: data is valid for data.len() elements.
        check(unsafe {
            sys::rlx_reduce(
                self.raw,
                data.as_mut_ptr().cast(),
                data.len(),
                T::DTYPE,
                op as c_int,
                root,
            )
        })
    }

    /// Every rank's `input` into the root's `output` (size() x input.len());
    /// the other ranks pass `None`.
    pub fn gather<T: Element>(
        &self,
        input: &[T],
        output: Option<&mut [T]>,
        root: i32,
    ) -> Result<()> {
        let out = match output {
            Some(out) => {
                self.blocks_of("gather", "output", out, input.len())?;
                out.as_mut_ptr().cast()
            }
            None => ptr::null_mut(),
        };
        // SAFETY: a non-null output holds size x input.len() elements.
        check(unsafe {
            sys::rlx_gather(
                self.raw,
                input.as_ptr().cast(),
                out,
                input.len(),
                T::DTYPE,
                root,
            )
        })
    }

    /// Block r of the root's `input` (size() x output.len()) into rank r's
    /// `output`; the other ranks pass `None`.
    pub fn scatter<T: Element>(
        &self,
        input: Option<&[T]>,
        output: &mut [T],
        root: i32,
    ) -> Result<()> {
        let from = match input {
            Some(input) => {
                self.blocks_of("scatter", "input", input, output.len())?;
                input.as_ptr().cast()
            }
            None => ptr::null(),
        };
        // SAFETY: a non-null input holds size x output.len() elements.
        check(unsafe {
            sys::rlx_scatter(
                self.raw,
                from,
                output.as_mut_ptr().cast(),
                output.len(),
                T::DTYPE,
                root,
            )
        })
    }

    // `counts` has a count per rank, and their sum (None when it overflows).
    fn sum_of_counts(&self, call: &str, what: &str, counts: &[usize]) -> Result<Option<usize>> {
        if counts.len() != self.size as usize {
            return Err(invalid(format!(
                "{call}: {what} has {} counts for {} ranks",
                counts.len(),
                self.size
            )));
        }
        Ok(counts.iter().try_fold(0usize, |sum, &c| sum.checked_add(c)))
    }

    // all_gather_v's lengths against its counts.
    fn check_gather_v<T>(
        &self,
        call: &str,
        input: &[T],
        output: &[T],
        counts: &[usize],
    ) -> Result<()> {
        let total = self.sum_of_counts(call, "counts", counts)?;
        if counts[self.rank as usize] != input.len() || total != Some(output.len()) {
            return Err(invalid(format!(
                "{call}: input holds {} and output {} elements, counts say {} and {:?}",
                input.len(),
                output.len(),
                counts[self.rank as usize],
                total
            )));
        }
        Ok(())
    }

    // all_to_all_v's lengths against its counts.
    fn check_all_to_all_v<T>(
        &self,
        call: &str,
        input: &[T],
        send_counts: &[usize],
        output: &[T],
        recv_counts: &[usize],
    ) -> Result<()> {
        let sent = self.sum_of_counts(call, "send_counts", send_counts)?;
        let received = self.sum_of_counts(call, "recv_counts", recv_counts)?;
        if sent != Some(input.len()) || received != Some(output.len()) {
            return Err(invalid(format!(
                "{call}: input holds {} and output {} elements, the counts sum to {:?} and {:?}",
                input.len(),
                output.len(),
                sent,
                received
            )));
        }
        Ok(())
    }

    /// Uneven all_gather: rank r contributes counts[r] elements (this rank's
    /// `input`); `output` gets them all in rank order (the sum of counts).
    pub fn all_gather_v<T: Element>(
        &self,
        input: &[T],
        output: &mut [T],
        counts: &[usize],
    ) -> Result<()> {
        self.check_gather_v("all_gather_v", input, output, counts)?;
        // SAFETY: lengths checked against counts, which has size entries.
        check(unsafe {
            sys::rlx_all_gather_v(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                counts.as_ptr(),
                T::DTYPE,
            )
        })
    }

    /// Uneven all-to-all: `input` holds send_counts[j] elements for rank j,
    /// `output` gets recv_counts[i] from rank i, in rank order.
    pub fn all_to_all_v<T: Element>(
        &self,
        input: &[T],
        send_counts: &[usize],
        output: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        self.check_all_to_all_v("all_to_all_v", input, send_counts, output, recv_counts)?;
        // SAFETY: lengths checked against the counts, which have size entries.
        check(unsafe {
            sys::rlx_all_to_all_v(
                self.raw,
                input.as_ptr().cast(),
                send_counts.as_ptr(),
                output.as_mut_ptr().cast(),
                recv_counts.as_ptr(),
                T::DTYPE,
            )
        })
    }

    /// Returns once every rank has entered the barrier.
    pub fn barrier(&self) -> Result<()> {
        // SAFETY: self.raw is live.
        check(unsafe { sys::rlx_barrier(self.raw) })
    }

    /// Sends `data` to rank `to`; returns once it is on its way (never waits
    /// for the receiver). Tags 0 to 2^24 - 1.
    pub fn send_bytes(&self, to: i32, tag: u32, data: &[u8]) -> Result<()> {
        // SAFETY: data is valid for data.len() bytes.
        check(unsafe { sys::rlx_send(self.raw, to, tag, data.as_ptr().cast(), data.len()) })
    }

    /// The oldest message from rank `from` with `tag`, of any length.
    pub fn recv_bytes(&self, from: i32, tag: u32) -> Result<Vec<u8>> {
        let mut data: *mut c_void = ptr::null_mut();
        let mut length = 0usize;
        // SAFETY: on success data is a malloc'd buffer of length bytes (or NULL).
        check(unsafe { sys::rlx_recv_message(self.raw, from, tag, &mut data, &mut length) })?;
        if data.is_null() {
            return Ok(Vec::new());
        }
        let message = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length) }.to_vec();
        unsafe { libc_free(data) };
        Ok(message)
    }

    /// The same into `buffer`: its length. A longer message fails with
    /// [`ErrorKind::InvalidArgument`] and stays queued for the next receive.
    pub fn recv_bytes_into(&self, from: i32, tag: u32, buffer: &mut [u8]) -> Result<usize> {
        let mut received = 0usize;
        // SAFETY: buffer is valid for buffer.len() bytes.
        check(unsafe {
            sys::rlx_recv(
                self.raw,
                from,
                tag,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut received,
            )
        })?;
        Ok(received)
    }

    /// Non-blocking send: `data` comes back from [`Request::wait`].
    pub fn isend(&self, to: i32, tag: u32, data: Vec<u8>) -> Result<Request<Vec<u8>>> {
        let mut raw = ptr::null_mut();
        // SAFETY: the Request owns data until the operation completed.
        check(unsafe {
            sys::rlx_isend(
                self.raw,
                to,
                tag,
                data.as_ptr().cast(),
                data.len(),
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, data))
    }

    /// Non-blocking receive into `buffer`, which comes back from
    /// [`Request::wait`] with the message's length.
    pub fn irecv(&self, from: i32, tag: u32, mut buffer: Vec<u8>) -> Result<Request<Vec<u8>>> {
        let mut raw = ptr::null_mut();
        // SAFETY: the Request owns buffer until the operation completed.
        check(unsafe {
            sys::rlx_irecv(
                self.raw,
                from,
                tag,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, buffer))
    }

    /// Non-blocking all-reduce of `data`, which comes back reduced from
    /// [`Request::wait`].
    pub fn iall_reduce<T: Element>(&self, mut data: Vec<T>, op: Op) -> Result<Request<Vec<T>>> {
        let mut raw = ptr::null_mut();
        // SAFETY: the Request owns data until the operation completed.
        check(unsafe {
            sys::rlx_iall_reduce(
                self.raw,
                data.as_mut_ptr().cast(),
                data.len(),
                T::DTYPE,
                op as c_int,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, data))
    }
}

impl Group {
    /// Non-blocking broadcast of rank `root`'s `data`, which comes back
    /// from [`Request::wait`].
    pub fn ibroadcast<T: Element>(&self, mut data: Vec<T>, root: i32) -> Result<Request<Vec<T>>> {
        let mut raw = ptr::null_mut();
        // SAFETY: the Request owns data until the operation completed.
        check(unsafe {
            sys::rlx_ibroadcast(
                self.raw,
                data.as_mut_ptr().cast(),
                data.len(),
                T::DTYPE,
                root,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, data))
    }

    /// Non-blocking all_gather: `output` (size() x input.len()) comes back
    /// from [`Request::wait`] with every rank's `input`, and `input` with it.
    pub fn iall_gather<T: Element>(
        &self,
        input: Vec<T>,
        mut output: Vec<T>,
    ) -> Result<Request<(Vec<T>, Vec<T>)>> {
        self.blocks_of("iall_gather", "output", &output, input.len())?;
        let mut raw = ptr::null_mut();
        // SAFETY: lengths checked; the Request owns both until it completed.
        check(unsafe {
            sys::rlx_iall_gather(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                input.len(),
                T::DTYPE,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, output)))
    }

    /// Non-blocking reduce_scatter: `output` comes back holding block rank()
    /// of the reduction of every rank's `input` (size() x output.len()).
    pub fn ireduce_scatter<T: Element>(
        &self,
        input: Vec<T>,
        mut output: Vec<T>,
        op: Op,
    ) -> Result<Request<(Vec<T>, Vec<T>)>> {
        self.blocks_of("ireduce_scatter", "input", &input, output.len())?;
        let mut raw = ptr::null_mut();
        // SAFETY: lengths checked; the Request owns both until it completed.
        check(unsafe {
            sys::rlx_ireduce_scatter(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                output.len(),
                T::DTYPE,
                op as c_int,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, output)))
    }

    /// Non-blocking all_to_all of size() blocks each way.
    pub fn iall_to_all<T: Element>(
        &self,
        input: Vec<T>,
        mut output: Vec<T>,
    ) -> Result<Request<(Vec<T>, Vec<T>)>> {
        let size = self.size as usize;
        if input.len() != output.len() || input.len() % size != 0 {
            return Err(invalid(format!(
                "iall_to_all: input holds {} and output {} elements, not {size} equal blocks each",
                input.len(),
                output.len()
            )));
        }
        let mut raw = ptr::null_mut();
        // SAFETY: lengths checked; the Request owns both until it completed.
        check(unsafe {
            sys::rlx_iall_to_all(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                input.len() / size,
                T::DTYPE,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, output)))
    }

    /// Non-blocking reduce into rank `root`'s `data`.
    pub fn ireduce<T: Element>(
        &self,
        mut data: Vec<T>,
        op: Op,
        root: i32,
    ) -> Result<Request<Vec<T>>> {
        let mut raw = ptr::null_mut();
        // SAFETY: the Request owns data until the operation completed.
        check(unsafe {
            sys::rlx_ireduce(
                self.raw,
                data.as_mut_ptr().cast(),
                data.len(),
                T::DTYPE,
                op as c_int,
                root,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, data))
    }

    /// Non-blocking gather into the root's `output` (size() x input.len());
    /// the other ranks pass `None`.
    pub fn igather<T: Element>(
        &self,
        input: Vec<T>,
        mut output: Option<Vec<T>>,
        root: i32,
    ) -> Result<Request<(Vec<T>, Option<Vec<T>>)>> {
        let out = match output.as_mut() {
            Some(out) => {
                self.blocks_of("igather", "output", out, input.len())?;
                out.as_mut_ptr().cast()
            }
            None => ptr::null_mut(),
        };
        let mut raw = ptr::null_mut();
        // SAFETY: a non-null output holds size x input.len() elements; the
        // Request owns both until it completed.
        check(unsafe {
            sys::rlx_igather(
                self.raw,
                input.as_ptr().cast(),
                out,
                input.len(),
                T::DTYPE,
                root,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, output)))
    }

    /// Non-blocking scatter of the root's `input` (size() x output.len());
    /// the other ranks pass `None`.
    pub fn iscatter<T: Element>(
        &self,
        input: Option<Vec<T>>,
        mut output: Vec<T>,
        root: i32,
    ) -> Result<Request<(Option<Vec<T>>, Vec<T>)>> {
        let from = match input.as_ref() {
            Some(input) => {
                self.blocks_of("iscatter", "input", input, output.len())?;
                input.as_ptr().cast()
            }
            None => ptr::null(),
        };
        let mut raw = ptr::null_mut();
        // SAFETY: a non-null input holds size x output.len() elements; the
        // Request owns both until it completed.
        check(unsafe {
            sys::rlx_iscatter(
                self.raw,
                from,
                output.as_mut_ptr().cast(),
                output.len(),
                T::DTYPE,
                root,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, output)))
    }

    /// Non-blocking all_gather_v: `output` comes back from [`Request::wait`]
    /// with every rank's part in rank order; `input` and `counts` with it.
    pub fn iall_gather_v<T: Element>(
        &self,
        input: Vec<T>,
        mut output: Vec<T>,
        counts: Vec<usize>,
    ) -> Result<Request<(Vec<T>, Vec<T>, Vec<usize>)>> {
        self.check_gather_v("iall_gather_v", &input, &output, &counts)?;
        let mut raw = ptr::null_mut();
        // SAFETY: lengths checked against counts (size entries); the Request
        // owns the buffers and the counts until it completed.
        check(unsafe {
            sys::rlx_iall_gather_v(
                self.raw,
                input.as_ptr().cast(),
                output.as_mut_ptr().cast(),
                counts.as_ptr(),
                T::DTYPE,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, output, counts)))
    }

    /// Non-blocking all_to_all_v: `output` comes back from [`Request::wait`]
    /// with recv_counts[i] elements from rank i; the rest with it.
    #[allow(clippy::type_complexity)]
    pub fn iall_to_all_v<T: Element>(
        &self,
        input: Vec<T>,
        send_counts: Vec<usize>,
        mut output: Vec<T>,
        recv_counts: Vec<usize>,
    ) -> Result<Request<(Vec<T>, Vec<usize>, Vec<T>, Vec<usize>)>> {
        self.check_all_to_all_v("iall_to_all_v", &input, &send_counts, &output, &recv_counts)?;
        let mut raw = ptr::null_mut();
        // SAFETY: lengths checked against the counts (size entries each); the
        // Request owns the buffers and the counts until it completed.
        check(unsafe {
            sys::rlx_iall_to_all_v(
                self.raw,
                input.as_ptr().cast(),
                send_counts.as_ptr(),
                output.as_mut_ptr().cast(),
                recv_counts.as_ptr(),
                T::DTYPE,
                &mut raw,
            )
        })?;
        Ok(Request::new(raw, (input, send_counts, output, recv_counts)))
    }

    /// Non-blocking barrier: complete once every rank has entered it.
    pub fn ibarrier(&self) -> Result<Request<()>> {
        let mut raw = ptr::null_mut();
        // SAFETY: self.raw is live; raw receives the request.
        check(unsafe { sys::rlx_ibarrier(self.raw, &mut raw) })?;
        Ok(Request::new(raw, ()))
    }
}

extern "C" {
    #[link_name = "free"]
    fn libc_free(pointer: *mut c_void);
}

/// A non-blocking operation that owns its buffer `B` until it completed:
/// [`Request::wait`] gives it back. A request dropped unfinished waits for
/// its operation first; one leaked (`mem::forget`) leaks its buffer too, so
/// rlx never writes into memory Rust gave back.
pub struct Request<B> {
    raw: *mut sys::rlx_request,
    buffer: Option<B>,
    // What a test() that saw it complete was told, for wait().
    completed: Option<Result<usize>>,
    _not_sync: PhantomData<*mut ()>,
}

unsafe impl<B: Send> Send for Request<B> {}

impl<B> Request<B> {
    fn new(raw: *mut sys::rlx_request, buffer: B) -> Self {
        Request {
            raw,
            buffer: Some(buffer),
            completed: None,
            _not_sync: PhantomData,
        }
    }

    /// Waits for the operation (it has the group's deadline) and gives back
    /// the buffer and, for an irecv, the message's length in bytes. A failed
    /// operation is its error; the buffer is dropped then.
    pub fn wait(mut self) -> Result<(B, usize)> {
        let bytes = match self.completed.take() {
            Some(result) => result?,
            None => {
                let mut bytes = 0usize;
                // SAFETY: raw is this request's handle; rlx_wait releases it
                // and sets it NULL, failed or not.
                check(unsafe { sys::rlx_wait(&mut self.raw, &mut bytes) })?;
                bytes
            }
        };
        Ok((
            self.buffer
                .take()
                .expect("a request's buffer is taken once"),
            bytes,
        ))
    }

    /// True once the operation completed, then [`Request::wait`] returns its
    /// result at once; an error when it failed (wait() gives it again).
    pub fn test(&mut self) -> Result<bool> {
        if let Some(result) = &self.completed {
            return result.as_ref().map(|_| true).map_err(Clone::clone);
        }
        let mut done: c_int = 0;
        let mut bytes = 0usize;
        // SAFETY: raw is live; once complete (failed or not) rlx releases it
        // and sets it NULL, so the outcome is kept for wait().
        let status = check(unsafe { sys::rlx_test(&mut self.raw, &mut done, &mut bytes) });
        if done == 0 {
            return status.map(|()| false);
        }
        self.completed = Some(status.map(|()| bytes));
        self.test()
    }
}

impl<B> fmt::Debug for Request<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("pending", &!self.raw.is_null())
            .finish()
    }
}

impl<B> Drop for Request<B> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the operation must end before its buffer goes.
            unsafe { sys::rlx_wait(&mut self.raw, ptr::null_mut()) };
        }
    }
}

/// rlx's version ("0.1.0").
pub fn version() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::rlx_version()) }
        .to_str()
        .unwrap_or("unknown")
}

/// Drops rlx's own hold on the process group: it closes once every [`Group`]
/// handle on it is dropped too. [`Group::init`] fails after it.
pub fn finalize() -> Result<()> {
    // SAFETY: no arguments.
    check(unsafe { sys::rlx_finalize() })
}
