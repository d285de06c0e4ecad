//! A rate measured over simulated trials, with its binomial standard error (the simulation
//! tests of the perf gates).

/// `hits` of `trials` simulated histories or comparisons.
pub struct Rate {
    pub hits: usize,
    pub trials: usize,
}

impl Rate {
    pub fn value(&self) -> f64 {
        self.hits as f64 / self.trials as f64
    }

    /// The binomial standard error, floored at half a trial so that a rate of 0 or 1 does not
    /// read as exact.
    pub fn std_error(&self) -> f64 {
        let p = self.value();
        (p * (1.0 - p) / self.trials as f64)
            .sqrt()
            .max(0.5 / self.trials as f64)
    }
}
