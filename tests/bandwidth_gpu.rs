//! The SM copy kernel the benchmark measures as the SMs' memory roofline: it copies exactly,
//! whatever the length (a multiple of 4 floats), and a length it cannot copy gets a typed error
//! that leaves the engine usable.

mod common;

use common::{assert_engine_works, engine, random_vec, rng};
use conv_host::ConvError;
use rand::Rng;

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_sm_copy_copies_exactly() {
    let (mut rng, _) = rng("sm copy");
    // One quad, lengths below and across a block's 1,024 quads, and random ones.
    let mut lengths = vec![4, 4 * 1023, 4 * 1024, 4 * 1025, 4 * 3 * 1024 + 8];
    lengths.extend((0..8).map(|_| 4 * rng.random_range(1..300_000)));
    for len in lengths {
        let input = random_vec(&mut rng, len).to_vec();
        let (copy, times) = engine().time_sm_copy(&input, 2).expect("the copy runs");
        assert_eq!(times.len(), 2);
        assert!(times.iter().all(|&ms| ms > 0.0), "{times:?}");
        assert!(copy == input, "the copy of {len} floats differs");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_length_that_is_not_whole_quads_is_a_typed_error() {
    for len in [1, 5, 4099] {
        match engine().time_sm_copy(&vec![1.0; len], 1) {
            Err(ConvError::InvalidLaunch { kernel, reason }) => {
                assert_eq!(kernel, "sm_copy");
                assert!(reason.contains("multiple of 4"), "{reason}");
            }
            other => panic!("expected InvalidLaunch for {len} floats, got {other:?}"),
        }
        assert_engine_works();
    }
}
