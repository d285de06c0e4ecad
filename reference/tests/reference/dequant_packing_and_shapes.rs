//! Packing layouts (nibble order, ONNX odd padding, split halves, explicit permutations), the
//! bulk dequantisers against the element semantics for every layout and thread count, the
//! presets, and typed errors for bad shapes.

use crate::common;

use common::Rng;
use conform_reference::dequant::packing::{pack, packed_len, unpack};
use conform_reference::dequant::{
    mxfp4, nvfp4, DequantError, Fp4DequantRecipe, HalfType, NibbleOrder, PackingLayout, ScaleOrder,
    TilePermutation, PRESET_NAMES,
};
use conform_reference::formats::Rounding;
use conform_reference::parallel::Threads;
use proptest::prelude::*;

fn layouts() -> Vec<PackingLayout> {
    vec![
        PackingLayout::LOW_FIRST,
        PackingLayout::HIGH_FIRST,
        PackingLayout::split_halves(1),
        PackingLayout::split_halves(4),
        PackingLayout::split_halves(64),
        PackingLayout {
            nibble_order: NibbleOrder::HighFirst,
            permutation: TilePermutation::SplitHalves { bytes: 8 },
        },
        PackingLayout {
            nibble_order: NibbleOrder::LowFirst,
            permutation: TilePermutation::Explicit(vec![3, 0, 5, 1, 2, 4]),
        },
    ]
}

proptest! {
    #[test]
    fn pack_then_unpack_is_identity_for_every_layout(
        codes in proptest::collection::vec(0u8..16, 0..600),
        which in 0usize..7,
    ) {
        let layout = &layouts()[which];
        let tile = layout.tile_len();
        let len = if layout.permutation == TilePermutation::Identity {
            codes.len()
        } else {
            codes.len() / tile * tile
        };
        let codes = &codes[..len];
        let packed = pack(codes, layout).unwrap();
        prop_assert_eq!(packed.len(), packed_len(len));
        prop_assert_eq!(unpack(&packed, len, layout).unwrap(), codes.to_vec());
    }

    #[test]
    fn unpack_then_pack_is_identity_for_every_layout(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        which in 0usize..7,
    ) {
        let layout = &layouts()[which];
        let tile_bytes = layout.tile_len() / 2;
        let bytes = &bytes[..bytes.len() / tile_bytes * tile_bytes];
        let codes = unpack(bytes, bytes.len() * 2, layout).unwrap();
        prop_assert_eq!(pack(&codes, layout).unwrap(), bytes.to_vec());
    }
}

#[test]
fn nibble_orders_and_onnx_odd_padding() {
    let codes = [0x1u8, 0x2, 0x3];
    // Low first: element 0 in the low nibble; the odd count pads the last HIGH nibble with 0.
    assert_eq!(
        pack(&codes, &PackingLayout::LOW_FIRST).unwrap(),
        vec![0x21, 0x03]
    );
    assert_eq!(
        pack(&codes, &PackingLayout::HIGH_FIRST).unwrap(),
        vec![0x12, 0x30]
    );
    assert_eq!(
        unpack(&[0x21, 0x03], 3, &PackingLayout::LOW_FIRST).unwrap(),
        codes.to_vec()
    );
    assert_eq!(packed_len(0), 0);
    assert_eq!(packed_len(7), 4);
}

#[test]
fn split_halves_takes_high_nibbles_first_then_low_nibbles() {
    // Tile of 2 bytes = 4 elements: [hi(b0), hi(b1), lo(b0), lo(b1)].
    let layout = PackingLayout::split_halves(2);
    let bytes = [0xA1u8, 0xB2, 0xC3, 0xD4];
    assert_eq!(
        unpack(&bytes, 8, &layout).unwrap(),
        vec![0xA, 0xB, 0x1, 0x2, 0xC, 0xD, 0x3, 0x4]
    );
    assert_eq!(
        layout.slot_table().unwrap(),
        vec![1, 3, 0, 2],
        "the layout is data: a slot permutation"
    );
}

#[test]
fn invalid_layouts_and_codes_are_typed_errors() {
    let bad = PackingLayout {
        nibble_order: NibbleOrder::LowFirst,
        permutation: TilePermutation::Explicit(vec![0, 0]),
    };
    assert!(matches!(
        pack(&[0, 0], &bad),
        Err(DequantError::InvalidLayout { .. })
    ));
    let odd = PackingLayout {
        nibble_order: NibbleOrder::LowFirst,
        permutation: TilePermutation::Explicit(vec![0, 1, 2]),
    };
    assert!(matches!(
        odd.slot_table(),
        Err(DequantError::InvalidLayout { .. })
    ));
    assert!(matches!(
        pack(&[0, 16], &PackingLayout::LOW_FIRST),
        Err(DequantError::CodeOutOfRange {
            param: "codes",
            index: 1,
            value: 16
        })
    ));
    assert!(matches!(
        pack(&[0; 5], &PackingLayout::split_halves(2)),
        Err(DequantError::NotMultiple { param: "count", .. })
    ));
    assert!(matches!(
        unpack(&[0; 3], 4, &PackingLayout::LOW_FIRST),
        Err(DequantError::WrongLength {
            param: "packed",
            expected: 2,
            actual: 3
        })
    ));
}

