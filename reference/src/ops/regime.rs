//! Numeric regimes: properties of a case's inputs that put a kernel where a class of bugs
//! shows (scores large enough to overflow exp, a row maximum that arrives late, fully masked
//! rows with the LSE asked for, padded rows, distinct batch entries, S != N, GQA groups; outputs that overflow to +-Inf or fall in the subnormal range
//! of the output dtype, inputs at a quantised format's extreme codes). A case declares the regimes it exercises (`regimes = [...]`
//! in its suite entry); the op's generator then guarantees each of them whatever the seed:
//! the seed moves which rows, keys and values carry the regime, never whether it is there.
//! A shape that cannot hold a declared regime is an error naming the regime.

/// One numeric regime, with a stable name (what suites and reports use).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// In every batch entry with a row that sees a key, every query head has a row whose
    /// largest scaled score is above [`LARGE_LOGIT_FLOOR`].
    LargeLogits,
    /// In every such batch entry, every query head has a row whose maximum score is at a key
    /// at or after the first KV tile ([`late_from`]) and exceeds every other score of the row
    /// by at least [`LATE_MAX_GAP`], while the row also sees keys of the first tile.
    LateMax,
    /// The case asks for `softmax_lse` and has at least one valid query row that sees no key.
    MaskedRowsLse,
    /// Under the case's recipe, at least 8 elements are exact ties of a cast, rounded apart by
    /// ties-to-even and ties-away: attention's output and P casts and split-KV combines
    /// ([`super::attention_ties`]), MC2's cast of a rank's product ([`super::mc2_ties`]), the
    /// MLA kernel's P, output and AMLA factor casts ([`super::mla_decode`]), NVFP4's final
    /// rounding and the W4A16 matmul's output cast ([`super::fp4_ties`]).
    RoundingTies,
    /// Some outputs overflow to +Inf and some to -Inf in the output dtype (f16 or bf16): their
    /// exact value is at least twice the dtype's largest finite value, so round-to-nearest
    /// (either tie rule) gives the infinity whatever the operation order
    /// ([`super::range_regimes`]).
    OverflowToInf,
    /// Some outputs are positive and some negative subnormals of the output dtype (nonzero,
    /// below its smallest normal), exact or one rounding away in every recipe; in attention,
    /// two value columns of subnormals of one sign each, so that every output of those columns
    /// is a nonzero subnormal computed from subnormal inputs.
    SubnormalOutputs,
    /// The quantised inputs hold their format's extreme codes: the smallest and the largest
    /// finite positive scale code (E8M0 2^-127 and 2^127; E4M3FN 2^-9 and 448), each in a
    /// group that also holds the element format's largest magnitude of both signs.
    FormatExtremes,
    /// The case asks for `softmax_lse` and has padded query rows (a batch entry whose
    /// `actual_seq_lengths` is below the padded length S), so every output of a padded row is
    /// judged where it sits: a kernel that lays out the LSE (or output) by actual rather than
    /// padded length writes valid rows over padded positions.
    PaddedRowsLse,
    /// Two or more batch entries, each with its own data: their queries differ, and so do the
    /// first keys and values each sees that are not a shared prefix. A kernel that reads one
    /// entry's data for another (a batch stride of 0, an offset of the wrong entry) is caught.
    BatchDistinct,
    /// The sequence and head axes have different sizes wherever a layout puts them side by
    /// side (query S != N and KV length != KV heads; for a paged cache block_size != KV
    /// heads, and more than one query head), so a stride taken from the wrong axis reads other
    /// data instead of coinciding with the right one.
    SeqNeHeads,
    /// Grouped-query attention with at least two KV heads and at least two query heads per KV
    /// head, so the query-to-KV head mapping (h / group, not h % kv_heads, not always 0) is
    /// judged.
    GqaGroups,
    /// An input set given to the target twice in one run, whose outputs must have identical
    /// bits. The runner guarantees it for every case (its determinism check), so no suite
    /// declares it.
    RepeatedCall,
    /// `dynamic_quant`: all-zero rows, a row whose largest magnitude is negative, a row holding
    /// the input dtype's largest finite value, a row of tiny values, and rows whose scale
    /// tells the recipe's scale form from the others ([`super::dynamic_quant`]).
    QuantEdgeRows,
    /// `pa_decode_int8`: 8 new-row elements per cache whose scaled value is beyond +127 and 8
    /// beyond -128 (the write's clamp decides them), in a shape with two or more KV heads, a
    /// sequence over several blocks and a partial last block ([`super::pa_decode_int8`]).
    KvInt8Edges,
    /// `quant_matmul`: rows whose int32 accumulation passes 2^24 and comes back (built of -128
    /// operands), so a float accumulation loses what the integer one keeps; with a per-token
    /// scale, elements whose two orders of the scale products round apart; per-channel scales
    /// that differ from column 0's ([`super::quant_matmul`]).
    IntMatmulEdges,
    /// `moe_dispatch_combine`: a routed rank that receives no row, an expert with no row on a
    /// rank that has rows (first in its receive loop), a token whose K experts all sit on one
    /// rank beside another token of its source bound for one of them, and a token whose
    /// weights do not sum to 1 ([`super::moe_dispatch_combine`]).
    MoeRoutingEdges,
    /// `moe_dispatch_combine`: 8 columns of one token whose weighted rows sum to an exact tie
    /// of the final cast in k order and above it in reverse order, and 8 of another whose f32
    /// sum and per-step dtype sum round apart ([`super::moe_dispatch_combine`]).
    MoeCombineOrder,
    /// `mla_decode`: in every batch entry long enough, each of up to 8 query heads (every head
    /// when N <= 8) has a key after the first 512-key softmax step whose score leads every
    /// score of the first step by 3 to 6, the rope term giving that lead plus 2 (without the
    /// rope, or with the rope mangled, the key falls below the first step's maximum), so the
    /// AMLA rescale between steps and every rope fault move the argmax
    /// ([`super::mla_decode`]).
    MlaRopeLateMax,
    /// In every batch entry with a row that sees keys on both sides of the end of the case's
    /// first KV tile (the recipe's own tile, [`super::attention_regimes::recipe_kv_tile`]),
    /// every query head has such a row whose maximum score lies at a key after the first tile,
    /// above the largest score of the tiles before its own by [`MODERATE_LATE_GAP`] (5 to 10),
    /// and above every other score of the row by at least 5, while the earlier tiles hold a
    /// key within that gap: the running max rises moderately and the earlier tiles still
    /// weigh, so a rescale that is skipped or lags a tile changes the output.
    ModerateLateMax,
    /// In every such batch entry, every query head has a row whose maximum score lies in the
    /// first KV tile and leads the largest score of the later tiles by
    /// [`MODERATE_EARLY_MARGIN`] (0.5 to 3): the running max never rises after the first
    /// tile, and the later tiles carry weight, so a kernel that lets the running max fall to a
    /// later tile's own maximum without rescaling is caught.
    ModerateEarlyMax,
    /// Elements on which the recipe's stated operation order gives other output bits than
    /// each alternative the catalogue models: `moe_dispatch_combine`'s multiply, round, then
    /// add (against a fused multiply-add) on tokens whose routed products nearly cancel
    /// ([`super::moe_dispatch_combine`]); `mc2_matmul_allreduce`'s x3 added to the rank's
    /// rounded result (against before its rounding) and its all-reduce order (rank order,
    /// ring and binary tree give three different sums) ([`super::mc2_witness`]).
    OrderWitnesses,
    /// `mc2_matmul_allreduce`: exact ties of the x3 vector add's rounding and of one add of
    /// the all-reduce in the dtype, every other step exact ([`super::mc2_witness`]).
    Mc2AddTies,
    /// `pa_decode_int8`: under the case's recipe, 8 or more elements are exact ties of the
    /// attention half's P cast and 8 or more of its output cast, built on the INT8 cache's
    /// codes ([`super::pa_decode_int8`]); the family's `rounding_ties` plants the
    /// quantise-on-write's.
    AttentionTies,
}

