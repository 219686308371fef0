//! A kernel fault leaves the CUDA context unusable; the library must say so, with the kernel's
//! name and configuration, on the faulting call and on every later one. Its own test binary:
//! the fault poisons the process's context for every other test.

use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, Engine};
use ndarray::array;

/// SciPy's defaults with zero ghost cells (this binary has no `common`: the fault must be
/// its only test).
fn zero_border() -> NdOptions {
    NdOptions {
        mode: BoundaryMode::Constant(0.0).into(),
        ..Default::default()
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_fault_is_reported_then_every_later_call_names_it() {
    let engine = Engine::new().expect("a CUDA GPU");
    let x = array![1.0f32, 2.0, 3.0];
    assert_eq!(
        engine
            .ndimage()
            .correlate1d(&x, &array![1.0f32], 0, &zero_border())
            .unwrap(),
        x
    );
    match engine.inject_fault_for_testing() {
        Err(ConvError::Driver { context, .. }) => {
            assert!(
                context.contains("diagnostic_trap") && context.contains("grid (1, 1, 1)"),
                "{context}"
            );
        }
        other => panic!("expected a driver error naming the kernel, got {other:?}"),
    }
    for _ in 0..2 {
        match engine
            .ndimage()
            .correlate1d(&x, &array![1.0f32], 0, &zero_border())
        {
            Err(ConvError::ContextLost { cause }) => {
                assert!(cause.contains("diagnostic_trap"), "{cause}")
            }
            other => panic!("expected ContextLost, got {other:?}"),
        }
    }
    assert!(matches!(Engine::new(), Err(ConvError::ContextLost { .. })));
}
