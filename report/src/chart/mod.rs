//! Charts as SVG text, drawn from data by our own code: same data, same bytes. One [`Chart`] is one
//! `<figure class="chart" data-chart="NAME">` of the page contract: an XY plot of line series (point
//! markers, hollow for lower bounds; or a scatter of shaped markers, each with its hover text),
//! min–max bands, stacked bars or areas, the ideal y = x line, vertical boundaries and labelled
//! horizontal levels, background shading of steps by trust verdict (reasons on hover), and a legend
//! whose entries toggle what they name. Nothing here knows a run: the pages say what to draw.
mod axis;
mod plot;
mod svg;

pub use axis::{Axis, Scale, Unit, short, trimmed};
use std::collections::HashMap;

use results::verdict::Verdict;

use crate::escape::html;

/// A colour of a series, as CSS takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour(pub &'static str);

/// Colours told apart by most eyes (Tableau 10), in the order series take them.
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

impl Colour {
    /// The `i`th colour of the palette (it repeats after ten): one per series, or one per run.
    pub fn nth(i: usize) -> Colour {
        Colour(PALETTE[i % PALETTE.len()])
    }

    pub const GREY: Colour = Colour("#888");
}

/// How a series' line is drawn: a comparison draws its baseline solid and the other runs dashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dash {
    #[default]
    Solid,
    Dashed,
    Dotted,
}

/// How one point is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A filled dot.
    Dot,
    /// A hollow dot: the value is a lower bound (the true one is higher).
    Hollow,
    /// On the line, unmarked.
    None,
    /// Shapes that tell a scatter's classes apart without their colour (a search's probes): a
    /// cross, a hollow square, a hollow diamond, a filled triangle.
    Cross,
    Square,
    Diamond,
    Triangle,
}

impl Marker {
    /// Every marker drawn as a shape, in the order a series' markers are written.
    pub(crate) const SHAPES: [Marker; 6] = [
        Marker::Dot,
        Marker::Hollow,
        Marker::Cross,
        Marker::Square,
        Marker::Diamond,
        Marker::Triangle,
    ];

    /// A scatter's legend key: its shape (`MARK_STYLE`).
    fn key(self) -> &'static str {
        match self {
            Marker::Dot | Marker::None => "m-dt",
            Marker::Hollow => "m-lb",
            Marker::Cross => "m-x",
            Marker::Square => "m-sq",
            Marker::Diamond => "m-dm",
            Marker::Triangle => "m-tr",
        }
    }

    /// The class its path carries beside `mk`.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Marker::Dot | Marker::None => "dt",
            Marker::Hollow => "lb",
            Marker::Cross => "x",
            Marker::Square => "sq",
            Marker::Diamond => "dm",
            Marker::Triangle => "tr",
        }
    }
}

/// One point of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub marker: Marker,
}

impl Mark {
    pub fn at(x: f64, y: f64) -> Mark {
        Mark {
            x,
            y,
            marker: Marker::Dot,
        }
    }

    /// A value that is only a lower bound, drawn hollow.
    pub fn lower_bound(x: f64, y: f64) -> Mark {
        Mark {
            x,
            y,
            marker: Marker::Hollow,
        }
    }

    pub fn plain(x: f64, y: f64) -> Mark {
        Mark {
            x,
            y,
            marker: Marker::None,
        }
    }

    pub fn shaped(x: f64, y: f64, marker: Marker) -> Mark {
        Mark { x, y, marker }
    }
}

/// A line through points, or a scatter of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub colour: Colour,
    pub dash: Dash,
    /// Whether the points are joined (along x); false: markers only, where a line through them
    /// would zigzag (a search's probes, several at one rate).
    pub joined: bool,
    /// Each mark's hover text, by place (none when empty): each is then a path of its own.
    pub titles: Vec<String>,
    pub marks: Vec<Mark>,
}

impl Series {
    pub fn new(name: &str, colour: Colour, marks: Vec<Mark>) -> Series {
        Series {
            name: name.to_string(),
            colour,
            dash: Dash::Solid,
            joined: true,
            titles: Vec::new(),
            marks,
        }
    }

    pub fn dash(mut self, dash: Dash) -> Series {
        self.dash = dash;
        self
    }

    /// Markers only, not joined.
    pub fn scatter(mut self) -> Series {
        self.joined = false;
        self
    }

    /// Each mark's hover text, in the marks' order.
    pub fn titled(mut self, titles: Vec<String>) -> Series {
        self.titles = titles;
        self
    }
}

