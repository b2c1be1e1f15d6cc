//! SVG text: numbers written short (a report's size is mostly coordinates) and paths through points.
use std::fmt;

/// A pixel coordinate to a tenth of a pixel, without a trailing `.0`: `12`, `12.5`.
#[derive(Debug, Clone, Copy)]
pub struct Px(pub f64);

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = (self.0 * 10.0).round() as i64;
        let (whole, frac) = (tenths / 10, (tenths % 10).abs());
        if tenths < 0 && whole == 0 {
            f.write_str("-")?;
        }
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            write!(f, "{whole}.{frac}")
        }
    }
}

/// A polyline through `points` (pixels) as path data; a point within half a pixel of the last one
/// kept adds nothing visible and is left out.
pub fn path(points: impl IntoIterator<Item = (f64, f64)>) -> String {
    let mut d = String::new();
    let mut last: Option<(f64, f64)> = None;
    for (x, y) in points {
        if let Some((lx, ly)) = last
            && (x - lx).abs() < 0.5
            && (y - ly).abs() < 0.5
        {
            continue;
        }
        let cmd = if last.is_none() { 'M' } else { 'L' };
        use fmt::Write;
        let _ = write!(d, "{cmd}{} {}", Px(x), Px(y));
        last = Some((x, y));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_are_short() {
        let s: Vec<String> = [12.0, 12.54, -0.04, -0.25, -3.5, 0.0]
            .iter()
            .map(|v| Px(*v).to_string())
            .collect();
        assert_eq!(s, ["12", "12.5", "0", "-0.3", "-3.5", "0"]);
    }

    #[test]
    fn a_path_leaves_out_what_cannot_be_seen() {
        assert_eq!(
            path([(0.0, 0.0), (0.2, 0.1), (10.0, 5.25), (10.0, 20.0)]),
            "M0 0L10 5.3L10 20"
        );
        assert_eq!(path([]), "");
    }
}
