//! The setup request a connection runs once before its first request of the mix, and the values its
//! reply hands that connection's later requests (`${var}` of the setup's extractions). A setup that
//! fails (no reply, a status not counted as served, an extraction that finds nothing) leaves the
//! connection closed and its request unsent, in words saying so; the next request tries again.
use shared::metrics::ErrorClass;

use super::http1;
use super::render::Fill;
use super::target::{Endpoint, Setup};

/// Why a setup failed: its class (the transport's, or `other`) and words.
pub struct Failed(pub ErrorClass, pub String);

/// Runs `setup` on the fresh connection `c`: each extraction's value, in order.
pub(super) async fn run(
    setup: &Setup,
    target: &Endpoint,
    c: &mut http1::Conn,
    fill: Option<&Fill>,
) -> Result<Vec<Vec<u8>>, Failed> {
    let rendered = setup
        .template
        .rendered(target, fill, &[], false)
        .transpose()
        .map_err(|r| Failed(ErrorClass::Other, format!("the setup: {}", r.0)))?;
    let t = rendered.as_ref().unwrap_or(&setup.template);
    let (status, head, body) = c.setup(t, target.timeout).await.map_err(|class| {
        Failed(
            class,
            format!("the setup request failed ({})", class.name()),
        )
    })?;
    if !target.ok_status.contains(status) {
        return Err(Failed(
            ErrorClass::Other,
            format!("the setup request was answered {status}"),
        ));
    }
    let headers = parse_headers(&head);
    setup
        .extract
        .iter()
        .map(|e| {
            e.take(
                headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
                &body,
            )
            .ok_or_else(|| {
                Failed(
                    ErrorClass::Other,
                    format!("the setup's reply has no {} ({})", e.var(), e.spec()),
                )
            })
        })
        .collect()
}

fn parse_headers(head: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut headers = [httparse::EMPTY_HEADER; crate::response::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    if resp.parse(head).is_err() {
        return Vec::new();
    }
    resp.headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect()
}
