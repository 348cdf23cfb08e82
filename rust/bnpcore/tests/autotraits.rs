//! Every public type can be shared across threads (the Python bindings run the core inside a
//! rayon pool with the GIL released, and later models hold these types in parallel loops).

use bnpcore::alloc::{Alloc, SegmentWeights};
use bnpcore::local::{Dest, LocalOptions, LocalOutput, MoveOutputs, Proposal, ProposalStats};
use bnpcore::obs::{Bern, DiagGauss, FeatureMap, Gauss, LogLikTable, Mult, Obs, ObsModel};
use bnpcore::Error;

fn send_sync<T: Send + Sync>() {}
fn unpin<T: Unpin>() {}

#[test]
fn public_types_are_send_and_sync() {
    send_sync::<Obs>();
    send_sync::<Gauss>();
    send_sync::<DiagGauss>();
    send_sync::<Mult>();
    send_sync::<Bern>();
    send_sync::<LogLikTable>();
    send_sync::<FeatureMap>();
    send_sync::<Dest>();
    send_sync::<Proposal>();
    send_sync::<ProposalStats>();
    send_sync::<LocalOptions<'static>>();
    send_sync::<LocalOutput>();
    send_sync::<MoveOutputs>();
    send_sync::<Alloc>();
    send_sync::<SegmentWeights>();
    send_sync::<Error>();
    // posterior and divergence-preparation types, reachable through the trait
    send_sync::<<Gauss as ObsModel>::Post>();
    send_sync::<<DiagGauss as ObsModel>::Post>();
    send_sync::<<Mult as ObsModel>::Post>();
    send_sync::<<Bern as ObsModel>::Post>();
    send_sync::<<Gauss as ObsModel>::DivPrep>();
    send_sync::<<Mult as ObsModel>::DivPrep>();
    unpin::<Obs>();
    unpin::<LocalOutput>();
}

#[test]
fn error_is_a_std_error_with_a_message_naming_the_argument() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let e = Error::param("gamma", "must be > 0");
    is_error(&e);
    assert!(e.to_string().contains("`gamma`"));
    let e = Error::shape("S", "(3, 4)", "(3, 5)");
    assert!(e.to_string().contains("`S`") && e.to_string().contains("(3, 5)"));
}