/// A shaded range between a low and a high value at each x (the 1 s min–max of a rate).
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub name: String,
    pub colour: Colour,
    /// (x, low, high), x rising.
    pub points: Vec<(f64, f64, f64)>,
}

/// One layer of a stack: its value at each x.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub name: String,
    pub colour: Colour,
    /// Drawn hatched: set apart from the plain layers (the generator's own failures, not the server's).
    pub hatched: bool,
    pub values: Vec<(f64, f64)>,
}

impl Layer {
    pub fn new(name: &str, colour: Colour, values: Vec<(f64, f64)>) -> Layer {
        Layer {
            name: name.to_string(),
            colour,
            hatched: false,
            values,
        }
    }

    pub fn hatched(mut self) -> Layer {
        self.hatched = true;
        self
    }
}

/// How a stack is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackKind {
    Bars,
    Area,
}

/// Layers drawn one on another, each x's values added up. Bars of several stacks stand side by
/// side at each x: `slot` of `slots`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub kind: StackKind,
    pub layers: Vec<Layer>,
    pub slot: usize,
    pub slots: usize,
}

impl Stack {
    pub fn bars(layers: Vec<Layer>) -> Stack {
        Stack {
            kind: StackKind::Bars,
            layers,
            slot: 0,
            slots: 1,
        }
    }

    pub fn area(layers: Vec<Layer>) -> Stack {
        Stack {
            kind: StackKind::Area,
            ..Stack::bars(layers)
        }
    }

    /// Bars standing `slot`th of `slots` side by side at each x.
    pub fn beside(mut self, slot: usize, slots: usize) -> Stack {
        self.slots = slots.max(1);
        self.slot = slot.min(self.slots - 1);
        self
    }
}

/// A range of x shaded by the trust verdict of the step it covers; `title` is its hover text.
#[derive(Debug, Clone, PartialEq)]
pub struct Shade {
    pub from: f64,
    pub to: f64,
    pub verdict: Verdict,
    pub title: String,
}

/// A vertical line at `x` (a step's start on a timeline), with a short label.
#[derive(Debug, Clone, PartialEq)]
pub struct Boundary {
    pub x: f64,
    pub label: String,
}

/// The run's knee on a chart against the step value: a line at `x`, labelled with its cause
/// (`data-knee` the cause's name), `title` the answer's words for it on hover.
#[derive(Debug, Clone, PartialEq)]
pub struct KneeLine {
    pub x: f64,
    pub cause: String,
    pub label: String,
    pub title: String,
}

/// A horizontal line at `y` across the plot (a bound a search found), labelled at its left end,
/// above the line or below it (two levels close together keep their labels apart).
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub y: f64,
    pub label: String,
    pub below: bool,
}

/// The shadings' hover texts a page already holds. A step's reasons shade every chart of a run
/// alike: written out once (`<rect id="shade-N"><title>…`), each later shading with the same text
/// points at it (`data-t="N"`) and the page's script copies the title over, so a long run's page
/// carries its reasons once, not once per chart.
#[derive(Debug, Default)]
pub struct Titles(HashMap<String, usize>);

impl Titles {
    /// `Ok(n)`: the text is new to the page and is number `n`; `Err(n)`: it already is, as `n`.
    fn seen(&mut self, text: &str) -> Result<usize, usize> {
        if let Some(n) = self.0.get(text) {
            return Err(*n);
        }
        let n = self.0.len();
        self.0.insert(text.to_string(), n);
        Ok(n)
    }
}

/// One chart: what to draw and how its axes read.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// `data-chart`, the name the page contract lists.
    pub name: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub bands: Vec<Band>,
    pub stacks: Vec<Stack>,
    pub shades: Vec<Shade>,
    pub boundaries: Vec<Boundary>,
    pub levels: Vec<Level>,
    /// The run's knee, drawn apart from the boundaries (whose labels give way to each other).
    pub knee: Option<KneeLine>,
    /// The ideal y = x line, with its legend name.
    pub ideal: Option<String>,
    /// Also drawn on the other y scale, with a switch between the two (latency: log and linear).
    pub switch_scale: Option<Scale>,
    /// Words under the chart (what hollow points mean, what was left out).
    pub note: Option<String>,
    /// The drawing's size in SVG units (it scales to the page's width).
    pub size: (f64, f64),
}

