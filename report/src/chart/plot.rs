//! The SVG of one chart: its shading, then per y scale the grid, axes and everything plotted, and
//! the readout the page's script writes into.
use std::collections::BTreeMap;
use std::fmt::Write;

use results::verdict::Verdict;

use super::axis::{Fitted, Scale, Unit, short};
use super::svg::{Px, path};
use super::{Chart, Dash, KneeLine, Marker, StackKind, Titles};
use crate::escape::html;

/// Room for the tick labels and axis names around the plot.
const LEFT: f64 = 66.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 36.0;
const MARKER_R: f64 = 2.8;

/// The plot box, in SVG units.
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

pub fn svg(c: &Chart, titles: &mut Titles) -> String {
    let (w, h) = c.size;
    let f = Frame {
        left: LEFT,
        right: w - RIGHT,
        top: TOP,
        bottom: h - BOTTOM,
    };
    let x = Fitted::new(&c.x, xs(c), f.left, f.right);
    let mut out = format!(
        "<svg viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\" data-xu=\"{}\" data-yu=\"{}\" data-x=\"{}\">\n",
        Px(w),
        Px(h),
        html(&c.title),
        c.x.unit.code(),
        c.y.unit.code(),
        x.mapping()
    );
    out.push_str(&patterns(c));
    out.push_str(&shading(c, &x, &f, titles));
    let mut scales = vec![(c.y.scale, "")];
    if let Some(other) = c.switch_scale.filter(|s| *s != c.y.scale) {
        scales.push((other, " off"));
    }
    for (scale, off) in scales {
        let axis = c.y.with_scale(scale);
        // An axis told not to start at zero keeps that on its other scale; a log axis does not
        // start there by its nature, and its linear switch does.
        let told = !c.y.from_zero && c.y.scale == Scale::Linear;
        let axis = if c.y.range.is_some() || told {
            super::Axis {
                from_zero: c.y.from_zero && scale == Scale::Linear,
                ..axis
            }
        } else {
            axis
        };
        let y = Fitted::new(&axis, ys(c), f.bottom, f.top);
        let name = if scale == Scale::Linear { "lin" } else { "log" };
        let _ = writeln!(
            out,
            "<g class=\"plot {name}{off}\" data-y=\"{}\">",
            y.mapping()
        );
        // A log axis says so in its title: its gridlines are not evenly spaced values.
        let y_label = match scale {
            Scale::Log => format!("{}, log scale", c.y.label),
            Scale::Linear | Scale::Percentile => c.y.label.clone(),
        };
        out.push_str(&grid(c, &y_label, &x, &y, &f));
        out.push_str(&plotted(c, &x, &y, &f));
        out.push_str("</g>\n");
    }
    let _ = writeln!(
        out,
        "<text class=\"ro\" x=\"{}\" y=\"11\" text-anchor=\"end\"></text>\n</svg>",
        Px(f.right)
    );
    out
}

/// Every x the chart draws at.
fn xs(c: &Chart) -> impl Iterator<Item = f64> + '_ {
    let series = c.series.iter().flat_map(|s| s.marks.iter().map(|m| m.x));
    let bands = c.bands.iter().flat_map(|b| b.points.iter().map(|p| p.0));
    let layers = c
        .stacks
        .iter()
        .flat_map(|s| s.layers.iter().flat_map(|l| l.values.iter().map(|v| v.0)));
    let boundaries = c
        .boundaries
        .iter()
        .map(|b| b.x)
        .chain(c.knee.as_ref().map(|k| k.x));
    series.chain(bands).chain(layers).chain(boundaries)
}

/// Every y the chart draws at: a stack's tops, and with the ideal line, the x values too (y = x
/// must be on the chart to be read against).
pub(super) fn ys(c: &Chart) -> impl Iterator<Item = f64> + '_ {
    let series = c.series.iter().flat_map(|s| s.marks.iter().map(|m| m.y));
    let bands = c
        .bands
        .iter()
        .flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2]));
    let tops = c
        .stacks
        .iter()
        .flat_map(|s| stacked(s).into_values().flatten());
    let ideal = c
        .ideal
        .iter()
        .flat_map(|_| c.series.iter().flat_map(|s| s.marks.iter().map(|m| m.x)));
    let levels = c.levels.iter().map(|l| l.y);
    series.chain(bands).chain(tops).chain(ideal).chain(levels)
}

/// A stack's running totals at each x (by its bits, so equal floats meet), one per layer.
fn stacked(s: &super::Stack) -> BTreeMap<u64, Vec<f64>> {
    let mut tops: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for l in &s.layers {
        for (x, v) in &l.values {
            let col = tops.entry(x.to_bits()).or_default();
            let below = col.last().copied().unwrap_or(0.0);
            col.push(below + v.max(0.0));
        }
    }
    tops
}