fn random_codes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.below(16) as u8).collect()
}

#[test]
fn bulk_dequantize_equals_element_semantics_for_every_layout_and_thread_count() {
    let mut rng = Rng(7);
    for layout in layouts() {
        for (n, k) in [(3usize, 384usize), (1, 768), (17, 128 * 3), (0, 384)] {
            if k % layout.tile_len() != 0 {
                continue;
            }
            let codes = random_codes(&mut rng, n * k);
            let packed = pack(&codes, &layout).unwrap();
            // MXFP4: include NaN, tiny and huge scales.
            let mx = Fp4DequantRecipe {
                layout: layout.clone(),
                ..Fp4DequantRecipe::mx_ocp()
            };
            let mx_scales: Vec<u8> = (0..n * k / 32)
                .map(|i| match i % 7 {
                    0 => 0xFF,
                    1 => 0,
                    2 => 254,
                    _ => 100 + rng.below(50) as u8,
                })
                .collect();
            let want: Vec<u16> = (0..n * k)
                .map(|i| mxfp4::element(codes[i], mx_scales[i / 32], &mx))
                .collect();
            for t in [1, 2, 7] {
                let got = mxfp4::dequantize(&packed, &mx_scales, n, k, &mx, Threads(t)).unwrap();
                assert_eq!(got, want, "mxfp4 {layout:?} n={n} k={k} threads={t}");
            }
            // NVFP4 in every order, BF16 and F16.
            for order in ScaleOrder::ALL {
                for output in [HalfType::Bf16, HalfType::F16] {
                    let nv = Fp4DequantRecipe {
                        layout: layout.clone(),
                        order,
                        output,
                        rounding: Rounding::RNA,
                        ..Fp4DequantRecipe::vllm_nvfp4()
                    };
                    let scales: Vec<u8> = (0..n * k / 16).map(|_| rng.below(256) as u8).collect();
                    let g = 0.013_f32;
                    let want: Vec<u16> = (0..n * k)
                        .map(|i| nvfp4::element(codes[i], scales[i / 16], g, &nv))
                        .collect();
                    for t in [1, 2, 7] {
                        let got =
                            nvfp4::dequantize(&packed, &scales, g, n, k, &nv, Threads(t)).unwrap();
                        assert_eq!(got, want, "nvfp4 {order:?} {layout:?} threads={t}");
                    }
                }
            }
        }
    }
}

#[test]
fn bulk_dequantize_portable_paths_equal_element_semantics() {
    // Group sizes that are not multiples of 16 and explicit permutations take the portable
    // (non-SIMD) paths; identity and split-halves layouts with groups of 16/32 take the SIMD
    // path on x86_64. All must equal the element semantics.
    let mut rng = Rng(11);
    for group in [2usize, 8, 24, 16, 32] {
        for layout in layouts() {
            let k = 2 * 3 * 8 * 16 * 4; // divisible by every group and tile here
            if k % layout.tile_len() != 0 || k % group != 0 {
                continue;
            }
            let n = 3;
            let codes = random_codes(&mut rng, n * k);
            let packed = pack(&codes, &layout).unwrap();
            let r = Fp4DequantRecipe {
                group_size: group,
                layout: layout.clone(),
                ..Fp4DequantRecipe::ascend_qingcheng_w4a16()
            };
            let scales: Vec<u8> = (0..n * k / group).map(|_| rng.below(256) as u8).collect();
            let want: Vec<u16> = (0..n * k)
                .map(|i| nvfp4::element(codes[i], scales[i / group], 3.0e-3, &r))
                .collect();
            for t in [1, 2] {
                let got =
                    nvfp4::dequantize(&packed, &scales, 3.0e-3, n, k, &r, Threads(t)).unwrap();
                assert_eq!(got, want, "group {group} {layout:?}");
            }
        }
    }
}