impl Chart {
    pub fn new(name: &str, title: &str, x: Axis, y: Axis) -> Chart {
        Chart {
            name: name.to_string(),
            title: title.to_string(),
            x,
            y,
            series: Vec::new(),
            bands: Vec::new(),
            stacks: Vec::new(),
            shades: Vec::new(),
            boundaries: Vec::new(),
            levels: Vec::new(),
            knee: None,
            ideal: None,
            switch_scale: None,
            note: None,
            size: (720.0, 260.0),
        }
    }

    pub fn series(mut self, s: Series) -> Chart {
        self.series.push(s);
        self
    }

    pub fn band(mut self, b: Band) -> Chart {
        self.bands.push(b);
        self
    }

    pub fn stack(mut self, s: Stack) -> Chart {
        self.stacks.push(s);
        self
    }

    pub fn shades(mut self, shades: Vec<Shade>) -> Chart {
        self.shades = shades;
        self
    }

    pub fn boundaries(mut self, b: Vec<Boundary>) -> Chart {
        self.boundaries = b;
        self
    }

    pub fn levels(mut self, l: Vec<Level>) -> Chart {
        self.levels = l;
        self
    }

    pub fn knee(mut self, k: Option<KneeLine>) -> Chart {
        self.knee = k;
        self
    }

    pub fn ideal(mut self, name: &str) -> Chart {
        self.ideal = Some(name.to_string());
        self
    }

    pub fn switch_scale(mut self, other: Scale) -> Chart {
        self.switch_scale = Some(other);
        self
    }

    /// Drawn on a log y scale when its positive values span more than `ratio` times (a line of
    /// tens of milliseconds beside one of seconds would lie flat on a linear axis's foot), on a
    /// linear one otherwise; the other scale a switch away. Call it once everything is added.
    pub fn log_when_spanning(mut self, ratio: f64) -> Chart {
        let (lo, hi) = plot::ys(&self)
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        let (scale, other) = match hi > lo * ratio {
            true => (Scale::Log, Scale::Linear),
            false => (Scale::Linear, Scale::Log),
        };
        self.y = self.y.with_scale(scale);
        self.switch_scale(other)
    }

    pub fn note(mut self, note: &str) -> Chart {
        self.note = Some(note.to_string());
        self
    }

    pub fn size(mut self, width: f64, height: f64) -> Chart {
        self.size = (width, height);
        self
    }

    /// The chart as a `<figure>`: caption, SVG, legend, note; on its own, every hover text in it.
    pub fn render(&self) -> String {
        self.render_in(&mut Titles::default())
    }

    /// The chart as one of a page's: a shading's hover text already on the page is not written
    /// again (see [`Titles`]).
    pub fn render_in(&self, titles: &mut Titles) -> String {
        let mut out = format!(
            "<figure class=\"chart\" data-chart=\"{}\">\n<figcaption>{}</figcaption>\n",
            html(&self.name),
            html(&self.title)
        );
        out.push_str(&plot::svg(self, titles));
        out.push_str(&self.legend());
        if let Some(n) = &self.note {
            out.push_str(&format!("<p class=\"note\">{}</p>\n", html(n)));
        }
        out.push_str("</figure>\n");
        out
    }