/// The hatch of each hatched layer, in its colour; ids carry the chart's name, unique on a page.
fn patterns(c: &Chart) -> String {
    let mut out = String::new();
    let mut i = c.bands.len();
    for s in &c.stacks {
        for l in &s.layers {
            if l.hatched {
                let _ = write!(
                    out,
                    "<pattern id=\"h-{}-{i}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fff\"/><rect width=\"3\" height=\"6\" fill=\"{}\"/></pattern>",
                    html(&c.name),
                    l.colour.0
                );
            }
            i += 1;
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("<defs>{out}</defs>\n")
    }
}

/// The steps the generator did not fully trust, shaded behind everything; a valid step is the
/// background itself.
fn shading(c: &Chart, x: &Fitted, f: &Frame, titles: &mut Titles) -> String {
    let mut out = String::new();
    for s in c.shades.iter().filter(|s| s.verdict != Verdict::Valid) {
        let a = x.px(s.from).max(f.left);
        let b = x.px(s.to).min(f.right);
        if b <= a {
            continue;
        }
        let _ = write!(
            out,
            "<rect class=\"t-{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"",
            s.verdict.name(),
            Px(a),
            Px(f.top),
            Px(b - a),
            Px(f.bottom - f.top),
        );
        match titles.seen(&s.title) {
            Ok(first) => {
                let _ = write!(
                    out,
                    " id=\"shade-{first}\"><title>{}</title></rect>",
                    html(&s.title)
                );
            }
            Err(earlier) => {
                let _ = write!(out, " data-t=\"{earlier}\"/>");
            }
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("<g class=\"shade\">{out}</g>\n")
    }
}

/// Grid lines, ticks and their labels, the axes' names.
fn grid(c: &Chart, y_label: &str, x: &Fitted, y: &Fitted, f: &Frame) -> String {
    let mut out = String::new();
    for (v, label) in y.ticks() {
        let py = y.px(v);
        let _ = write!(
            out,
            "<path class=\"grid\" d=\"M{} {}H{}\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            Px(f.left),
            Px(py),
            Px(f.right),
            Px(f.left - 5.0),
            Px(py + 3.5),
            html(&label)
        );
    }
    for (v, label) in x.ticks() {
        let px = x.px(v);
        // A label at the right end would stand half outside the drawing.
        let anchor = if px > f.right - 3.0 * label.chars().count() as f64 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            out,
            "<path class=\"ax\" d=\"M{} {}v4\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            Px(px),
            Px(f.bottom),
            Px(px),
            Px(f.bottom + 15.0),
            html(&label)
        );
    }
    let _ = write!(
        out,
        "\n<path class=\"ax\" d=\"M{} {}V{}H{}\"/>\n<text class=\"lbl\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text class=\"lbl\" transform=\"translate(12 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        Px(f.left),
        Px(f.top),
        Px(f.bottom),
        Px(f.right),
        Px((f.left + f.right) / 2.0),
        Px(f.bottom + 31.0),
        html(&c.x.label),
        Px((f.top + f.bottom) / 2.0),
        html(y_label)
    );
    out
}

/// A data value as the page's readout takes it: short, a quantile with all its nines.
fn datum(v: f64, unit: Unit) -> String {
    if unit == Unit::Quantile {
        super::axis::trimmed(&format!("{v:.7}"))
    } else {
        short(v)
    }
}

/// Bands, stacks, boundaries, the ideal line and the series, numbered as the legend numbers them.
fn plotted(c: &Chart, x: &Fitted, y: &Fitted, f: &Frame) -> String {
    let mut out = String::new();
    let mut key = 0;
    for b in &c.bands {
        let mut points = b.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Several ranges at one x (a search probes a rate again) are one range: the lowest low
        // to the highest high, not an outline that doubles back on itself.
        points.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 = kept.1.min(next.1);
                kept.2 = kept.2.max(next.2);
            }
            same
        });
        let upper = points.iter().map(|p| (x.px(p.0), y.px(p.2)));
        let lower = points.iter().rev().map(|p| (x.px(p.0), y.px(p.1)));
        let _ = writeln!(
            out,
            "<g class=\"band\" data-s=\"{key}\" style=\"color:{}\"><path d=\"{}Z\"/></g>",
            b.colour.0,
            path(upper.chain(lower))
        );
        key += 1;
    }
    for s in &c.stacks {
        out.push_str(&stack(c, s, &mut key, x, y, f));
    }
    // One path for every boundary: a long run has a hundred.
    let lines: String = c
        .boundaries
        .iter()
        .map(|b| format!("M{} {}V{}", Px(x.px(b.x)), Px(f.top), Px(f.bottom)))
        .collect();
    if !lines.is_empty() {
        let _ = write!(out, "<path class=\"bnd\" d=\"{lines}\"/>");
    }
    out.push_str(&boundary_labels(c, x, f));
    if let Some(k) = &c.knee {
        out.push_str(&knee(k, x, f));
    }
    out.push_str(&levels(c, y, f));
    for s in &c.series {
        let dash = match s.dash {
            Dash::Solid => "",
            Dash::Dashed => " dash",
            Dash::Dotted => " dot",
        };
        let _ = write!(
            out,
            "<g class=\"s{dash}\" data-s=\"{key}\" data-n=\"{}\" style=\"color:{}\">",
            html(&s.name),
            s.colour.0
        );
        if s.joined {
            // Joined along x, whatever order the steps ran in (a ramp down, steps given
            // unsorted); points at one x from the lowest up, so the line does not zigzag there.
            let mut along: Vec<&super::Mark> = s.marks.iter().collect();
            along.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
            let d = path(along.iter().map(|m| (x.px(m.x), y.px(m.y))));
            // Unmarked points are read from the line's own vertices.
            let class = if s.marks.iter().any(|m| m.marker == Marker::None) {
                " class=\"ln\""
            } else {
                ""
            };
            let _ = write!(out, "<path{class} d=\"{d}\"/>");
        }
        if s.titles.is_empty() {
            for marker in Marker::SHAPES {
                let marks: Vec<&super::Mark> =
                    s.marks.iter().filter(|m| m.marker == marker).collect();
                out.push_str(&markers(c, &marks, marker, x, y));
            }
        } else {
            // A path a point, so each carries its own hover text.
            for (m, title) in s.marks.iter().zip(&s.titles) {
                let one = markers(c, &[m], m.marker, x, y);
                if let Some(open) = one.strip_suffix("/>") {
                    let _ = write!(out, "{open}><title>{}</title></path>", html(title));
                }
            }
        }
        out.push_str("</g>\n");
        key += 1;
    }
    if c.ideal.is_some() {
        let (x0, x1) = x.ends();
        let (y0, y1) = y.ends();
        let (a, b) = (x0.max(y0), x1.min(y1));
        if b > a {
            let _ = writeln!(
                out,
                "<g data-s=\"{key}\"><path class=\"ideal\" d=\"{}\"/></g>",
                path([(x.px(a), y.px(a)), (x.px(b), y.px(b))])
            );
        }
    }
    out
}

