//! The MC2 M-axis split planner of seed 000 (section 03).
//!
//! MatmulAllReduce splits the matmul's M axis into tiles so that the all-reduce of one tile
//! overlaps the matmul of the next. The layout is "long tiles plus one short tile": the short
//! tile goes FIRST when communication-bound (its matmul is the only exposed computation) and
//! LAST when compute-bound (its all-reduce is the only exposed communication).
//!
//! Steps ([`plan_split`]):
//! 1. **Bound.** Compare the unsplit matmul and all-reduce times (measured figures if given,
//!    otherwise the cost models at `M`): communication-bound if communication takes strictly
//!    longer, compute-bound otherwise (a tie counts as compute-bound).
//! 2. **Short tile `m0`** from the three empirical bounds of the seed, each the smallest
//!    integer satisfying its inequality:
//!    `a * K * N >= 4 * 2^30`, `b * K * N / 1024 + b * N >= 6 * 2^20`, `c >= 3 * 128`.
//!    No split (one tile of `M` rows) when `M < 2 * m0`, when `K = 0`, or when `max_tiles < 2`.
//! 3. **Long tile `m1`.** Communication-bound: the short tile's all-reduce time, multiplied by
//!    the contention factor (1.15: memory-bandwidth conflicts while both streams run), is the
//!    time budget for one long tile's matmul: `m1 = CostMM^-1(contention * CostComm(m0))`.
//!    Compute-bound (the mirror image; the seed only works a communication-bound example, so
//!    this is our reading): the short tile's matmul time is the budget for one long tile's
//!    inflated all-reduce: `m1 = CostComm^-1(CostMM(m0) / contention)`. Either way `m1` is
//!    aligned DOWN to `alignment` (128, the kernel's BASE_BLOCK_M), and at least `alignment`.
//! 4. **Long-tile count** `n = floor((M - m0) / m1)`, at least 1, at most `max_tiles - 1`.
//! 5. **Re-balance** `m1 = align_down((M - m0) / n)`, then `m0 = M - n * m1`.
//!
//! ## The min-vs-max discrepancy in the seed
//! The seed's text says `m0 = min(a, b, c)`, but its worked example (M = 4096, K = 3072,
//! N = 8192: a = 171, b = 192, c = 384) uses `m0 = 384 = max(a, b, c)`: the bounds are lower
//! bounds, and the smallest `m0` that satisfies all three is their maximum. We implement what
//! reproduces the worked example ([`ShortTileRule::SmallestMeetingAll`], the default) and keep
//! the literal text as [`ShortTileRule::SeedTextMin`] for comparison.
//!
//! With the seed's figures the plan is `[512, 896, 896, 896, 896]`, communication-bound: the
//! short tile's all-reduce `CostComm(6 MiB) = 142.23 us`, x 1.15 = 163.56 us; the matmul cost
//! is linear (803 us per 4096 rows) so `m1 = 834.3 -> 768`; `n = floor(3712 / 768) = 4`;
//! `m1 = align_down(928) = 896`; `m0 = 4096 - 4 * 896 = 512`.

use super::cost_model::AxisCost;
use super::error::Mc2Error;

/// Which stream limits the unsplit operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The matmul takes at least as long as the all-reduce.
    Compute,
    /// The all-reduce takes longer than the matmul.
    Communication,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Compute => "compute",
            Bound::Communication => "communication",
        }
    }
}

/// How the short tile is chosen from the seed's three bounds (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShortTileRule {
    /// `max(a, b, c)`: the smallest `m0` meeting all three bounds. Reproduces the worked example.
    #[default]
    SmallestMeetingAll,
    /// `min(a, b, c)`: the seed's text taken literally (does not reproduce its example).
    SeedTextMin,
}

/// Planner parameters. [`PlannerConfig::default`] is the seed's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannerConfig {
    /// Row alignment of the long tiles (128).
    pub alignment: u64,
    /// Maximum number of tiles (16).
    pub max_tiles: u64,
    /// Communication contention factor (1.15).
    pub contention: f64,
    /// Bound a: `a * K * N >= a_threshold` (4 * 2^30).
    pub a_threshold: u64,
    /// Bound b: `b * K * N / 1024 + b * N >= b_threshold` (6 * 2^20).
    pub b_threshold: u64,
    /// Bound c: `c >= c_min_rows` (3 * 128).
    pub c_min_rows: u64,
    /// Short-tile rule (default: max of the bounds).
    pub short_tile_rule: ShortTileRule,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            alignment: 128,
            max_tiles: 16,
            contention: 1.15,
            a_threshold: 4 << 30,
            b_threshold: 6 << 20,
            c_min_rows: 3 * 128,
            short_tile_rule: ShortTileRule::SmallestMeetingAll,
        }
    }
}