    /// What the legend lists, in the order the plot numbers them (`data-s`): bands, stack layers,
    /// series, and the ideal line last.
    fn keys(&self) -> Vec<(String, Colour, &'static str)> {
        let mut keys: Vec<(String, Colour, &'static str)> = Vec::new();
        for b in &self.bands {
            keys.push((b.name.clone(), b.colour, "band"));
        }
        for s in &self.stacks {
            for l in &s.layers {
                keys.push((
                    l.name.clone(),
                    l.colour,
                    if l.hatched { "hatch" } else { "fill" },
                ));
            }
        }
        for s in &self.series {
            let kind = match (s.joined, s.dash) {
                // A scatter's key is its marker's shape.
                (false, _) => s.marks.first().map_or(Marker::Dot, |m| m.marker).key(),
                (true, Dash::Solid) => "line",
                (true, Dash::Dashed) => "dash",
                (true, Dash::Dotted) => "dot",
            };
            keys.push((s.name.clone(), s.colour, kind));
        }
        if let Some(i) = &self.ideal {
            keys.push((i.clone(), Colour::GREY, "dot"));
        }
        keys
    }

    fn legend(&self) -> String {
        let mut out = String::from("<div class=\"legend\">");
        for (i, (name, colour, kind)) in self.keys().into_iter().enumerate() {
            out.push_str(&format!(
                "<button type=\"button\" class=\"key {kind}\" data-s=\"{i}\" style=\"--c:{}\">{}</button>",
                colour.0,
                html(&name)
            ));
        }
        if let Some(other) = self.switch_scale {
            let name = match other {
                Scale::Log | Scale::Percentile => "log scale",
                Scale::Linear => "linear scale",
            };
            out.push_str(&format!(
                "<button type=\"button\" class=\"scale\" aria-pressed=\"false\">{name}</button>"
            ));
        }
        // Only the verdicts shaded here are explained here.
        let shaded: Vec<&str> = [Verdict::Degraded, Verdict::Invalid]
            .into_iter()
            .filter(|v| self.shades.iter().any(|s| s.verdict == *v))
            .map(Verdict::name)
            .collect();
        if !shaded.is_empty() {
            out.push_str("<span class=\"shade-key\">");
            for v in shaded {
                out.push_str(&format!("<i class=\"t-{v}\"></i>{v} "));
            }
            out.push_str("(hover for why)</span>");
        }
        out.push_str("</div>\n");
        out
    }
}

/// A chart with nothing to draw yet: its labelled place, saying `why`.
pub fn empty(name: &str, title: &str, why: &str) -> String {
    format!(
        "<figure class=\"chart empty\" data-chart=\"{}\">\n<figcaption>{}</figcaption>\n<p>{}</p>\n</figure>\n",
        html(name),
        html(title),
        html(why)
    )
}

/// The charts' CSS, for the page that holds them.
pub const STYLE: &str = "figure.chart svg{width:100%;height:auto;display:block;font:11px system-ui,sans-serif}\
figure.chart figcaption{font-weight:600}.ax{stroke:#444;fill:none}.grid{stroke:#e4e4e4}\
.tk{fill:#444}.lbl{fill:#222;font-size:12px}.s path{fill:none;stroke:currentColor;stroke-width:1.6}\
.s path.mk{stroke-width:6.6;stroke-linecap:round;stroke-dasharray:none}.s path.lb{fill:#fff;stroke-width:1.5}\
.dash path{stroke-dasharray:6 4}.dot path{stroke-dasharray:2 3}.ideal{stroke:#888;stroke-dasharray:2 3;fill:none}\
.band path{fill:currentColor;fill-opacity:.18;stroke:none}.bnd{stroke:#999;stroke-dasharray:3 3}\
.bndl{fill:#777;font-size:10px}.knee{stroke:#b3261e;stroke-width:1.5;stroke-dasharray:6 3}\
.kneel{fill:#b3261e;font-size:10px;font-weight:600}.t-degraded{fill:#fdf0c4}.t-invalid{fill:#f9d0d0}.off{display:none}\
.ro{fill:#000;font-weight:600}.hl{fill:none;stroke:#000;stroke-width:2;pointer-events:none}\
.legend{display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center;font-size:12px}\
.key{border:0;background:none;padding:0 2px;cursor:pointer;font:inherit}\
.key::before{content:'';display:inline-block;width:18px;height:0;border-top:2px solid var(--c);vertical-align:middle;margin-right:4px}\
.key.dash::before{border-top-style:dashed}.key.dot::before{border-top-style:dotted}\
.key.fill::before,.key.hatch::before,.key.band::before{height:10px;border:0;background:var(--c)}\
.key.band::before{opacity:.3}.key.hatch::before{background:repeating-linear-gradient(45deg,var(--c) 0 2px,#fff 2px 4px)}\
.key.hidden{opacity:.35;text-decoration:line-through}.scale{font:inherit;cursor:pointer}.scale[aria-pressed=true]{background:#333;color:#fff}\
.shade-key i.t-degraded{background:#fdf0c4}.shade-key i.t-invalid{background:#f9d0d0}.shade-key i{display:inline-block;width:12px;height:10px;margin:0 3px 0 6px;vertical-align:middle}\
figure.chart .note{margin:.2em 0;color:#555;font-size:12px}";

/// The CSS of scatters (shaped markers and their legend keys) and levels, for a page that draws
/// them; a page without them keeps the bytes it had.
pub const MARK_STYLE: &str = ".s path.mk.x{stroke-width:1.8;stroke-linecap:butt}\
.s path.mk.sq,.s path.mk.dm{fill:#fff;stroke-width:1.6}.s path.mk.tr{fill:currentColor;stroke-width:1}\
.lvl{stroke:#555;stroke-dasharray:5 3;fill:none}.lvll{fill:#333;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}\
.key[class*=m-]::before{width:8px;height:8px;border:0;margin:0 6px 0 4px}\
.key.m-dt::before{border-radius:50%;background:var(--c)}.key.m-lb::before{border-radius:50%;border:1.5px solid var(--c)}\
.key.m-sq::before{border:1.5px solid var(--c)}.key.m-dm::before{border:1.5px solid var(--c);transform:rotate(45deg)}\
.key.m-tr::before{background:var(--c);clip-path:polygon(50% 0,100% 100%,0 100%)}\
.key.m-x::before{background:linear-gradient(45deg,transparent 42%,var(--c) 42% 58%,transparent 58%),linear-gradient(-45deg,transparent 42%,var(--c) 42% 58%,transparent 58%)}";

#[cfg(test)]
mod tests {
    use super::*;

