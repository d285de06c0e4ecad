//! The op-family tests' plumbing, through the public op registry: inputs from a seed stream
//! salted per test file (so two files never draw the same inputs for the same seed), a
//! recipe's run, a fault's run, and the count of elements where two tensors differ.

use conform_reference::faults;
use conform_reference::ops::{self, GenContext, OpError, Regime, Tensor, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use conform_reference::splitmix::SplitMix64;
use serde_json::Value;

/// The inputs of `op` for `params` from seed `seed` (salted with `salt`), values from `dist`,
/// every regime of `regimes` made true under `recipe`'s arithmetic.
pub fn generate(
    op: &str,
    params: &Value,
    regimes: &[Regime],
    seed: u64,
    salt: u64,
    dist: ValueDist,
    recipe: &str,
) -> Result<TensorMap, OpError> {
    let mut g = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt);
    let mut bits = move || g.next_u64();
    let ctx = GenContext::new(&mut bits, dist);
    let mut ctx = ctx.with_recipe(recipe);
    ops::find(op)?.generate_with_regimes(params, regimes, &mut ctx)
}

/// `op`'s outputs under `recipe` (or the oracle) on `threads` threads; panics on an error.
pub fn run(
    op: &str,
    params: &Value,
    recipe: &str,
    inputs: &TensorMap,
    threads: usize,
) -> TensorMap {
    ops::find(op)
        .unwrap()
        .run(params, recipe, inputs, Threads(threads))
        .unwrap()
}

/// `op`'s outputs under `recipe` with the catalogue's fault `name` injected; panics when the
/// fault does not apply.
pub fn with_fault(
    op: &str,
    name: &str,
    params: &Value,
    recipe: &str,
    inputs: &TensorMap,
) -> TensorMap {
    let f = faults::find(name).unwrap();
    let fam = ops::find(op).unwrap();
    match faults::run(f, fam, params, recipe, inputs, Threads(1)).unwrap() {
        faults::FaultRun::Outputs(o) => o,
        faults::FaultRun::NotApplicable(why) => panic!("{name}: {why}"),
    }
}

/// How many elements of two same-shaped tensors differ in their bits.
pub fn differing(a: &Tensor, b: &Tensor) -> usize {
    let w = a.dtype.size_bytes();
    a.data
        .chunks(w)
        .zip(b.data.chunks(w))
        .filter(|(x, y)| x != y)
        .count()
}
