//! A text with `${name}` in it (a path, a header's value, a body), split once into literal bytes and
//! the variables between them, so that sending it is copying slices: nothing is parsed per request.
//!
//! `${` opens a variable that `}` closes; a name is ASCII letters, digits, `_`, `-` and `.`, starting
//! with a letter or `_`. `$${` is a literal `${`; any other `$` is itself. Three built-ins are written
//! as calls: `${counter()}` (the request's number in the step, unique across a fleet where arrivals
//! are numbered by the step), `${random(LOW,HIGH)}` (a whole number in that range, both ends included)
//! and `${uuid()}` (a random version 4 UUID).
use std::io::Write;

use crate::rng::Rng;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(Vec<u8>),
    /// A variable, by its index in the names the template was compiled against.
    Var(usize),
    Builtin(Builtin),
}

/// A value made per request rather than read from a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Counter,
    Random { low: i64, high: i64 },
    Uuid,
}

impl Builtin {
    /// `name(args)` as a built-in, or why it is none.
    fn parse(call: &str) -> Result<Builtin, String> {
        let (name, args) = call
            .strip_suffix(')')
            .and_then(|c| c.split_once('('))
            .ok_or("a call is written name(arguments)")?;
        let args: Vec<&str> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        match (name.trim(), args.as_slice()) {
            ("counter", []) => Ok(Builtin::Counter),
            ("uuid", []) => Ok(Builtin::Uuid),
            ("random", [low, high]) => {
                let low: i64 = low
                    .parse()
                    .map_err(|_| format!("'{low}' is not a whole number"))?;
                let high: i64 = high
                    .parse()
                    .map_err(|_| format!("'{high}' is not a whole number"))?;
                if low > high {
                    return Err(format!("{low} is above {high}"));
                }
                Ok(Builtin::Random { low, high })
            }
            ("counter" | "uuid", _) => Err(format!("{} takes no arguments", name.trim())),
            ("random", _) => Err("random takes two: random(LOW,HIGH)".into()),
            _ => Err("the built-ins are counter(), random(LOW,HIGH) and uuid()".into()),
        }
    }

    fn write(self, counter: u64, rng: &mut Rng, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = match self {
            Builtin::Counter => write!(out, "{counter}"),
            Builtin::Random { low, high } => {
                let span = (high as i128 - low as i128 + 1) as u128;
                let draw = (u128::from(rng.next_u64()) * span) >> 64;
                write!(out, "{}", low as i128 + draw as i128)
            }
            Builtin::Uuid => {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
                b[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
                b[6] = (b[6] & 0x0f) | 0x40;
                b[8] = (b[8] & 0x3f) | 0x80;
                for (i, byte) in b.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        out.push(b'-');
                    }
                    let _ = write!(out, "{byte:02x}");
                }
                Ok(())
            }
        };
    }
}

/// A text compiled against a list of variable names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// What is wrong with a template, said with the text around it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("'${{' at byte {at} of '{text}' is never closed by '}}'")]
    Unclosed { text: String, at: usize },
    #[error(
        "'${{{name}}}' in '{text}' is not a variable name (letters, digits, '_', '-', '.', from a letter or '_')"
    )]
    BadName { text: String, name: String },
    #[error("'${{{call}}}' in '{text}': {why}")]
    BadBuiltin {
        text: String,
        call: String,
        why: String,
    },
    #[error("'${{{name}}}' in '{text}' names no variable; the variables are: {known}")]
    Unknown {
        text: String,
        name: String,
        known: String,
    },
}

impl Template {
    /// Compiles `text` against `names`, the variables the run defines, in their order.
    pub fn compile(text: &str, names: &[&str]) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.extend_from_slice(&rest.as_bytes()[..at]);
            let after = &rest[at + 1..];
            if let Some(escaped) = after.strip_prefix("${") {
                literal.extend_from_slice(b"${");
                rest = escaped;
            } else if let Some(open) = after.strip_prefix('{') {
                let Some(close) = open.find('}') else {
                    let at = text.len() - rest.len() + at;
                    return Err(TemplateError::Unclosed {
                        text: text.into(),
                        at,
                    });
                };
                let name = &open[..close];
                let part = if name.contains('(') {
                    Part::Builtin(Builtin::parse(name).map_err(|why| {
                        TemplateError::BadBuiltin {
                            text: text.into(),
                            call: name.into(),
                            why,
                        }
                    })?)
                } else {
                    Part::Var(variable(text, name, names)?)
                };
                if !literal.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut literal)));
                }
                parts.push(part);
                rest = &open[close + 1..];
            } else {
                literal.push(b'$');
                rest = after;
            }
        }
        literal.extend_from_slice(rest.as_bytes());
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Template { parts })
    }

    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Whether it holds no variable: its bytes are the same for every request.
    pub fn is_fixed(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// The variables it uses, by index, in order of appearance (repeats included).
    pub fn variables(&self) -> impl Iterator<Item = usize> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(i) => Some(*i),
            Part::Literal(_) | Part::Builtin(_) => None,
        })
    }

    /// Appends the text to `out` with each variable's value (by index in `values`), `counter` for
    /// `${counter()}` and draws from `rng` for the random built-ins.
    pub fn render(&self, values: &[&[u8]], counter: u64, rng: &mut Rng, out: &mut Vec<u8>) {
        for part in &self.parts {
            match part {
                Part::Literal(bytes) => out.extend_from_slice(bytes),
                Part::Var(i) => out.extend_from_slice(values[*i]),
                Part::Builtin(b) => b.write(counter, rng, out),
            }
        }
    }
}

