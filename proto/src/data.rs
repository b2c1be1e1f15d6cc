//! The conversions of a run's data (feeders, the setup request) between `Configure` and
//! `shared::plan::Data`, validating what is received.
use shared::plan::{Data, Extraction, Feeder, FeederMode, PlanError, RequestSpec, Setup};

use crate::{ConvertError, pb};

pub(crate) fn request_to_pb(r: &RequestSpec) -> pb::RequestTemplate {
    pb::RequestTemplate {
        method: r.method().to_string(),
        url: format!("{}{}", r.url().origin(), r.url().path()),
        headers: r
            .headers()
            .iter()
            .map(|(name, value)| pb::Header {
                name: name.clone(),
                value: value.clone(),
            })
            .collect(),
        body: r.body().to_vec(),
    }
}

pub(crate) fn request_from_pb(r: &pb::RequestTemplate) -> Result<RequestSpec, PlanError> {
    RequestSpec::try_new(
        &r.method,
        &r.url,
        r.headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
        r.body.clone(),
    )
}

/// Fills `c`'s feeders and setup from `data`.
pub(crate) fn data_to_pb(data: &Data, c: &mut pb::Configure) {
    c.feeders = data
        .feeders()
        .iter()
        .map(|f| pb::Feeder {
            name: f.name().to_string(),
            mode: match f.mode() {
                FeederMode::Shard => pb::FeederMode::Shard,
                FeederMode::Copy => pb::FeederMode::Copy,
                FeederMode::Circular => pb::FeederMode::Circular,
                FeederMode::Random => pb::FeederMode::Random,
            } as i32,
            columns: f.columns().to_vec(),
        })
        .collect();
    c.setup = data.setup().map(|s| pb::SetupRequest {
        request: Some(request_to_pb(s.request())),
        extract: s
            .extract()
            .iter()
            .map(|e| pb::Header {
                name: e.var().to_string(),
                value: e.spec(),
            })
            .collect(),
    });
}

pub(crate) fn data_from_pb(c: &pb::Configure) -> Result<Data, ConvertError> {
    let feeders = c
        .feeders
        .iter()
        .map(|f| {
            let mode = match pb::FeederMode::try_from(f.mode) {
                Ok(pb::FeederMode::Shard) => FeederMode::Shard,
                Ok(pb::FeederMode::Copy) => FeederMode::Copy,
                Ok(pb::FeederMode::Circular) => FeederMode::Circular,
                Ok(pb::FeederMode::Random) => FeederMode::Random,
                Ok(pb::FeederMode::Unspecified) | Err(_) => {
                    return Err(ConvertError::Unknown {
                        what: "feeder mode",
                        value: f.mode,
                    });
                }
            };
            Ok(Feeder::try_new(&f.name, mode, f.columns.clone())?)
        })
        .collect::<Result<Vec<_>, ConvertError>>()?;
    let setup = match &c.setup {
        None => None,
        Some(s) => {
            let request = s
                .request
                .as_ref()
                .ok_or(ConvertError::Missing("the setup's request"))?;
            let extract = s
                .extract
                .iter()
                .map(|e| {
                    Extraction::parse(&e.name, &e.value)
                        .map_err(|e| PlanError::BadData(format!("setup: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(Setup::new(request_from_pb(request)?, extract))
        }
    };
    Ok(Data::try_new(feeders, setup)?)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shared::plan::{UrlOrder, Workload};

    use super::*;

    #[test]
    fn feeders_and_the_setup_travel_in_configure_and_are_checked_on_arrival() {
        let req = |url: &str| RequestSpec::try_new("POST", url, vec![], b"u=${user}".to_vec());
        let users = Feeder::try_new("users", FeederMode::Circular, vec!["user".into()]).unwrap();
        let setup = Setup::new(
            req("http://127.0.0.1:1/login").unwrap(),
            vec![Extraction::parse("token", "regex:t=(\\w+)").unwrap()],
        );
        let w = Workload::try_new(
            vec![req("http://127.0.0.1:1/a/${token}").unwrap()],
            UrlOrder::RoundRobin,
            Duration::from_secs(1),
            Duration::from_secs(1),
            false,
        )
        .unwrap()
        .with_data(Data::try_new(vec![users], Some(setup)).unwrap());
        let c = pb::Configure::from(&w);
        assert_eq!(c.feeders[0].mode, pb::FeederMode::Circular as i32);
        assert_eq!(Workload::try_from(&c).unwrap(), w);
        let mut bad = c.clone();
        bad.feeders[0].mode = 9;
        assert!(Workload::try_from(&bad).is_err());
        let mut twice = c.clone();
        twice.setup.as_mut().unwrap().extract[0].name = "user".into();
        let e = Workload::try_from(&twice).unwrap_err().to_string();
        assert!(e.contains("variable 'user' is defined twice"), "{e}");
        let mut unparsable = c;
        unparsable.setup.as_mut().unwrap().extract[0].value = "regex:(".into();
        assert!(Workload::try_from(&unparsable).is_err());
    }
}
