//! The control protocol: generated messages and service, plus conversions to `shared` types.
pub mod pb {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("stampede.v1");
}
