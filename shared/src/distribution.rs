//! A step's latency percentile distribution, as HdrHistogram prints it (`.hgrm`): what the report's
//! percentile chart draws and what HdrHistogram's plotFiles and gnuplot scripts read.

/// One step's merged latency distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// The step, counted from 1.
    pub step: u32,
    /// Values recorded.
    pub total: u64,
    pub mean_ms: f64,
    pub max_ms: f64,
    /// Rising quantiles, as the `.hgrm` rows list them.
    pub points: Vec<Point>,
}

/// One row of a `.hgrm`: the value at `quantile` and the count of values up to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub value_ms: f64,
    /// In [0, 1].
    pub quantile: f64,
    pub count: u64,
}