/// A series' markers of one kind as one path (a page of many steps had a thousand circles): each
/// point is a subpath from its centre, a dot the round cap draws (`M x yh0`) or a ring of two arcs
/// (a lower bound); `data-v` holds their values, one "X Y" per `M`, in order, for the readout.
fn markers(c: &Chart, marks: &[&super::Mark], marker: Marker, x: &Fitted, y: &Fitted) -> String {
    if marks.is_empty() {
        return String::new();
    }
    if marker == Marker::None {
        return String::new();
    }
    // Each shape drawn from the point's centre, in relative steps only: the `M x y` before it is
    // where the point is, for the readout and the browser test alike.
    let shape = match marker {
        Marker::Hollow => format!(
            "m-{r} 0a{r} {r} 0 1 0 {d} 0a{r} {r} 0 1 0-{d} 0",
            r = MARKER_R,
            d = 2.0 * MARKER_R
        ),
        Marker::Cross => "m-3-3l6 6m0-6l-6 6".to_string(),
        Marker::Square => "m-3-3h6v6h-6z".to_string(),
        Marker::Diamond => "m0-3.8l3.8 3.8-3.8 3.8-3.8-3.8z".to_string(),
        Marker::Triangle => "m0-3.8l3.6 6.2h-7.2z".to_string(),
        Marker::Dot | Marker::None => "h0".to_string(),
    };
    let class = match marker {
        Marker::Dot | Marker::None => "mk".to_string(),
        m => format!("mk {}", m.code()),
    };
    let mut d = String::new();
    let mut values = Vec::with_capacity(marks.len());
    for m in marks {
        let _ = write!(d, "M{} {}{shape}", Px(x.px(m.x)), Px(y.px(m.y)));
        values.push(format!("{} {}", datum(m.x, c.x.unit), datum(m.y, c.y.unit)));
    }
    format!(
        "<path class=\"{class}\" d=\"{d}\" data-v=\"{}\"/>",
        values.join(",")
    )
}

