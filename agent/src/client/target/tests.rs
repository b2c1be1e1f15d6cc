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
    let mut target = Endpoint::prepare(&w).await.unwrap();
    assert!(
        target.templates[1].recipe.is_none(),
        "a fixed request stays its bytes"
    );
    let t = &target.templates[0].clone();
    let fill = Fill {
        rows: vec![Some(Row::of(&[b"ann-marie"]))],
        counter: 0,
        seed: 1,
    };
    let sent = t
        .rendered(&target, Some(&fill), &[], false)
        .unwrap()
        .unwrap();
    let wire = String::from_utf8(sent.wire.to_vec()).unwrap();
    let body = "{\"user\":\"ann-marie\"}";
    // As a fixed request of the same text is written.
    let fixed = RequestSpec::try_new(
        "POST",
        "http://127.0.0.1:9/u/ann-marie",
        vec![("X-User".into(), "ann-marie".into())],
        body.as_bytes().to_vec(),
    )
    .unwrap();
    let ua = format!("stampede/{}", shared::VERSION);
    let same = Template::compile(&fixed, 0, "127.0.0.1:9", &ua, &Vars::default()).unwrap();
    assert_eq!(wire, String::from_utf8(same.wire.to_vec()).unwrap());
    assert!(
        wire.contains(&format!("content-length: {}\r\n", body.len())),
        "{wire}"
    );
    assert_eq!(&sent.body[..], body.as_bytes());
    assert!(sent.recipe.is_none());
    // The last call on its connection asks the server to close, as a fixed one does.
    let last = t
        .rendered(&target, Some(&fill), &[], true)
        .unwrap()
        .unwrap();
    assert_eq!(last.last, same.last);
    // HTTP/2's block is the one a fixed request of the same text has.
    target.http2 = true;
    let t = &target.templates[0].clone();
    let sent = t
        .rendered(&target, Some(&fill), &[], false)
        .unwrap()
        .unwrap();
    assert_eq!(sent.h2_block, same.h2_block);
    assert_eq!(&sent.body[..], body.as_bytes());
}
