//! Rendering a request with variables into the bytes each protocol sends.
use http::header::{HOST, HeaderValue};
use shared::plan::{Data, Extraction, Feeder, FeederMode, RequestSpec, Setup};

use super::*;

fn vars() -> Vars {
    let users =
        Feeder::try_new("users", FeederMode::Shard, vec!["user".into(), "pw".into()]).unwrap();
    let req = RequestSpec::try_new("POST", "http://127.0.0.1/login", vec![], vec![]).unwrap();
    let setup = Setup::new(
        req,
        vec![Extraction::parse("token", "json:/token").unwrap()],
    );
    Vars::of(&Data::try_new(vec![users], Some(setup)).unwrap())
}

fn recipe(path: &str, headers: &[(&'static str, &str)], body: &str) -> Option<Recipe> {
    let mut h = HeaderMap::new();
    h.insert(HOST, HeaderValue::from_static("127.0.0.1:8080"));
    for (n, v) in headers {
        h.append(*n, HeaderValue::from_str(v).unwrap());
    }
    Recipe::compile(
        &Method::POST,
        "http",
        "127.0.0.1:8080",
        path,
        &h,
        body.as_bytes(),
        &vars(),
    )
    .unwrap()
}

fn fill(user: &str, pw: &str) -> Fill {
    Fill {
        rows: vec![Some(Row::of(&[user.as_bytes(), pw.as_bytes()]))],
        counter: 41,
        seed: 7,
    }
}

#[test]
fn variables_from_a_row_and_the_setup_fill_path_headers_and_body() {
    let v = vars();
    assert_eq!(v.names, ["user", "pw", "token"]);
    assert_eq!(v.sources[2], Source::Extracted(0));
    let r = recipe(
        "/u/${user}?n=${counter()}",
        &[
            ("authorization", "Bearer ${token}"),
            ("content-length", "3"),
        ],
        "{\"user\":\"${user}\",\"pw\":\"${pw}\"}",
    )
    .unwrap();
    assert_eq!(r.feeders, [0]);
    let (mut buf, mut spans) = (Vec::new(), Spans::default());
    r.render(
        &v,
        &fill("ann", "pässword"),
        &[b"tok-1".to_vec()],
        &mut buf,
        &mut spans,
    )
    .unwrap();
    let part = |range: &Range<usize>| String::from_utf8(buf[range.clone()].to_vec()).unwrap();
    assert_eq!(part(&spans.path), "/u/ann?n=41");
    // Host, then the user's, whose Content-Length was the template's: the one sent is counted
    // from the rendered body.
    let names: Vec<&str> = r.header_names().map(|n| n.as_str()).collect();
    assert_eq!(names, ["host", "authorization"]);
    assert_eq!(part(&spans.headers[1]), "Bearer tok-1");
    assert_eq!(part(&spans.body), "{\"user\":\"ann\",\"pw\":\"pässword\"}");
}

#[test]
fn a_fixed_request_has_no_recipe() {
    assert!(recipe("/static", &[("x-a", "b")], "$5 and $${x}").is_none());
}

#[test]
fn a_value_that_would_break_the_request_is_refused_naming_its_variable() {
    let v = vars();
    let r = recipe("/u/${user}", &[("x-pw", "${pw}")], "").unwrap();
    let render = |f: &Fill| r.render(&v, f, &[], &mut Vec::new(), &mut Spans::default());
    let e = render(&fill("a b", "x")).unwrap_err();
    assert_eq!(
        e.0,
        "variable 'user' gives a value with a space, a line break or a byte outside visible ASCII, in the path: not sent"
    );
    let e = render(&fill("ann", "x\r\nInjected: 1")).unwrap_err();
    assert_eq!(
        e.0,
        "variable 'pw' gives a value with a line break or a control character, in header x-pw: not sent"
    );
    assert!(render(&fill("ann", "tab\tand ü")).is_ok());
    // A body takes any bytes.
    let r = recipe("/", &[], "${pw}").unwrap();
    let mut spans = Spans::default();
    assert!(
        r.render(&v, &fill("a", "x\r\ny z"), &[], &mut Vec::new(), &mut spans)
            .is_ok()
    );
}

#[test]
fn an_unknown_variable_is_refused_at_configure() {
    let mut h = HeaderMap::new();
    h.insert(HOST, HeaderValue::from_static("h"));
    let e = Recipe::compile(&Method::GET, "http", "h", "/a/${nope}", &h, b"", &vars()).unwrap_err();
    assert_eq!(
        e,
        "its URL: '${nope}' in '/a/${nope}' names no variable; the variables are: user, pw, token"
    );
}