/// A stack's layers as bars (side by side with the other stacks' at each x) or areas.
fn stack(
    c: &Chart,
    s: &super::Stack,
    key: &mut usize,
    x: &Fitted,
    y: &Fitted,
    f: &Frame,
) -> String {
    let tops = stacked(s);
    let columns: Vec<f64> = tops.keys().map(|b| x.px(f64::from_bits(*b))).collect();
    let mut sorted = columns.clone();
    sorted.sort_by(f64::total_cmp);
    let spacing = sorted
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0.5)
        .fold((f.right - f.left) / 8.0, f64::min);
    let width = spacing * 0.8 / s.slots as f64;
    let mut out = String::new();
    let mut level: BTreeMap<u64, usize> = BTreeMap::new();
    for l in &s.layers {
        let fill = if l.hatched {
            format!("url(#h-{}-{})", html(&c.name), *key)
        } else {
            l.colour.0.to_string()
        };
        let _ = write!(
            out,
            "<g data-s=\"{}\" data-n=\"{}\" fill=\"{fill}\">",
            *key,
            html(&l.name)
        );
        let mut edge = Vec::new();
        let (mut bars, mut values) = (String::new(), Vec::new());
        for (vx, v) in &l.values {
            let at = level.entry(vx.to_bits()).or_default();
            let col = &tops[&vx.to_bits()];
            let top = col[*at];
            let bottom = if *at == 0 { 0.0 } else { col[*at - 1] };
            *at += 1;
            edge.push((*vx, bottom, top));
            if s.kind == StackKind::Bars && top > bottom {
                // From the middle of its top (the point the readout takes), round and closed.
                let middle = x.px(*vx) - spacing * 0.4 + width * (s.slot as f64 + 0.5);
                let (py0, py1) = (y.px(bottom), y.px(top));
                let _ = write!(
                    bars,
                    "M{} {}h{}V{}h-{}V{}z",
                    Px(middle),
                    Px(py1),
                    Px(width / 2.0),
                    Px(py1 + (py0 - py1).max(0.5)),
                    Px(width),
                    Px(py1)
                );
                values.push(format!("{} {}", datum(*vx, c.x.unit), datum(*v, c.y.unit)));
            }
        }
        if !bars.is_empty() {
            let _ = write!(out, "<path d=\"{bars}\" data-v=\"{}\"/>", values.join(","));
        }
        if s.kind == StackKind::Area && !edge.is_empty() {
            let upper = edge.iter().map(|e| (x.px(e.0), y.px(e.2)));
            let lower = edge.iter().rev().map(|e| (x.px(e.0), y.px(e.1)));
            let _ = write!(out, "<path d=\"{}Z\"/>", path(upper.chain(lower)));
        }
        out.push_str("</g>\n");
        *key += 1;
    }
    out
}

/// The levels: a dashed line across the plot each, its label at the left end above it (below it
/// when it says so).
fn levels(c: &Chart, y: &Fitted, f: &Frame) -> String {
    let mut out = String::new();
    for l in &c.levels {
        let py = y.px(l.y);
        let ty = if l.below { py + 11.0 } else { py - 3.0 };
        let _ = write!(
            out,
            "<path class=\"lvl\" d=\"M{} {}H{}\"/><text class=\"lvll\" x=\"{}\" y=\"{}\">{}</text>",
            Px(f.left),
            Px(py),
            Px(f.right),
            Px(f.left + 4.0),
            Px(ty),
            html(&l.label)
        );
    }
    out
}

/// The knee's line, and its label inside the plot just under the top (the boundaries' labels are
/// above it, so neither hides the other), on the line's left when the right has no room.
fn knee(k: &KneeLine, x: &Fitted, f: &Frame) -> String {
    let px = x.px(k.x);
    let room = 6.0 * k.label.chars().count() as f64 + 4.0;
    let (lx, anchor) = if px + room > f.right {
        (px - 3.0, " text-anchor=\"end\"")
    } else {
        (px + 3.0, "")
    };
    format!(
        "<g data-knee=\"{}\"><title>{}</title><path class=\"knee\" d=\"M{} {}V{}\"/><text class=\"kneel\" x=\"{}\" y=\"{}\"{anchor}>{}</text></g>",
        html(&k.cause),
        html(&k.title),
        Px(px),
        Px(f.top),
        Px(f.bottom),
        Px(lx),
        Px(f.top + 11.0),
        html(&k.label)
    )
}

/// The boundaries' labels at the top, leaving out one that would overlap the one before.
fn boundary_labels(c: &Chart, x: &Fitted, f: &Frame) -> String {
    let mut out = String::new();
    let mut last = f64::NEG_INFINITY;
    for b in &c.boundaries {
        let px = x.px(b.x);
        let room = 7.0 * b.label.chars().count() as f64 + 4.0;
        if b.label.is_empty() || px - last < room {
            continue;
        }
        let _ = write!(
            out,
            "<text class=\"bndl\" x=\"{}\" y=\"{}\">{}</text>",
            Px(px + 2.0),
            Px(f.top - 3.0),
            html(&b.label)
        );
        last = px;
    }
    out
}
