//! Inputs drawn ahead. A run with one target spends most of a quick case on one thread drawing
//! its inputs (the regimes' searches for ties and witnesses, the `discriminates` search), while
//! the target's computation and the verdict are the smaller part: drawers on other threads
//! draw the coming cases' first input sets meanwhile, several at once. Generation is a pure
//! function of the case and its seed, so the inputs are the same bits whichever thread draws
//! them, and the results are the same as without drawing ahead.
//!
//! At most `ahead` (the constructor's argument) cases beyond the one being run are drawn or
//! held, so memory stays bounded by a few small cases' inputs (the runner draws ahead only
//! small cases). A case whose drawing failed or panicked is not held: its trial draws it again
//! and meets the error there, as it would without drawing ahead. An interrupt cancels a
//! drawing under way (the reference's cancellation points) and stops the drawers.

use crate::case_data::generate_inputs;
use crate::suite::Case;
use conform_reference::ops::TensorMap;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The plan (case id and seed of each case's first input set, in run order) and what has been
/// drawn of it.
#[derive(Debug)]
pub struct InputPrefetch {
    plan: Vec<(String, u64)>,
    /// How many cases beyond the one being run may be drawn or held.
    ahead: usize,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The next plan entry a drawer claims.
    next: usize,
    /// Plan entries whose drawing has ended (held or failed).
    done: Vec<bool>,
    /// The plan entry the run is at (the consumer's position).
    at: usize,
    /// Drawn inputs not yet taken, by plan index.
    held: HashMap<usize, TensorMap>,
    stopped: bool,
}

impl InputPrefetch {
    /// A prefetch of the first input set of each `(case, seed)`, in run order, drawing at most
    /// `ahead` (at least 1) cases beyond the one being run.
    pub fn new(plan: Vec<(String, u64)>, ahead: usize) -> InputPrefetch {
        let done = vec![false; plan.len()];
        InputPrefetch {
            plan,
            ahead: ahead.max(1),
            state: Mutex::new(State {
                done,
                ..State::default()
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a drawing panicked; the state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One drawer (several may run, each on its own thread): claims the next planned case not
    /// yet claimed, never more than `ahead` beyond the case the run is at, and
    /// draws it with `draw` (`None` for a failure), until the plan ends or
    /// [`stop`](Self::stop) is called.
    pub fn produce(&self, draw: impl Fn(usize) -> Option<TensorMap>) {
        loop {
            let i = {
                let mut st = self.lock();
                loop {
                    // The run may be past entries nobody claimed: it drew or skipped them.
                    st.next = st.next.max(st.at);
                    if st.stopped || st.next >= self.plan.len() {
                        return;
                    }
                    if st.next <= st.at + self.ahead {
                        break;
                    }
                    st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                st.next += 1;
                st.next - 1
            };
            let drawn = draw(i);
            let mut st = self.lock();
            if let Some(inputs) = drawn
                && i >= st.at
                && !st.stopped
            {
                st.held.insert(i, inputs);
            }
            st.done[i] = true;
            self.changed.notify_all();
        }
    }

    /// The inputs of case `case_id`'s first input set for `seed`, when they are planned: waits for the
    /// producer to finish drawing them. `None` when they are not planned (another seed, a case
    /// outside the plan), when their drawing failed or when the prefetch was stopped: the
    /// caller draws them itself.
    pub fn take(&self, case_id: &str, seed: u64) -> Option<TensorMap> {
        let mut st = self.lock();
        let i = (st.at..self.plan.len())
            .find(|&i| self.plan[i].0 == case_id && self.plan[i].1 == seed)?;
        st.at = i;
        st.held.retain(|&k, _| k >= i);
        self.changed.notify_all();
        if st.next <= i {
            // Nobody has claimed it: the caller draws it itself rather than wait.
            st.next = i + 1;
            return None;
        }
        while !st.stopped && !st.done[i] {
            st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.held.remove(&i)
    }

    /// Ends the producer at its next step and drops what it holds.
    pub fn stop(&self) {
        let mut st = self.lock();
        st.stopped = true;
        st.held.clear();
        self.changed.notify_all();
    }
}

/// Stops the prefetch when dropped: the runner's scope ends its producer even when the run
/// unwinds.
pub struct StopOnDrop<'a>(pub &'a InputPrefetch);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Draws the first input set of `case` for `seed` under the interrupt's token; `None` when the
/// drawing failed, panicked or was cancelled (the trial then draws it itself and meets the
/// same end there).
pub fn draw(case: &Case, seed: u64) -> Option<TensorMap> {
    let token = crate::interrupt::cancel_token();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        conform_reference::cancel::run(token, || generate_inputs(case, seed).ok())
    }))
    .ok()
    .and_then(Result::ok)
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_reference::ops::{ElemType, Tensor};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn plan(n: usize) -> Vec<(String, u64)> {
        (0..n).map(|i| (format!("c{i}"), i as u64 * 10)).collect()
    }

    /// One tensor whose single byte names the plan entry it was drawn for.
    fn marked(i: usize) -> TensorMap {
        let mut m = TensorMap::new();
        m.insert(
            "x".into(),
            Tensor::new(ElemType::U8, vec![1], vec![i as u8]).unwrap(),
        );
        m
    }

    fn mark(m: &TensorMap) -> u8 {
        m["x"].data[0]
    }

    #[test]
    fn every_planned_case_is_taken_with_its_own_inputs_whatever_the_drawers() {
        for drawers in 1..=3 {
            let p = InputPrefetch::new(plan(9), drawers);
            let draws = AtomicUsize::new(0);
            std::thread::scope(|s| {
                let _stop = StopOnDrop(&p);
                for _ in 0..drawers {
                    s.spawn(|| {
                        p.produce(|i| {
                            draws.fetch_add(1, Ordering::SeqCst);
                            Some(marked(i))
                        })
                    });
                }
                for i in 0..9 {
                    let got = p.take(&format!("c{i}"), i as u64 * 10);
                    if let Some(m) = got {
                        assert_eq!(mark(&m), i as u8, "{drawers} drawers, case {i}");
                    }
                }
                p.stop();
            });
            // Each case drawn at most once: the trial draws itself only what nobody claimed.
            assert!(draws.load(Ordering::SeqCst) <= 9);
        }
    }

    /// Waits until the drawers have finished entry `i`.
    fn drawn(p: &InputPrefetch, i: usize) {
        while !p.lock().done[i] {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn a_case_not_planned_or_with_another_seed_is_not_served() {
        let p = InputPrefetch::new(plan(3), 1);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&p);
            s.spawn(|| p.produce(|i| Some(marked(i))));
            drawn(&p, 1);
            assert_eq!(mark(&p.take("c0", 0).expect("planned and drawn")), 0);
            assert!(p.take("c1", 11).is_none(), "another seed");
            assert!(p.take("elsewhere", 0).is_none(), "not planned");
            // Within reach of the drawer (one ahead of the run): drawn, then served.
            assert_eq!(mark(&p.take("c1", 10).expect("planned and drawn")), 1);
            p.stop();
        });
    }

    #[test]
    fn skipped_cases_are_dropped_and_never_block_the_run() {
        // The run takes only every third case (the others are skipped at admission): the
        // drawers move on, nothing is held past the run's position, and every take returns.
        let p = InputPrefetch::new(plan(12), 2);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&p);
            for _ in 0..2 {
                s.spawn(|| p.produce(|i| Some(marked(i))));
            }
            for i in (0..12).step_by(3) {
                if let Some(m) = p.take(&format!("c{i}"), i as u64 * 10) {
                    assert_eq!(mark(&m), i as u8);
                }
                assert!(p.lock().held.keys().all(|&k| k >= i));
            }
            p.stop();
        });
    }

    #[test]
    fn a_failed_drawing_is_left_to_the_trial() {
        let p = InputPrefetch::new(plan(4), 1);
        std::thread::scope(|s| {
            let _stop = StopOnDrop(&p);
            s.spawn(|| p.produce(|i| (i != 2).then(|| marked(i))));
            for i in 0..4 {
                let got = p.take(&format!("c{i}"), i as u64 * 10);
                if i == 2 {
                    assert!(got.is_none(), "a failure is drawn again by the trial");
                }
            }
            p.stop();
        });
    }

    #[test]
    fn stop_ends_the_drawers_and_releases_a_waiting_take() {
        let p = InputPrefetch::new(plan(3), 1);
        let started = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                p.produce(|i| {
                    if i == 0 {
                        started.wait();
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    Some(marked(i))
                })
            });
            started.wait();
            let stopper = s.spawn(|| p.stop());
            // Either the drawing ended first (held) or the stop did (None): never a hang.
            let _ = p.take("c0", 0);
            stopper.join().unwrap();
        });
        assert!(p.lock().held.is_empty());
    }
}
