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
        let decoded = shared::metrics::Interval::try_from(&i);
        let encoded = shared::metrics::EncodedInterval::try_from(i);
        if let (Ok(d), Ok(e)) = (decoded, encoded) {
            let mut sums = shared::metrics::HistogramSums::default();
            sums.add(&e.hist);
            assert!(sums.to_histograms().latency == d.snapshot.hist.latency);
        }
    }
    let _ = pb::CoordinatorMessage::decode(data);
    let _ = pb::AgentMessage::decode(data);
});
