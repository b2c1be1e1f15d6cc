//! Shipping a configure's feeder rows to the load agents: each CSV file read again as a stream and
//! its rows dealt as the feeder's mode says (every agent all of them, or each row to one agent in
//! proportion to the agents' weights), sent in chunks of at most `CHUNK` bytes (or one row), then each feeder's
//! end with the count sent. The link is ordered, so the rows are all in before the next step's
//! prepare, which an agent missing any refuses.
use std::io::BufReader;
use std::path::PathBuf;

use proto::pb;
use proto::pb::coordinator_message::Kind as Down;
use shared::plan::{Data, Dealer, Records, encode_row};

use super::{Fleet, FleetError};

/// The most row bytes one message carries.
pub const CHUNK: usize = 256 * 1024;

/// Sends every feeder's rows to the agents `who` (load agents), weighted by `weights`, unless each
/// holds them already: an agent keeps the rows of a configure of the same feeders (side by side,
/// every target's configure is the same plan's), and a shard feeder is dealt once for the run. If
/// any agent lacks them (a new session), all are sent them afresh, so a shard is dealt once over the
/// fleet as it is.
pub async fn ship(
    fleet: &mut Fleet,
    who: &[usize],
    weights: &[u64],
    data: &Data,
    files: &[PathBuf],
) -> Result<(), FleetError> {
    if who.iter().all(|&i| fleet.fed(i) == data.feeders()) {
        return Ok(());
    }
    deal(fleet, who, weights, data, files).await?;
    for &i in who {
        fleet.set_fed(i, data.feeders());
    }
    Ok(())
}

async fn deal(
    fleet: &Fleet,
    who: &[usize],
    weights: &[u64],
    data: &Data,
    files: &[PathBuf],
) -> Result<(), FleetError> {
    for (k, (feeder, path)) in data.feeders().iter().zip(files).enumerate() {
        let k = k as u32;
        let bad = |why: String| {
            FleetError::Setup(format!(
                "feeder {}: {}: {why}",
                feeder.name(),
                path.display()
            ))
        };
        let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let mut records =
            Records::new(BufReader::with_capacity(CHUNK, file)).map_err(|e| bad(e.to_string()))?;
        if records.names() != feeder.columns() {
            return Err(bad("its header changed since the run began".into()));
        }
        // Weights of zero (none given, no cores announced) deal evenly.
        let mut dealer = Dealer::new(weights).or_else(|| Dealer::new(&vec![1; who.len()]));
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); who.len()];
        let mut sent = vec![0u64; who.len()];
        let mut row = Vec::new();
        while let Some(fields) = records.next_record().map_err(|e| bad(e.to_string()))? {
            row.clear();
            encode_row(&fields, &mut row);
            let to: Vec<usize> = if feeder.mode().every_agent_all() {
                (0..who.len()).collect()
            } else {
                vec![dealer.as_mut().map_or(0, Dealer::next_party)]
            };
            for a in to {
                // A message stays within CHUNK, or is one row (at most MAX_ROW, checked before
                // the run).
                if !bufs[a].is_empty() && bufs[a].len() + row.len() > CHUNK {
                    send(fleet, who[a], k, std::mem::take(&mut bufs[a])).await?;
                }
                bufs[a].extend_from_slice(&row);
                sent[a] += 1;
            }
        }
        for (a, &i) in who.iter().enumerate() {
            if !bufs[a].is_empty() {
                send(fleet, i, k, std::mem::take(&mut bufs[a])).await?;
            }
            let end = Down::FeedEnd(pb::FeedEnd {
                feeder: k,
                rows: sent[a],
            });
            fleet
                .send(i, end)
                .await
                .map_err(|why| fleet.lost(i, "receiving feeder rows", why))?;
        }
    }
    Ok(())
}

async fn send(fleet: &Fleet, i: usize, feeder: u32, rows: Vec<u8>) -> Result<(), FleetError> {
    fleet
        .send(i, Down::FeedRows(pb::FeedRows { feeder, rows }))
        .await
        .map_err(|why| fleet.lost(i, "receiving feeder rows", why))
}
