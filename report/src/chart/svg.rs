//! SVG text: numbers written short (a report's size is mostly coordinates) and paths through points.
use std::fmt;

/// A pixel coordinate to a tenth of a pixel, without a trailing `.0`: `12`, `12.5`.
#[derive(Debug, Clone, Copy)]
pub struct Px(pub f64);

impl fmt::Display for Px {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Tenths(tenths(self.0)).fmt(f)
    }
}

fn tenths(v: f64) -> i64 {
    (v * 10.0).round() as i64
}

/// A whole number of tenths, written as [`Px`] writes a coordinate.
struct Tenths(i64);

impl fmt::Display for Tenths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 10, (self.0 % 10).abs());
        if self.0 < 0 && whole == 0 {
            f.write_str("-")?;
        }
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            write!(f, "{whole}.{frac}")
        }
    }
}

/// A polyline through `points` (pixels) as path data: the first point absolute, then each step
/// from the one before (`l`, a long line's data is most of a chart), the steps taken between the
/// rounded points so they add up to them exactly. A point within half a pixel of the last one kept
/// adds nothing visible and is left out.
pub fn path(points: impl IntoIterator<Item = (f64, f64)>) -> String {
    use fmt::Write;
    let mut d = String::new();
    let mut last: Option<((f64, f64), (i64, i64))> = None;
    let mut stepped = false;
    for (x, y) in points {
        let at = (tenths(x), tenths(y));
        match last {
            None => {
                let _ = write!(d, "M{} {}", Tenths(at.0), Tenths(at.1));
            }
            Some(((lx, ly), _)) if (x - lx).abs() < 0.5 && (y - ly).abs() < 0.5 => continue,
            Some((_, from)) => {
                if !stepped {
                    d.push('l');
                    stepped = true;
                } else if at.0 >= from.0 {
                    d.push(' ');
                }
                let (dx, dy) = (at.0 - from.0, at.1 - from.1);
                let gap = if dy < 0 { "" } else { " " };
                let _ = write!(d, "{}{gap}{}", Tenths(dx), Tenths(dy));
            }
        }
        last = Some(((x, y), at));
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
            "M0 0l10 5.3 0 14.7"
        );
        assert_eq!(path([]), "");
        // Steps between rounded points: a thousand of them end where the last point is.
        let many = path((0..=1000).map(|i| (i as f64 * 0.66, 100.0 - i as f64 * 0.0704)));
        let steps: Vec<f64> = many[1..]
            .split(['l', ' '])
            .flat_map(|p| {
                let mut v = Vec::new();
                let mut rest = p;
                while let Some(i) = rest[1..].find('-') {
                    v.push(rest[..=i].parse::<f64>().unwrap());
                    rest = &rest[i + 1..];
                }
                v.push(rest.parse::<f64>().unwrap());
                v
            })
            .collect();
        let x: f64 = steps.iter().step_by(2).sum();
        let y: f64 = steps.iter().skip(1).step_by(2).sum();
        assert!(
            (x - 660.0).abs() < 1e-6 && (y - 29.6).abs() < 1e-6,
            "{x} {y}"
        );
        assert_eq!(path([(5.0, 5.0), (4.0, 3.0), (6.0, 7.0)]), "M5 5l-1-2 2 4");
    }
}