/// A guaranteed large-logit row's largest scaled score is above this (exp overflows f32 from
/// about 88.72 on, so a kernel that does not subtract the row maximum gets Inf/NaN).
pub const LARGE_LOGIT_FLOOR: f64 = 100.0;
/// The score the large-logit construction aims at.
pub const LARGE_LOGIT_TARGET: f64 = 128.0;
/// The score the late-maximum construction aims at (when large logits are not asked too).
pub const LATE_MAX_TARGET: f64 = 16.0;
/// A late maximum exceeds every other score of its row by at least this much, so the
/// rescale factor exp(m_old - m_new) of the earlier tiles is below exp(-4).
pub const LATE_MAX_GAP: f64 = 4.0;
/// The range a moderate late maximum leads the earlier tiles' largest score by (natural-log
/// units of the scaled score), checked on the rounded inputs.
pub const MODERATE_LATE_GAP: (f64, f64) = (5.0, 10.0);
/// The range a moderate early maximum leads the later tiles' largest score by.
pub const MODERATE_EARLY_MARGIN: (f64, f64) = (0.5, 3.0);
/// The smallest first-tile width a late maximum must lie beyond: the 128-key KV tile of the
/// online-softmax presets with fixed tiling.
pub const LATE_MAX_FROM: usize = 128;

