//! The C API's declarations (rlx/rlx_c.h), written by hand: the crate
//! registry is out of reach here, so no bindgen.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub type rlx_status = c_int;
pub type rlx_dtype = c_int;
pub type rlx_op = c_int;

#[repr(C)]
pub struct rlx_group {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct rlx_request {
    _opaque: [u8; 0],
}

pub const RLX_OK: rlx_status = 0;
pub const RLX_NO_COLOR: c_int = -1;

extern "C" {
    pub fn rlx_version() -> *const c_char;
    pub fn rlx_last_error() -> *const c_char;
    pub fn rlx_last_error_peer() -> c_int;
    pub fn rlx_init(
        backend: *const c_char,
        strict: c_int,
        world: *mut *mut rlx_group,
    ) -> rlx_status;
    pub fn rlx_finalize() -> rlx_status;
    pub fn rlx_group_free(group: *mut rlx_group) -> rlx_status;
    pub fn rlx_rank(group: *const rlx_group, rank: *mut c_int) -> rlx_status;
    pub fn rlx_size(group: *const rlx_group, size: *mut c_int) -> rlx_status;
    pub fn rlx_backend(group: *const rlx_group, name: *mut *const c_char) -> rlx_status;
    pub fn rlx_split(
        group: *mut rlx_group,
        color: c_int,
        key: c_int,
        out: *mut *mut rlx_group,
    ) -> rlx_status;

    pub fn rlx_send(
        group: *mut rlx_group,
        to: c_int,
        tag: u32,
        data: *const c_void,
        bytes: usize,
    ) -> rlx_status;
    pub fn rlx_recv(
        group: *mut rlx_group,
        from: c_int,
        tag: u32,
        buffer: *mut c_void,
        capacity: usize,
        received: *mut usize,
    ) -> rlx_status;
    pub fn rlx_recv_message(
        group: *mut rlx_group,
        from: c_int,
        tag: u32,
        data: *mut *mut c_void,
        bytes: *mut usize,
    ) -> rlx_status;

    pub fn rlx_all_reduce(
        group: *mut rlx_group,
        data: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        op: rlx_op,
    ) -> rlx_status;
    pub fn rlx_all_gather(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
    ) -> rlx_status;
    pub fn rlx_reduce_scatter(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        op: rlx_op,
    ) -> rlx_status;
    pub fn rlx_broadcast(
        group: *mut rlx_group,
        data: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        root: c_int,
    ) -> rlx_status;
    pub fn rlx_all_to_all(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
    ) -> rlx_status;
    pub fn rlx_reduce(
        group: *mut rlx_group,
        data: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        op: rlx_op,
        root: c_int,
    ) -> rlx_status;
    pub fn rlx_gather(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        root: c_int,
    ) -> rlx_status;
    pub fn rlx_scatter(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        root: c_int,
    ) -> rlx_status;
    pub fn rlx_all_gather_v(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        counts: *const usize,
        dtype: rlx_dtype,
    ) -> rlx_status;
    pub fn rlx_all_to_all_v(
        group: *mut rlx_group,
        input: *const c_void,
        send_counts: *const usize,
        output: *mut c_void,
        recv_counts: *const usize,
        dtype: rlx_dtype,
    ) -> rlx_status;
    pub fn rlx_barrier(group: *mut rlx_group) -> rlx_status;
    pub fn rlx_ibroadcast(
        group: *mut rlx_group,
        data: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        root: c_int,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_ibarrier(group: *mut rlx_group, request: *mut *mut rlx_request) -> rlx_status;

    pub fn rlx_isend(
        group: *mut rlx_group,
        to: c_int,
        tag: u32,
        data: *const c_void,
        bytes: usize,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_irecv(
        group: *mut rlx_group,
        from: c_int,
        tag: u32,
        buffer: *mut c_void,
        capacity: usize,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_iall_reduce(
        group: *mut rlx_group,
        data: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        op: rlx_op,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_iall_gather(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_ireduce_scatter(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        op: rlx_op,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_iall_to_all(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_ireduce(
        group: *mut rlx_group,
        data: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        op: rlx_op,
        root: c_int,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_igather(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        root: c_int,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_iscatter(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        count: usize,
        dtype: rlx_dtype,
        root: c_int,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_iall_gather_v(
        group: *mut rlx_group,
        input: *const c_void,
        output: *mut c_void,
        counts: *const usize,
        dtype: rlx_dtype,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_iall_to_all_v(
        group: *mut rlx_group,
        input: *const c_void,
        send_counts: *const usize,
        output: *mut c_void,
        recv_counts: *const usize,
        dtype: rlx_dtype,
        request: *mut *mut rlx_request,
    ) -> rlx_status;
    pub fn rlx_wait(request: *mut *mut rlx_request, bytes: *mut usize) -> rlx_status;
    pub fn rlx_test(
        request: *mut *mut rlx_request,
        done: *mut c_int,
        bytes: *mut usize,
    ) -> rlx_status;
}