#[test]
fn large_tensor_bulk_dequantize_is_identical_across_thread_counts() {
    // Several parallel chunks (64 Ki elements each).
    let (n, k) = (64usize, 4096usize);
    let mut rng = Rng(99);
    let packed: Vec<u8> = (0..n * k / 2).map(|_| rng.next_u64() as u8).collect();
    let scales: Vec<u8> = (0..n * k / 16).map(|_| rng.below(0x7F) as u8).collect();
    let r = Fp4DequantRecipe::ascend_qingcheng_fp4_dequant();
    let one = nvfp4::dequantize(&packed, &scales, 0.5, n, k, &r, Threads(1)).unwrap();
    for t in [2, 7] {
        assert_eq!(
            nvfp4::dequantize(&packed, &scales, 0.5, n, k, &r, Threads(t)).unwrap(),
            one
        );
    }
}

#[test]
fn bad_shapes_give_typed_errors_naming_the_parameter() {
    let r = Fp4DequantRecipe::mx_ocp();
    let t = Threads(2);
    // k not a multiple of the group size.
    assert_eq!(
        mxfp4::dequantize(&[0; 24], &[0; 2], 2, 24, &r, t),
        Err(DequantError::NotMultiple {
            param: "k",
            value: 24,
            multiple_of: 32,
            what: "group size"
        })
    );
    // Wrong packed size.
    assert_eq!(
        mxfp4::dequantize(&[0; 31], &[0; 2], 2, 32, &r, t),
        Err(DequantError::WrongLength {
            param: "packed",
            expected: 32,
            actual: 31
        })
    );
    // Wrong scale length.
    assert_eq!(
        mxfp4::dequantize(&[0; 32], &[0; 3], 2, 32, &r, t),
        Err(DequantError::WrongLength {
            param: "scales",
            expected: 2,
            actual: 3
        })
    );
    let nv = Fp4DequantRecipe::vllm_nvfp4();
    assert_eq!(
        nvfp4::dequantize(&[0; 16], &[0; 1], 1.0, 1, 32, &nv, t),
        Err(DequantError::WrongLength {
            param: "block_scales",
            expected: 2,
            actual: 1
        })
    );
    // Output buffer of the wrong length.
    let mut out = vec![0u16; 31];
    assert_eq!(
        nvfp4::dequantize_into(&[0; 16], &[0; 2], 1.0, 1, 32, &nv, t, &mut out),
        Err(DequantError::WrongLength {
            param: "out",
            expected: 32,
            actual: 31
        })
    );
    // Shape overflow.
    assert_eq!(
        mxfp4::dequantize(&[], &[], usize::MAX, 64, &r, t),
        Err(DequantError::SizeOverflow { param: "n * k" })
    );
    // A layout tile that does not divide k.
    let q = Fp4DequantRecipe::ascend_qingcheng_fp4_dequant(); // tile 32
    assert!(matches!(
        nvfp4::dequantize(&[0; 8], &[0; 1], 1.0, 1, 16, &q, t),
        Err(DequantError::NotMultiple {
            param: "k",
            what: "layout tile length",
            ..
        })
    ));
    // A bad recipe.
    let bad = Fp4DequantRecipe {
        group_size: 0,
        ..r.clone()
    };
    assert!(matches!(
        mxfp4::dequantize(&[], &[], 0, 0, &bad, t),
        Err(DequantError::InvalidRecipe {
            field: "group_size",
            ..
        })
    ));
    // Messages name the parameter.
    let e = mxfp4::dequantize(&[0; 31], &[0; 2], 2, 32, &r, t).unwrap_err();
    assert!(e.to_string().contains("`packed`"), "{e}");
}

#[test]
fn every_preset_name_resolves_and_validates() {
    for name in PRESET_NAMES {
        let r = Fp4DequantRecipe::preset(name).unwrap_or_else(|| panic!("{name}"));
        r.validate().unwrap();
    }
    assert!(Fp4DequantRecipe::preset("nope").is_none());
    let v = Fp4DequantRecipe::preset("vllm_nvfp4").unwrap();
    assert_eq!((v.group_size, v.order), (16, ScaleOrder::CombinedScaleF32));
    let q = Fp4DequantRecipe::preset("ascend_qingcheng_fp4_dequant").unwrap();
    assert_eq!(q.rounding, Rounding::RNA);
    // As the kernel source reads (docs/ascend.md): order B, bit-placed E4M3 scale (0x7F is
    // 480), split halves of one 16-byte scale group.
    assert_eq!(q.order, ScaleOrder::CombinedScaleF32);
    assert_eq!(
        q.scale_decode,
        conform_reference::dequant::recipe::ScaleDecode::E4m3NanAsFinite
    );
    assert_eq!(q.layout, PackingLayout::split_halves(16));
    assert_eq!(Fp4DequantRecipe::preset("mx_ocp").unwrap().group_size, 32);
    let w = Fp4DequantRecipe::preset("ascend_qingcheng_w4a16").unwrap();
    assert_eq!(w.order, ScaleOrder::CombinedScaleBf16);
}