    fn rates() -> Chart {
        Chart::new(
            "rates",
            "served <b>",
            Axis::linear("offered", Unit::Si),
            Axis::linear("served", Unit::Si),
        )
        .series(Series::new(
            "ok_rate",
            Colour::nth(0),
            vec![Mark::at(100.0, 100.0), Mark::lower_bound(200.0, 150.0)],
        ))
        .ideal("ideal")
    }

    #[test]
    fn the_same_chart_gives_the_same_bytes() {
        assert_eq!(rates().render(), rates().render());
    }

    #[test]
    fn a_chart_is_a_named_figure_with_one_svg_and_escaped_words() {
        let out = rates().render();
        assert!(out.starts_with("<figure class=\"chart\" data-chart=\"rates\">"));
        assert_eq!(out.matches("<svg").count(), 1);
        assert!(out.contains("served &lt;b&gt;") && !out.contains("<b>"));
        assert_eq!(
            out.matches("class=\"mk lb\"").count(),
            1,
            "one hollow point"
        );
        assert!(
            out.contains("data-s=\"1\""),
            "the ideal line is a legend key"
        );
    }

    #[test]
    fn shading_says_why_and_the_legend_explains_it() {
        let c = rates().shades(vec![
            Shade {
                from: 50.0,
                to: 150.0,
                verdict: Verdict::Valid,
                title: "fine".into(),
            },
            Shade {
                from: 150.0,
                to: 250.0,
                verdict: Verdict::Invalid,
                title: "cpu 99 % <hot>".into(),
            },
        ]);
        let out = c.render();
        assert!(out.contains("<title>cpu 99 % &lt;hot&gt;</title>"));
        assert!(
            !out.contains("<title>fine</title>"),
            "a valid step is not shaded"
        );
        assert!(out.contains("shade-key") && out.contains("invalid (hover"));
        assert!(
            !out.contains("degraded"),
            "no degraded step, no key for one"
        );
    }

    #[test]
    fn a_page_carries_each_hover_text_once() {
        let shaded = |name: &str| {
            let mut c = rates();
            c.name = name.into();
            c.shades(vec![Shade {
                from: 150.0,
                to: 250.0,
                verdict: Verdict::Degraded,
                title: "lag".into(),
            }])
        };
        let mut titles = Titles::default();
        let first = shaded("a").render_in(&mut titles);
        let second = shaded("b").render_in(&mut titles);
        assert!(first.contains("id=\"shade-0\"><title>lag</title>"));
        assert!(second.contains("data-t=\"0\"/>") && !second.contains("<title>"));
        assert!(
            shaded("c").render().contains("<title>lag</title>"),
            "alone, it has its own"
        );
    }

    #[test]
    fn a_switched_chart_draws_both_scales() {
        let out = rates().switch_scale(Scale::Log).render();
        assert_eq!(out.matches("class=\"plot lin\"").count(), 1);
        assert_eq!(out.matches("class=\"plot log off\"").count(), 1);
        assert!(out.contains("class=\"scale\""));
    }