/// Whether `name` may name a variable: ASCII letters, digits, `_`, `-` and `.`, from a letter or `_`.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn variable(text: &str, name: &str, names: &[&str]) -> Result<usize, TemplateError> {
    if !is_variable_name(name) {
        return Err(TemplateError::BadName {
            text: text.into(),
            name: name.into(),
        });
    }
    names
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| TemplateError::Unknown {
            text: text.into(),
            name: name.into(),
            known: if names.is_empty() {
                "none (define them with a feeder or a setup's extraction)".into()
            } else {
                names.join(", ")
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &Template, values: &[&[u8]]) -> String {
        let mut out = Vec::new();
        t.render(values, 0, &mut Rng::new(1), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn variables_are_found_once_and_filled_per_request() {
        let t = Template::compile(
            "/users/${id}/orders?token=${token}&again=${id}",
            &["token", "id"],
        )
        .unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), [1, 0, 1]);
        assert!(!t.is_fixed());
        assert_eq!(
            render(&t, &[b"abc", b"42"]),
            "/users/42/orders?token=abc&again=42"
        );
        assert_eq!(render(&t, &[b"", b"7"]), "/users/7/orders?token=&again=7");
    }

    #[test]
    fn a_dollar_that_opens_nothing_is_itself_and_double_dollar_escapes() {
        let t = Template::compile("$5 for $${literal} and ${x}$", &["x"]).unwrap();
        assert_eq!(render(&t, &[b"y"]), "$5 for ${literal} and y$");
        let fixed = Template::compile("price: $10", &[]).unwrap();
        assert!(fixed.is_fixed());
        assert_eq!(fixed.parts(), [Part::Literal(b"price: $10".to_vec())]);
        assert_eq!(Template::compile("", &[]).unwrap().parts(), []);
    }

    #[test]
    fn a_bad_template_is_refused_with_its_text() {
        let e = Template::compile("/a/${id", &["id"]).unwrap_err();
        assert_eq!(
            e,
            TemplateError::Unclosed {
                text: "/a/${id".into(),
                at: 3
            }
        );
        let e = Template::compile("/a/${9lives}", &["id"]).unwrap_err();
        assert!(e.to_string().contains("not a variable name"), "{e}");
        let e = Template::compile("/a/${user}", &["id", "token"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'${user}' in '/a/${user}' names no variable; the variables are: id, token"
        );
        let e = Template::compile("${x}", &[]).unwrap_err();
        assert!(e.to_string().contains("define them with a feeder"), "{e}");
    }

    #[test]
    fn built_ins_are_made_per_request() {
        let t = Template::compile("/o/${counter()}?n=${random(-2, 2)}&id=${uuid()}", &[]).unwrap();
        let mut rng = Rng::new(9);
        let mut seen = std::collections::BTreeSet::new();
        for counter in 0..2000 {
            let mut out = Vec::new();
            t.render(&[], counter, &mut rng, &mut out);
            let text = String::from_utf8(out).unwrap();
            let (path, query) = text.split_once('?').unwrap();
            assert_eq!(path, format!("/o/{counter}"));
            let (n, id) = query
                .strip_prefix("n=")
                .unwrap()
                .split_once("&id=")
                .unwrap();
            seen.insert(n.parse::<i64>().unwrap());
            // 8-4-4-4-12 hex digits, version 4, variant 10xx.
            let groups: Vec<&str> = id.split('-').collect();
            assert_eq!(
                groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12]
            );
            assert!(groups[2].starts_with('4'), "{id}");
            assert!("89ab".contains(&groups[3][..1]), "{id}");
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [-2, -1, 0, 1, 2]);
        let e = |t: &str| Template::compile(t, &[]).unwrap_err().to_string();
        assert_eq!(
            e("${random(5,1)}"),
            "'${random(5,1)}' in '${random(5,1)}': 5 is above 1"
        );
        assert!(e("${uuid(4)}").contains("uuid takes no arguments"));
        assert!(e("${now()}").contains("the built-ins are counter()"));
        assert!(e("${random(1)}").contains("random takes two"));
    }
}
