//! `--live`: the address the run is served on as it happens, beyond loopback only with the fleet's
//! token, and the baseline drawn under its charts, read before any load.
use super::{ConfigError, Settings, parse_pause};

/// `--live ADDR`, `--live-keep`, `--baseline`: beyond loopback only with the fleet's token (which
/// the page then asks of every request); the baseline read now, so a bad one stops the run before
/// any load.
pub fn live(
    s: &Settings,
    token: Option<&str>,
) -> Result<Option<crate::live::LiveSpec>, ConfigError> {
    let args = &s.given;
    let Some(addr) = args.live else {
        return Ok(None);
    };
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(ConfigError::Exposed(format!(
            "refusing to serve the live page on {addr} without a token: add --token-file FILE (or set \
             STAMPEDE_TOKEN), or keep it on loopback (--live 127.0.0.1:{})",
            addr.port()
        )));
    }
    let keep = args
        .live_keep
        .as_ref()
        .map(|k| parse_pause("--live-keep", &k.0))
        .transpose()?
        .unwrap_or_default();
    let baseline = match &args.baseline {
        Some(path) => {
            let file = results::run_file::path_of(path);
            let run = results::run_file::RunFile::read(&file)
                .map_err(|e| ConfigError::File(format!("--baseline {}: {e}", path.display())))?;
            Some(Box::new(run))
        }
        None => None,
    };
    Ok(Some(crate::live::LiveSpec {
        addr,
        keep,
        baseline,
        // Asked of the page's requests only beyond loopback: on loopback the page is the user's own.
        // Not the fleet's token itself: a viewer may read the run, not command its agents.
        token: token
            .filter(|_| !addr.ip().is_loopback())
            .map(crate::live::view_token),
    }))
}
