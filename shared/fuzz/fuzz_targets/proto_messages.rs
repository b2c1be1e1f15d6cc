//! Protobuf from a peer: decoding and the conversions to domain types never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use prost::Message;
use proto::pb;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = pb::PrepareStep::decode(data) {
        let _ = shared::plan::StepShare::try_from(&p);
    }
    if let Ok(c) = pb::Configure::decode(data) {
        let _ = shared::plan::Workload::try_from(&c);
    }
    if let Ok(i) = pb::IntervalReport::decode(data) {
        let _ = shared::metrics::Interval::try_from(&i);
    }
    let _ = pb::CoordinatorMessage::decode(data);
    let _ = pb::AgentMessage::decode(data);
});