/// The planner's rules as fidelity-ledger claims (docs/ascend.md): `(id, claim)`. Its constants
/// are knobs of [`PlannerConfig::knobs`].
pub const PLANNER_CLAIMS: [(&str, &str); 5] = [
    (
        "mc2.plan.bound_rule",
        "compute-bound when the unsplit matmul takes at least as long as the all-reduce",
    ),
    (
        "mc2.plan.short_tile_position",
        "short tile first when communication-bound, last when compute-bound",
    ),
    (
        "mc2.plan.no_split",
        "one tile when M < 2 * m0, K = 0 or max_tiles < 2",
    ),
    (
        "mc2.plan.long_tile",
        "long tile from the inverse cost model of the contention-scaled short tile, aligned down",
    ),
    (
        "mc2.plan.rebalance",
        "long tiles re-balanced over M - m0, the remainder to the short tile",
    ),
];

impl PlannerConfig {
    /// The constants as ledger knobs `mc2.plan.<field>` (docs/ascend.md). The destructuring
    /// makes a new field a compile error until it is a knob.
    pub fn knobs(&self) -> Vec<crate::knob::Knob> {
        let PlannerConfig {
            alignment,
            max_tiles,
            contention,
            a_threshold,
            b_threshold,
            c_min_rows,
            short_tile_rule,
        } = self;
        let k =
            |field: &str, value: String| crate::knob::Knob::new(format!("mc2.plan.{field}"), value);
        vec![
            k("alignment", alignment.to_string()),
            k("max_tiles", max_tiles.to_string()),
            k("contention", contention.to_string()),
            k("a_threshold", a_threshold.to_string()),
            k("b_threshold", b_threshold.to_string()),
            k("c_min_rows", c_min_rows.to_string()),
            k("short_tile_rule", format!("{short_tile_rule:?}")),
        ]
    }

    fn validate(&self) -> Result<(), Mc2Error> {
        if self.alignment == 0 {
            return Err(invalid("alignment", self.alignment, "must be at least 1"));
        }
        if self.max_tiles == 0 {
            return Err(invalid("max_tiles", self.max_tiles, "must be at least 1"));
        }
        if !(self.contention.is_finite() && self.contention > 0.0) {
            return Err(invalid(
                "contention",
                self.contention,
                "must be a finite number > 0",
            ));
        }
        Ok(())
    }
}

fn invalid(name: &'static str, value: impl ToString, reason: &'static str) -> Mc2Error {
    Mc2Error::InvalidParameter {
        name,
        value: value.to_string(),
        reason,
    }
}

/// Unsplit matmul and all-reduce times (us), e.g. measured with msProf.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UnsplitTimes {
    pub matmul_us: f64,
    pub comm_us: f64,
}

impl UnsplitTimes {
    /// The serial (unfused) time: matmul then all-reduce.
    pub fn serial_us(&self) -> f64 {
        self.matmul_us + self.comm_us
    }
}

/// The problem the planner splits.
#[derive(Clone, Copy, Debug)]
pub struct PlanInputs<'a> {
    pub m: u64,
    pub k: u64,
    pub n: u64,
    /// Output element size in bytes (2 for f16/bf16).
    pub element_bytes: u64,
    /// Matmul time per tile.
    pub matmul: &'a AxisCost,
    /// All-reduce time per tile.
    pub comm: &'a AxisCost,
    /// Measured unsplit times; `None` evaluates the cost models at `M`.
    pub unsplit: Option<UnsplitTimes>,
}

/// The seed's three short-tile bounds for a shape (each the smallest integer meeting its
/// inequality; `u64::MAX` when the inequality cannot be met because K * N or N is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShortTileBounds {
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

impl ShortTileBounds {
    /// Computes the bounds exactly in integers.
    pub fn for_shape(k: u64, n: u64, config: &PlannerConfig) -> ShortTileBounds {
        let kn = (k as u128) * (n as u128);
        let a = ceil_div_or_max(config.a_threshold as u128, kn);
        // b * K * N / 1024 + b * N >= T  <=>  b * N * (K + 1024) >= 1024 * T.
        let b = ceil_div_or_max(
            1024 * (config.b_threshold as u128),
            (n as u128) * (k as u128 + 1024),
        );
        ShortTileBounds {
            a,
            b,
            c: config.c_min_rows,
        }
    }

    /// The short tile under `rule`.
    pub fn short_tile(&self, rule: ShortTileRule) -> u64 {
        match rule {
            ShortTileRule::SmallestMeetingAll => self.a.max(self.b).max(self.c),
            ShortTileRule::SeedTextMin => self.a.min(self.b).min(self.c),
        }
    }
}

fn ceil_div_or_max(num: u128, den: u128) -> u64 {
    if den == 0 {
        return u64::MAX;
    }
    let q = num.div_ceil(den);
    u64::try_from(q).unwrap_or(u64::MAX)
}

