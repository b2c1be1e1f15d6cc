//! A request with variables, rendered into the bytes each protocol sends.
use shared::plan::{Data, Feeder, FeederMode, RequestSpec, Workload};

use super::*;
use crate::feeder::Row;

#[tokio::test]
async fn a_rendered_request_is_serialized_as_a_fixed_one_with_its_own_length() {
    let users = Feeder::try_new("users", FeederMode::Copy, vec!["user".into()]).unwrap();
    let r = RequestSpec::try_new(
        "POST",
        "http://127.0.0.1:9/u/${user}",
        vec![("X-User".into(), "${user}".into())],
        b"{\"user\":\"${user}\"}".to_vec(),
    )
    .unwrap();
    let fixed = RequestSpec::try_new("GET", "http://127.0.0.1:9/static", vec![], vec![]).unwrap();
    let w = Workload::try_new(
        vec![r, fixed],
        shared::plan::UrlOrder::RoundRobin,
        Duration::from_secs(1),
        Duration::from_secs(1),
        false,
    )
    .unwrap()
    .with_data(Data::try_new(vec![users], None).unwrap());
    let target = Endpoint::prepare(&w).await.unwrap();
    assert!(
        target.templates[1].recipe.is_none(),
        "a fixed request stays its bytes"
    );
    let t = &target.templates[0];
    let fill = Fill {
        rows: vec![Some(Row::of(&[b"ann-marie"]))],
        counter: 0,
        seed: 1,
    };
    let sent = t.rendered(&target, Some(&fill), &[]).unwrap().unwrap();
    let wire = String::from_utf8(sent.wire.to_vec()).unwrap();
    let body = "{\"user\":\"ann-marie\"}";
    assert!(wire.starts_with("POST /u/ann-marie HTTP/1.1\r\n"), "{wire}");
    assert!(wire.contains("x-user: ann-marie\r\n"), "{wire}");
    assert!(
        wire.contains(&format!("content-length: {}\r\n", body.len())),
        "{wire}"
    );
    assert!(wire.ends_with(&format!("\r\n\r\n{body}")), "{wire}");
    assert_eq!(&sent.body[..], body.as_bytes());
    // HTTP/2's block carries the same path and header (HPACK literals, nothing indexed).
    let has = |s: &[u8]| sent.h2_block.windows(s.len()).any(|w| w == s);
    assert!(has(b"/u/ann-marie") && has(b"x-user") && has(b"ann-marie"));
    assert!(sent.recipe.is_none());
}