impl Regime {
    /// Every regime, in a stable order.
    pub const ALL: [Regime; 23] = [
        Regime::LargeLogits,
        Regime::LateMax,
        Regime::MaskedRowsLse,
        Regime::RoundingTies,
        Regime::OverflowToInf,
        Regime::SubnormalOutputs,
        Regime::FormatExtremes,
        Regime::PaddedRowsLse,
        Regime::BatchDistinct,
        Regime::SeqNeHeads,
        Regime::GqaGroups,
        Regime::RepeatedCall,
        Regime::QuantEdgeRows,
        Regime::KvInt8Edges,
        Regime::IntMatmulEdges,
        Regime::MoeRoutingEdges,
        Regime::MoeCombineOrder,
        Regime::MlaRopeLateMax,
        Regime::ModerateLateMax,
        Regime::ModerateEarlyMax,
        Regime::OrderWitnesses,
        Regime::Mc2AddTies,
        Regime::AttentionTies,
    ];

    /// The stable name (`large_logits`).
    pub fn name(self) -> &'static str {
        match self {
            Regime::LargeLogits => "large_logits",
            Regime::LateMax => "late_max",
            Regime::MaskedRowsLse => "masked_rows_lse",
            Regime::RoundingTies => "rounding_ties",
            Regime::OverflowToInf => "overflow_to_inf",
            Regime::SubnormalOutputs => "subnormal_outputs",
            Regime::FormatExtremes => "format_extremes",
            Regime::PaddedRowsLse => "padded_rows_lse",
            Regime::BatchDistinct => "batch_distinct",
            Regime::SeqNeHeads => "seq_ne_heads",
            Regime::GqaGroups => "gqa_groups",
            Regime::RepeatedCall => "repeated_call",
            Regime::QuantEdgeRows => "quant_edge_rows",
            Regime::KvInt8Edges => "kv_int8_edges",
            Regime::IntMatmulEdges => "int_matmul_edges",
            Regime::MoeRoutingEdges => "moe_routing_edges",
            Regime::MoeCombineOrder => "moe_combine_order",
            Regime::MlaRopeLateMax => "mla_rope_late_max",
            Regime::ModerateLateMax => "moderate_late_max",
            Regime::ModerateEarlyMax => "moderate_early_max",
            Regime::OrderWitnesses => "order_witnesses",
            Regime::Mc2AddTies => "mc2_add_ties",
            Regime::AttentionTies => "attention_ties",
        }
    }

    /// What the regime guarantees, in one line.
    pub fn description(self) -> &'static str {
        match self {
            Regime::LargeLogits => {
                "every (batch, head) has a row whose largest scaled score is above 100: exp overflows f32 unless the row maximum is subtracted"
            }
            Regime::LateMax => {
                "every (batch, head) has a row whose maximum score (4 or more above the rest) lies at key 128 or later (after the first KV tile), so the online rescale matters"
            }
            Regime::MaskedRowsLse => {
                "softmax_lse is asked for and at least one valid query row sees no key, so the LSE of fully masked rows is judged"
            }
            Regime::RoundingTies => {
                "under the case's recipe, 8 or more elements are exact ties of a cast that ties-to-even and ties-away round apart: attention's P and output casts (where the recipe has them) and split-KV combines, MC2's cast of a rank's product, dynamic_quant's f32 -> int8 cast, pa_decode_int8's quantise-on-write, quant_matmul's output cast, moe_dispatch_combine's quantisation on dispatch, nvfp4_dequant's final rounding, w4a16_matmul's output cast"
            }
            Regime::OverflowToInf => {
                "some outputs overflow to +Inf and some to -Inf in the output dtype (exact value at least twice its largest finite value): a kernel that saturates or wraps is caught"
            }
            Regime::SubnormalOutputs => {
                "some outputs are positive and some negative subnormals of the output dtype (attention: two value columns of subnormals, one positive, one negative): a kernel that flushes them, or its subnormal inputs, to zero is caught"
            }
            Regime::FormatExtremes => {
                "the smallest and largest finite scale codes (E8M0 2^-127 and 2^127, E4M3FN 2^-9 and 448) each in a group that holds the largest FP4 magnitude of both signs"
            }
            Regime::PaddedRowsLse => {
                "softmax_lse is asked for and some batch entry has padded query rows (actual length below S): an output laid out by actual instead of padded length is caught"
            }
            Regime::BatchDistinct => {
                "two or more batch entries with data of their own (queries, and the first unshared keys and values, differ): a kernel that reads one entry's data for another is caught"
            }
            Regime::SeqNeHeads => {
                "sequence and head axes of different sizes (S != N and KV length != KV heads; a paged cache's block_size != KV heads): a stride taken from the wrong axis is caught"
            }
            Regime::GqaGroups => {
                "two or more KV heads, each shared by two or more query heads: the query-to-KV head mapping is judged"
            }
            Regime::RepeatedCall => {
                "input set 0 is given to the target twice in every run and the two outputs must have the same bits (the runner's determinism check, for every case)"
            }
            Regime::KvInt8Edges => {
                "8 new-row elements per cache scaled beyond +127 and 8 beyond -128 (the write's clamp decides them), two or more KV heads, a sequence over several blocks and a partial last block"
            }
            Regime::MoeRoutingEdges => {
                "a routed rank that receives no row, an expert with no row first in a busy rank's receive loop, a token whose K experts all sit on one rank beside a later token of its source bound for one of them, and a token whose weights sum to 3K/4 (never 1)"
            }
            Regime::MoeCombineOrder => {
                "8 columns of a token whose weighted rows sum to an exact tie of the final cast in k order and above it in reverse order, and 8 of another whose f32 sum and per-step dtype sum round apart"
            }
            Regime::QuantEdgeRows => {
                "8 all-zero rows (scale 0, never NaN), a row whose largest magnitude is negative, a row holding the input dtype's largest finite value, a row of tiny values (f16: all subnormal), and 8 rows whose scale under the recipe's scale form differs from the other forms'"
            }
            Regime::MlaRopeLateMax => {
                "in every batch entry with room, up to 8 query heads each have a key after the first 512-key softmax step that leads the first step's maximum by 3 to 6 only through its rope term (lead + 2): the AMLA rescale between steps and the rope's use are judged"
            }
            Regime::ModerateLateMax => {
                "every (batch, head) has a row whose maximum score lies after the recipe's first KV tile, 5 to 10 above the earlier tiles' largest score (which it holds) and 5 or more above every other: a moderate rise of the running max, where a skipped or lagging rescale shows"
            }
            Regime::ModerateEarlyMax => {
                "every (batch, head) has a row whose maximum score lies in the recipe's first KV tile, 0.5 to 3 above the later tiles' largest score: the running max never rises and the later tiles weigh, so a running max that falls to a later tile's own maximum shows"
            }
            Regime::OrderWitnesses => {
                "8 or more elements on which the recipe's stated operation order gives other bits than each modelled alternative: moe_dispatch_combine's product rounded then added (not fused) on 2 tokens x 8 columns whose two routed products nearly cancel; mc2_matmul_allreduce's x3 added after the rank's rounding (not before) and its all-reduce order (rank order, ring and binary tree three different sums), a row of 8 to 16 columns each"
            }
            Regime::Mc2AddTies => {
                "mc2_matmul_allreduce: a row of 8 to 16 exact ties of the x3 vector add's rounding and a row of 8 to 16 exact ties of one all-reduce add in the dtype, every other step exact"
            }
            Regime::AttentionTies => {
                "8 or more exact ties of the attention half's P cast and 8 or more of its output cast, built on the INT8 cache's codes, under the case's recipe: a tie rule the other way at either cast differs on many elements on every seed"
            }
            Regime::IntMatmulEdges => {
                "2 rows x 8 columns whose int32 accumulator reaches 2^24 through 1024 products (-128) x (-128), loses eight +1 terms there in a float sum and comes back to 8; with a per-token scale, 10 elements where scale-then-token and the merged scale round apart; 8 columns whose scale differs from column 0's"
            }
        }
    }

    /// The regime called `name`.
    pub fn parse(name: &str) -> Option<Regime> {
        Regime::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether the runner, not the op's generator, guarantees the regime (for every case, so
    /// no case declares it).
    pub fn by_runner(self) -> bool {
        self == Regime::RepeatedCall
    }

    /// Whether the regime is a property of the case's shape and of distinct data, held by the
    /// ordinary draw (checked, never constructed): it moves no value of the inputs.
    pub fn is_structural(self) -> bool {
        matches!(
            self,
            Regime::PaddedRowsLse | Regime::BatchDistinct | Regime::SeqNeHeads | Regime::GqaGroups
        )
    }

    /// Whether the regime places a moderate row maximum relative to the recipe's KV tile.
    pub fn is_moderate_max(self) -> bool {
        matches!(self, Regime::ModerateLateMax | Regime::ModerateEarlyMax)
    }
}

/// The key from which a late maximum counts as late: the case's own KV tile (or cache block)
/// when it is longer than [`LATE_MAX_FROM`], else [`LATE_MAX_FROM`].
pub fn late_from(tile: Option<usize>) -> usize {
    tile.unwrap_or(0).max(LATE_MAX_FROM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for r in Regime::ALL {
            assert_eq!(Regime::parse(r.name()), Some(r));
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::json!(r.name())
            );
            assert!(!r.description().is_empty());
        }
        assert_eq!(Regime::parse("huge_logits"), None);
        assert_eq!(late_from(Some(64)), 128);
        assert_eq!(late_from(Some(256)), 256);
    }
}