/// A split plan and how it was derived.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub bound: Bound,
    /// Tile heights in execution order (sum = M).
    pub tiles: Vec<u64>,
    /// Whether M was split at all.
    pub split: bool,
    /// Why M was not split (`None` when it was).
    pub no_split_reason: Option<String>,
    /// The unsplit times the bound was decided on.
    pub unsplit: UnsplitTimes,
    /// The seed's a, b, c.
    pub short_tile_bounds: ShortTileBounds,
    /// Step 2's short tile (before re-balancing).
    pub initial_short_tile: u64,
    /// Step 3's time budget for one long tile (us).
    pub long_tile_budget_us: f64,
    /// Step 3's long tile before alignment (fractional rows from the inverse model).
    pub long_tile_unaligned: f64,
    /// Step 3's aligned long tile (before re-balancing).
    pub initial_long_tile: u64,
    /// The final long tile and their count, and the final short tile.
    pub long_tile: u64,
    pub long_count: u64,
    pub short_tile: u64,
}

/// Plans the M-axis split (see the module docs for the algorithm).
pub fn plan_split(inputs: &PlanInputs<'_>, config: &PlannerConfig) -> Result<Plan, Mc2Error> {
    config.validate()?;
    let PlanInputs {
        m,
        k,
        n,
        element_bytes,
        matmul,
        comm,
        unsplit,
    } = *inputs;
    if m == 0 {
        return Err(Mc2Error::ZeroDimension { name: "M" });
    }
    if n == 0 {
        return Err(Mc2Error::ZeroDimension { name: "N" });
    }
    if element_bytes == 0 {
        return Err(Mc2Error::ZeroDimension {
            name: "element size",
        });
    }
    let unsplit = match unsplit {
        Some(u) => {
            for (name, v) in [
                ("unsplit matmul_us", u.matmul_us),
                ("unsplit comm_us", u.comm_us),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(invalid(name, v, "must be a finite time >= 0"));
                }
            }
            u
        }
        None => UnsplitTimes {
            matmul_us: matmul.time_us(m as f64, k, n, element_bytes),
            comm_us: comm.time_us(m as f64, k, n, element_bytes),
        },
    };
    let bound = if unsplit.comm_us > unsplit.matmul_us {
        Bound::Communication
    } else {
        Bound::Compute
    };
    let bounds = ShortTileBounds::for_shape(k, n, config);
    let m0 = bounds.short_tile(config.short_tile_rule);

    let mut plan = Plan {
        bound,
        tiles: vec![m],
        split: false,
        no_split_reason: None,
        unsplit,
        short_tile_bounds: bounds,
        initial_short_tile: m0,
        long_tile_budget_us: 0.0,
        long_tile_unaligned: 0.0,
        initial_long_tile: 0,
        long_tile: 0,
        long_count: 0,
        short_tile: m,
    };
    let no_split = |mut plan: Plan, why: String| {
        plan.no_split_reason = Some(why);
        Ok(plan)
    };
    if k == 0 {
        return no_split(plan, "K = 0: nothing to compute".into());
    }
    if config.max_tiles < 2 {
        return no_split(plan, "max_tiles < 2".into());
    }
    if (m as u128) < 2 * (m0 as u128) {
        return no_split(plan, format!("M = {m} < 2 x minimum tile {m0}"));
    }
    let align = config.alignment;
    let rest = m - m0;
    if rest < align {
        return no_split(
            plan,
            format!("M - short tile = {rest} is below the alignment {align}"),
        );
    }

    let (budget, m1_raw) = match bound {
        Bound::Communication => {
            let budget = comm.time_us(m0 as f64, k, n, element_bytes) * config.contention;
            (budget, matmul.rows_for_time(budget, k, n, element_bytes)?)
        }
        Bound::Compute => {
            let budget = matmul.time_us(m0 as f64, k, n, element_bytes) / config.contention;
            (budget, comm.rows_for_time(budget, k, n, element_bytes)?)
        }
    };
    plan.long_tile_budget_us = budget;
    plan.long_tile_unaligned = m1_raw;
    // f64 -> u64 `as` saturates; the raw value is finite and >= 0 by construction.
    let m1_aligned = ((m1_raw.floor() as u64) / align * align).max(align);
    plan.initial_long_tile = m1_aligned;

    let count = (rest / m1_aligned).clamp(1, config.max_tiles - 1);
    let m1 = rest / count / align * align;
    let short = m - count * m1;

    plan.tiles = match bound {
        Bound::Communication => std::iter::once(short)
            .chain(std::iter::repeat_n(m1, count as usize))
            .collect(),
        Bound::Compute => std::iter::repeat_n(m1, count as usize)
            .chain(std::iter::once(short))
            .collect(),
    };
    plan.split = true;
    plan.long_tile = m1;
    plan.long_count = count;
    plan.short_tile = short;
    Ok(plan)
}
