//! What the examples in these docs share (hidden from the docs; not part of the API's promises):
//! the names they use, and [`Down`].

use ::redis::aio::ConnectionLike;
use ::redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

pub use crate::redis::*;
pub use crate::{
    ConcurrencyLimiter, ConcurrencyOptions, FixedWindowOptions, GcraOptions, Limiter, Reason,
    TokenBucketOptions,
};
pub use core::time::Duration;

/// A Redis that is down: every call fails at once, with a connection error. The examples use it
/// to show the failure policies, and to run without a server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Down;

impl ConnectionLike for Down {
    fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async { Err(refused()) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _: &'a Pipeline,
        _: usize,
        _: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async { Err(refused()) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

fn refused() -> RedisError {
    RedisError::from((ErrorKind::Io, "connection refused"))
}