    #[test]
    fn lines_and_bands_run_along_x_whatever_the_order_given() {
        let marks = |xs: &[f64]| xs.iter().map(|x| Mark::at(*x, *x)).collect::<Vec<_>>();
        let chart = |xs: &[f64]| {
            let band = xs.iter().map(|x| (*x, x - 1.0, x + 1.0)).collect();
            Chart::new(
                "c",
                "c",
                Axis::linear("x", Unit::Si),
                Axis::linear("y", Unit::Si),
            )
            .series(Series::new("s", Colour::nth(0), marks(xs)))
            .band(Band {
                name: "b".into(),
                colour: Colour::nth(0),
                points: band,
            })
        };
        let paths = |out: String| {
            out.split("<path d=\"")
                .skip(1)
                .map(|p| p.split('"').next().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            paths(chart(&[30.0, 10.0, 20.0]).render()),
            paths(chart(&[10.0, 20.0, 30.0]).render())
        );
    }

    #[test]
    fn ranges_at_one_x_are_one_band_from_the_lowest_to_the_highest() {
        let band = |points: Vec<(f64, f64, f64)>| {
            let out = Chart::new(
                "c",
                "c",
                Axis::linear("x", Unit::Si),
                Axis::linear("y", Unit::Si).with_range(0.0, 10.0),
            )
            .band(Band {
                name: "b".into(),
                colour: Colour::nth(0),
                points,
            })
            .render();
            let at = out.find("class=\"band\"").unwrap();
            out[at..at + out[at..].find("</g>").unwrap()].to_string()
        };
        assert_eq!(
            band(vec![(1.0, 4.0, 5.0), (2.0, 4.0, 6.0), (1.0, 2.0, 3.0)]),
            band(vec![(1.0, 2.0, 5.0), (2.0, 4.0, 6.0)])
        );
    }

    #[test]
    fn stacked_layers_sit_on_the_ones_below() {
        let layers = || {
            vec![
                Layer::new("a", Colour::nth(0), vec![(1.0, 2.0), (2.0, 2.0)]),
                Layer::new("b", Colour::nth(1), vec![(1.0, 3.0), (2.0, 0.0)]).hatched(),
            ]
        };
        let axes = || (Axis::linear("x", Unit::Si), Axis::linear("y", Unit::Si));
        let (x, y) = axes();
        let bars = Chart::new("f", "f", x, y)
            .stack(Stack::bars(layers()))
            .render();
        // b's bar at x = 1 stands on a's: from 2 up to 5 on a 0..5 axis; b's zero at x = 2 is no bar.
        let shapes: usize = bars
            .split("<path d=\"")
            .skip(1)
            .filter(|p| p.contains("data-v="))
            .map(|p| p.split('"').next().unwrap().matches('z').count())
            .sum();
        assert_eq!(shapes, 3, "three bars: {bars}");
        assert!(bars.contains("data-v=\"1 2,2 2\"") && bars.contains("data-v=\"1 3\""));
        assert!(bars.contains("fill=\"url(#h-f-1)\"") && bars.contains("<pattern id=\"h-f-1\""));
        let (x, y) = axes();
        let area = Chart::new("a", "a", x, y)
            .stack(Stack::area(layers()))
            .render();
        assert_eq!(area.matches("Z\"/>").count(), 2, "one closed shape a layer");
        assert!(!area.contains("data-v="), "no bar");
    }

    #[test]
    fn a_scatter_draws_shaped_points_each_with_its_title_and_a_key_of_its_shape() {
        let marks = vec![
            Mark::shaped(1.0, 300.0, Marker::Cross),
            Mark::shaped(2.0, 100.0, Marker::Cross),
        ];
        let out = Chart::new(
            "c",
            "c",
            Axis::linear("probe", Unit::Si),
            Axis::linear("rate", Unit::Si),
        )
        .series(
            Series::new("fail", Colour::nth(3), marks)
                .scatter()
                .titled(vec!["first <x>".into(), "second".into()]),
        )
        .levels(vec![Level {
            y: 200.0,
            label: "fails: 200".into(),
            below: false,
        }])
        .render();
        let g = &out[out.find("data-n=\"fail\"").unwrap()..];
        let g = &g[..g.find("</g>").unwrap()];
        assert!(!g.contains("<path d="), "no line through a scatter: {g}");
        assert_eq!(
            g.matches("<path class=\"mk x\"").count(),
            2,
            "a path a point"
        );
        assert!(g.contains("data-v=\"1 300\"><title>first &lt;x&gt;</title></path>"));
        assert!(g.contains("data-v=\"2 100\"><title>second</title></path>"));
        assert!(out.contains("class=\"key m-x\""), "the key is the shape");
        assert!(out.contains("class=\"lvl\"") && out.contains(">fails: 200</text>"));
    }

    #[test]
    fn an_empty_place_says_why() {
        let out = empty("server", "Server CPU", "filled by <the> monitor");
        assert!(out.starts_with("<figure class=\"chart empty\" data-chart=\"server\">"));
        assert!(out.contains("filled by &lt;the&gt; monitor"));
    }
}
