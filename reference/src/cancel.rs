//! Stopping a long computation part-way: a [`CancelToken`] that the caller sets (the harness
//! does, from its interrupt handler), and cancellation points that unwind out of the
//! computation once it is set. The crate knows nothing of signals: it only sees the token.
//!
//! [`run`] makes a token the current one of the calling thread for the span of a computation;
//! the parallel layer ([`crate::parallel`]) carries it into every task it runs and checks it
//! before each task (a tile, a row block, a chunk), so a cancelled computation stops within
//! one task's time. Long loops outside the parallel layer call [`checkpoint`] themselves.
//! What a cancelled computation had computed is dropped; nothing it returns is ever a result.
//! A computation that is not cancelled is untouched: the checks read a flag, and the bits are
//! the same with or without a token.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag that stops the computations running under it ([`run`]). Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Asks every computation under this token to stop at its next cancellation point.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a cancelled computation ends with (also the payload it unwinds with).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cancelled")
    }
}

impl std::error::Error for Cancelled {}

thread_local! {
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

/// Runs `f` with `token` current on this thread (and in every task the parallel layer runs
/// for it). `Err(Cancelled)` when a cancellation point found the token set; any other panic
/// goes on unwinding as it was.
pub fn run<R>(token: &CancelToken, f: impl FnOnce() -> R) -> Result<R, Cancelled> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_current(Some(token.clone()), f)
    }));
    match result {
        Ok(r) => Ok(r),
        Err(payload) if payload.is::<Cancelled>() => Err(Cancelled),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// A cancellation point: when this thread's current token is cancelled, unwinds to the
/// enclosing [`run`] (without running the panic hook: nothing is printed). Costs a
/// thread-local read when no token is current.
pub fn checkpoint() {
    if current_is_cancelled() {
        std::panic::resume_unwind(Box::new(Cancelled));
    }
}

/// A cancellation point on every 2^20th iteration of a flat loop over elements (`i` its
/// index): a single pass over up to 2^30 elements stops within milliseconds.
#[inline]
pub fn checkpoint_every(i: usize) {
    if i & ((1 << 20) - 1) == 0 {
        checkpoint();
    }
}

/// Whether this thread's current token is cancelled (false without one).
pub fn current_is_cancelled() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(CancelToken::is_cancelled))
}

/// The current token of this thread (what the parallel layer hands its tasks).
pub(crate) fn current() -> Option<CancelToken> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Runs `f` with `token` current on this thread, restoring the previous one after (also when
/// `f` unwinds).
pub(crate) fn with_current<R>(token: Option<CancelToken>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<CancelToken>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
    }
    let prev = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), token));
    let _restore = Restore(prev);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_token_unwinds_at_the_next_point_and_nothing_else_does() {
        let t = CancelToken::new();
        assert_eq!(run(&t, || 7), Ok(7));
        let mut reached = 0;
        let r = run(&t, || {
            for i in 0..10 {
                if i == 3 {
                    t.cancel();
                }
                checkpoint();
                reached = i;
            }
        });
        assert_eq!(r, Err(Cancelled));
        assert_eq!(reached, 2);
        // Outside `run`, or under another token, a point does nothing.
        checkpoint();
        assert_eq!(run(&CancelToken::new(), current_is_cancelled), Ok(false));
        // Other panics are not swallowed.
        let p = std::panic::catch_unwind(|| run(&CancelToken::new(), || panic!("boom")));
        assert!(p.is_err());
        assert!(current().is_none());
    }
}
